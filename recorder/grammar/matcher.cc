#include "recorder/grammar/matcher.h"

#include <algorithm>

namespace trace::recorder::grammar {
namespace {

constexpr int kMaxClosureDepth = 512;

uint64_t NodeHash(int32_t rule, uint32_t state, int32_t parent) {
  uint64_t h = static_cast<uint64_t>(static_cast<uint32_t>(rule)) * 0x9E3779B97F4A7C15ULL;
  h ^= (static_cast<uint64_t>(state) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2));
  h ^= (static_cast<uint64_t>(static_cast<uint32_t>(parent)) * 0xC2B2AE3D27D4EB4FULL) + (h << 6);
  return h;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenIndex> index,
                 int32_t end_token)
    : grammar_(std::move(grammar)), index_(std::move(index)), end_token_(end_token) {
  Config start;
  const int32_t root = grammar_->root;
  visited_.clear();
  Closure(NewScratch(root, StartState(root), kBottom), &start, 0);
  Commit(start);
}

uint32_t Matcher::StartState(int32_t rule) const {
  const Rule& r = grammar_->rules[rule];
  return r.kind == Rule::kString ? StringLexer::kStart : static_cast<uint32_t>(r.start);
}

int32_t Matcher::NewScratch(int32_t rule, uint32_t state, int32_t parent) {
  scratch_.push_back({rule, state, parent});
  return -static_cast<int32_t>(scratch_.size()) - 1;
}

int32_t Matcher::Intern(int32_t ref) {
  if (ref >= kBottom) return ref;
  const Node n = Get(ref);
  const int32_t parent = Intern(n.parent);
  const uint64_t h = NodeHash(n.rule, n.state, parent);
  std::vector<int32_t>& bucket = interned_[h];
  for (int32_t id : bucket) {
    const Node& m = nodes_[static_cast<size_t>(id)];
    if (m.rule == n.rule && m.state == n.state && m.parent == parent) return id;
  }
  nodes_.push_back({n.rule, n.state, parent});
  bucket.push_back(static_cast<int32_t>(nodes_.size() - 1));
  return bucket.back();
}

bool Matcher::IsStringIdle(int32_t ref) const {
  const Node& n = Get(ref);
  return grammar_->rules[n.rule].kind == Rule::kString && StringLexer::Idle(n.state);
}

// Adds to `out` the frames reachable from `ref` without consuming a byte: entering called
// rules, and leaving rules that accept (returning to the caller's continuation).
void Matcher::Closure(int32_t ref, Config* out, int depth) {
  if (depth > kMaxClosureDepth) return;
  const Node n = Get(ref);
  for (const Node& v : visited_) {
    if (v.rule == n.rule && v.state == n.state && v.parent == n.parent) return;
  }
  visited_.push_back(n);
  const Rule& rule = grammar_->rules[n.rule];
  if (rule.kind == Rule::kString) {
    if (StringLexer::Done(n.state)) {
      Pop(ref, out, depth);
    } else {
      out->heads.push_back(ref);
    }
    return;
  }
  const State& s = grammar_->states[n.state];
  if (s.bytes_end > s.bytes_begin) out->heads.push_back(ref);
  for (uint32_t c = s.calls_begin; c < s.calls_end; ++c) {
    const CallEdge& e = grammar_->call_edges[c];
    int32_t ret = NewScratch(n.rule, static_cast<uint32_t>(e.to), n.parent);
    Closure(NewScratch(e.rule, StartState(e.rule), ret), out, depth + 1);
  }
  if (s.accepting) Pop(ref, out, depth);
}

void Matcher::Pop(int32_t ref, Config* out, int depth) {
  const int32_t parent = Get(ref).parent;
  if (parent == kBottom) {
    out->complete = true;
  } else {
    Closure(parent, out, depth + 1);
  }
}

void Matcher::Step(const Config& in, uint8_t byte, Config* out) {
  out->Clear();
  for (int32_t ref : in.heads) {
    const Node n = Get(ref);
    const Rule& rule = grammar_->rules[n.rule];
    int32_t next = 0;
    if (rule.kind == Rule::kString) {
      uint32_t to;
      if (!StringLexer::Step(n.state, byte, rule.min_chars, rule.max_chars, &to)) continue;
      next = NewScratch(n.rule, to, n.parent);
    } else {
      const State& s = grammar_->states[n.state];
      const ByteEdge* first = grammar_->byte_edges.data() + s.bytes_begin;
      const ByteEdge* last = grammar_->byte_edges.data() + s.bytes_end;
      const ByteEdge* e = std::upper_bound(
          first, last, byte, [](uint8_t b, const ByteEdge& edge) { return b < edge.lo; });
      if (e == first || (--e)->hi < byte) continue;
      next = NewScratch(n.rule, static_cast<uint32_t>(e->to), n.parent);
    }
    visited_.clear();
    const size_t before = out->heads.size();
    Closure(next, out, 0);
    // Identical frames reached from different heads: keep one.
    for (size_t i = before; i < out->heads.size();) {
      const Node& a = Get(out->heads[i]);
      bool dup = false;
      for (size_t j = 0; j < before && !dup; ++j) {
        const Node& b = Get(out->heads[j]);
        dup = a.rule == b.rule && a.state == b.state && a.parent == b.parent;
      }
      if (dup) {
        out->heads.erase(out->heads.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

bool Matcher::StepBytes(const Config& in, std::string_view bytes, Config* out) {
  Config a = in, b;
  for (size_t i = 0; i < bytes.size(); ++i) {
    Step(a, static_cast<uint8_t>(bytes[i]), &b);
    std::swap(a, b);
    // Nothing can follow once no frame is left (complete or not).
    if (a.heads.empty() && i + 1 < bytes.size()) return false;
  }
  *out = std::move(a);
  return !out->heads.empty() || out->complete;
}

void Matcher::Commit(const Config& c) {
  heads_.clear();
  for (int32_t ref : c.heads) heads_.push_back(Intern(ref));
  // Frames that were distinct in scratch space may be the same once interned.
  std::sort(heads_.begin(), heads_.end());
  heads_.erase(std::unique(heads_.begin(), heads_.end()), heads_.end());
  complete_ = c.complete;
  scratch_.clear();
}

void Matcher::Walk(int32_t trie_node, size_t depth, std::vector<uint64_t>* bits) {
  const std::vector<TokenIndex::TrieNode>& trie = index_->trie();
  const std::vector<int32_t>& tokens = index_->trie_tokens();
  if (levels_.size() <= depth + 1) levels_.resize(depth + 2);
  for (int32_t child = trie[trie_node].first_child; child >= 0; child = trie[child].next_sibling) {
    const size_t mark = scratch_.size();
    Config& next = levels_[depth + 1];
    Step(levels_[depth], trie[child].byte, &next);
    if (!next.heads.empty() || next.complete) {
      for (int32_t t = trie[child].tokens_begin; t < trie[child].tokens_end; ++t) {
        (*bits)[static_cast<size_t>(tokens[t]) / 64] |= uint64_t{1} << (tokens[t] % 64);
      }
      if (!next.heads.empty()) Walk(child, depth + 1, bits);
    }
    scratch_.resize(mark);
  }
}

void Matcher::FillBitset(std::vector<uint64_t>* bits) {
  const size_t words = index_->bitset_words();
  bits->assign(words, 0);
  if (done_) return;
  if (complete_ && end_token_ >= 0 && end_token_ < index_->vocab_size()) {
    (*bits)[static_cast<size_t>(end_token_) / 64] |= uint64_t{1} << (end_token_ % 64);
  }
  if (levels_.empty()) levels_.resize(1);
  Config& walk = levels_[0];
  walk.Clear();
  for (int32_t ref : heads_) {
    if (!IsStringIdle(ref)) {
      walk.heads.push_back(ref);
      continue;
    }
    // Inside a string between characters: the table decides every token that stays inside;
    // those that close the string are checked against what may follow it.
    const Node n = Get(ref);
    const Rule& rule = grammar_->rules[n.rule];
    const int32_t count = StringLexer::Count(n.state);
    const int32_t room =
        rule.max_chars < 0 ? index_->max_inside_chars() : std::max(0, rule.max_chars - count);
    const uint64_t* inside = index_->InsideAtMost(room);
    for (size_t w = 0; w < words; ++w) (*bits)[w] |= inside[w];
    const size_t mark = scratch_.size();
    Config after_close;
    visited_.clear();
    Pop(ref, &after_close, 0);
    std::string_view last_rest;
    bool last_ok = false, have_last = false;
    Config tmp;
    for (const TokenIndex::Closing& c : index_->closing()) {
      const int32_t total = count + c.chars;
      if (total < rule.min_chars || (rule.max_chars >= 0 && total > rule.max_chars)) continue;
      if (!have_last || c.rest != last_rest) {
        const size_t inner = scratch_.size();
        last_ok = c.rest.empty() ? true : StepBytes(after_close, c.rest, &tmp);
        scratch_.resize(inner);
        last_rest = c.rest;
        have_last = true;
      }
      if (last_ok) (*bits)[static_cast<size_t>(c.token) / 64] |= uint64_t{1} << (c.token % 64);
    }
    scratch_.resize(mark);
  }
  if (!walk.heads.empty()) Walk(0, 0, bits);
  scratch_.clear();
}

void Matcher::FillMask(std::vector<uint8_t>* mask) {
  FillBitset(&bits_);
  const int32_t n = index_->vocab_size();
  mask->resize(static_cast<size_t>(n));
  uint8_t* out = mask->data();
  for (int32_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = bits_[static_cast<size_t>(w)];
    const int32_t end = std::min(n, (w + 1) * 64);
    if (word == 0) {
      std::fill(out + w * 64, out + end, uint8_t{0});
      continue;
    }
    for (int32_t i = w * 64; i < end; ++i)
      out[i] = static_cast<uint8_t>((word >> (i - w * 64)) & 1);
  }
}

Status Matcher::Advance(int32_t token) {
  if (done_) return InvalidArgument("grammar: token " + std::to_string(token) + " after the end");
  if (token == end_token_) {
    if (!complete_) {
      return InvalidArgument("grammar: the end token " + std::to_string(token) +
                             " before the output is complete");
    }
    done_ = true;
    heads_.clear();
    return Status::Ok();
  }
  if (token < 0 || token >= index_->vocab_size() || index_->Bytes(token).empty()) {
    return InvalidArgument("grammar: token " + std::to_string(token) + " cannot be produced");
  }
  if (!AdvanceBytes(index_->Bytes(token))) {
    return InvalidArgument("grammar: token " + std::to_string(token) +
                           " is not allowed by the grammar here");
  }
  return Status::Ok();
}

bool Matcher::WouldAccept(int32_t token) {
  if (done_) return false;
  if (token == end_token_) return complete_;
  if (token < 0 || token >= index_->vocab_size() || index_->Bytes(token).empty()) return false;
  Config current;
  current.heads = heads_;
  current.complete = complete_;
  Config out;
  const bool ok = StepBytes(current, index_->Bytes(token), &out);
  scratch_.clear();
  return ok;
}

bool Matcher::AdvanceBytes(std::string_view bytes) {
  if (done_) return false;
  Config current;
  current.heads = heads_;
  current.complete = complete_;
  Config out;
  if (bytes.empty()) return true;
  if (!StepBytes(current, bytes, &out)) {
    scratch_.clear();
    return false;
  }
  Commit(out);
  return true;
}

}  // namespace trace::recorder::grammar
