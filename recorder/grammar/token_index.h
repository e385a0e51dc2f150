// What the grammar matcher needs to know about a vocabulary, computed once per tokenizer:
//  - a byte trie of every ordinary token, so a mask is one walk that drops a whole subtree
//    (every token sharing a prefix) the moment its prefix is rejected;
//  - for the inside of a JSON string, where nearly every token could come next, a table
//    from running the string lexer over each token once: tokens that stay inside the string
//    (by how many characters they add, as cumulative bitsets: "at most r characters"), and
//    tokens that close it (characters before the quote, and the bytes after it, which are
//    the only part that depends on where the string is). The matcher then decides the
//    ~150k tokens of a string position with one bitset OR plus the few closing tokens.
//
// Ownership: immutable once built; shared (shared_ptr) by every matcher of the tokenizer.
// Thread safety: read-only after Build. Errors: none (special tokens and tokens with no
// bytes are simply not in the index).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace trace::recorder::grammar {

class TokenIndex {
 public:
  static std::shared_ptr<const TokenIndex> Build(const engine::Tokenizer& tokenizer);

  int32_t vocab_size() const { return vocab_size_; }
  size_t bitset_words() const { return static_cast<size_t>((vocab_size_ + 63) / 64); }
  // The token's bytes; empty for special tokens (never produced by a grammar).
  std::string_view Bytes(int32_t id) const {
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }

  struct TrieNode {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t tokens_begin = 0, tokens_end = 0;  // into trie_tokens(): tokens ending here
    uint8_t byte = 0;
  };
  const std::vector<TrieNode>& trie() const { return trie_; }  // node 0 is the root
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }

  // Tokens that, from inside a string between characters, stay inside it having started at
  // most r characters (a trailing partial character counts); r is capped at
  // max_inside_chars() (beyond it every such token qualifies).
  int32_t max_inside_chars() const { return max_inside_chars_; }
  const uint64_t* InsideAtMost(int32_t r) const {
    if (r > max_inside_chars_) r = max_inside_chars_;
    return inside_at_most_.data() + static_cast<size_t>(r) * bitset_words();
  }

  // A token that closes a string opened before it: `chars` characters, then '"', then
  // `rest` (bytes continuing after the string).
  struct Closing {
    int32_t token;
    int32_t chars;
    std::string_view rest;
  };
  const std::vector<Closing>& closing() const { return closing_; }  // sorted by rest

 private:
  int32_t vocab_size_ = 0;
  std::string bytes_;
  std::vector<uint32_t> offsets_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  int32_t max_inside_chars_ = 0;
  std::vector<uint64_t> inside_at_most_;
  std::vector<Closing> closing_;
};

}  // namespace trace::recorder::grammar
