#include "recorder/grammar/token_index.h"

#include <algorithm>
#include <numeric>

#include "recorder/grammar/grammar.h"

namespace trace::recorder::grammar {

std::shared_ptr<const TokenIndex> TokenIndex::Build(const engine::Tokenizer& tokenizer) {
  auto index = std::make_shared<TokenIndex>();
  TokenIndex& x = *index;
  x.vocab_size_ = tokenizer.vocab_size();
  x.offsets_.assign(static_cast<size_t>(x.vocab_size_) + 1, 0);
  for (int32_t id = 0; id < x.vocab_size_; ++id) {
    if (!tokenizer.IsSpecial(id)) x.bytes_ += tokenizer.TokenBytes(id);
    x.offsets_[id + 1] = static_cast<uint32_t>(x.bytes_.size());
  }

  // The trie, built from the tokens in byte order (a node's children come in byte order).
  std::vector<int32_t> order;
  for (int32_t id = 0; id < x.vocab_size_; ++id) {
    if (!x.Bytes(id).empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return x.Bytes(a) != x.Bytes(b) ? x.Bytes(a) < x.Bytes(b) : a < b;
  });
  x.trie_.emplace_back();
  std::vector<int32_t> path = {0};  // path[d]: the node at depth d of the previous token
  std::vector<int32_t> last_child = {-1};
  std::string_view prev;
  std::vector<std::vector<int32_t>> node_tokens(1);
  for (int32_t id : order) {
    std::string_view b = x.Bytes(id);
    size_t common = 0;
    while (common < b.size() && common < prev.size() && b[common] == prev[common]) ++common;
    path.resize(common + 1);
    last_child.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      int32_t parent = path[d];
      int32_t node = static_cast<int32_t>(x.trie_.size());
      x.trie_.emplace_back();
      node_tokens.emplace_back();
      x.trie_[node].byte = static_cast<uint8_t>(b[d]);
      if (last_child[d] < 0) {
        x.trie_[parent].first_child = node;
      } else {
        x.trie_[last_child[d]].next_sibling = node;
      }
      last_child[d] = node;
      path.push_back(node);
      last_child.push_back(-1);
    }
    node_tokens[path[b.size()]].push_back(id);
    prev = b;
  }
  for (size_t n = 0; n < x.trie_.size(); ++n) {
    x.trie_[n].tokens_begin = static_cast<int32_t>(x.trie_tokens_.size());
    x.trie_tokens_.insert(x.trie_tokens_.end(), node_tokens[n].begin(), node_tokens[n].end());
    x.trie_[n].tokens_end = static_cast<int32_t>(x.trie_tokens_.size());
  }

  // The string tables: each token run through the lexer from inside a string, between
  // characters, with no bounds.
  std::vector<int32_t> inside_chars(static_cast<size_t>(x.vocab_size_), -1);
  for (int32_t id : order) {
    std::string_view b = x.Bytes(id);
    uint32_t s = StringLexer::kInsideIdle;
    size_t i = 0;
    for (; i < b.size(); ++i) {
      uint32_t next;
      if (!StringLexer::Step(s, static_cast<uint8_t>(b[i]), 0, -1, &next)) break;
      s = next;
      if (StringLexer::Done(s)) break;
    }
    if (i == b.size()) {
      inside_chars[id] = StringLexer::Count(s);
      x.max_inside_chars_ = std::max(x.max_inside_chars_, inside_chars[id]);
    } else if (StringLexer::Done(s)) {
      x.closing_.push_back({id, StringLexer::Count(s), b.substr(i + 1)});
    }
  }
  std::stable_sort(x.closing_.begin(), x.closing_.end(),
                   [](const Closing& a, const Closing& b) { return a.rest < b.rest; });
  const size_t words = x.bitset_words();
  x.inside_at_most_.assign(words * static_cast<size_t>(x.max_inside_chars_ + 1), 0);
  for (int32_t id = 0; id < x.vocab_size_; ++id) {
    if (inside_chars[id] < 0) continue;
    for (int32_t r = inside_chars[id]; r <= x.max_inside_chars_; ++r) {
      x.inside_at_most_[static_cast<size_t>(r) * words + static_cast<size_t>(id / 64)] |=
          uint64_t{1} << (id % 64);
    }
  }
  return index;
}

}  // namespace trace::recorder::grammar
