// Reading a Hugging Face tokenizer.json without a DOM for its two big parts.
//
// A tokenizer.json is mostly model.vocab (one entry per token) and model.merges (about as
// many): as an nlohmann DOM they cost a heap node per entry and most of the load time.
// ReadTokenizerJson parses the document with nlohmann's SAX parser: the root object's
// model.vocab object and model.merges array go straight into FlatVocabAndMerges (flat
// arrays), and everything else (small) is built as the usual DOM, which the BPE tokenizer
// (tokenizer_build.cc) reads. The result is what a whole-document DOM gave: the same lexer
// and parser run (so the same parse errors), and the same rule for duplicated keys (the
// last value wins; FlatVocabAndMerges::SortedUniqueVocab gives the order a DOM object
// iterates).
// The differential tests check this against a whole-document json::parse
// (tests/tokenizer/dom_oracle.h).
//
// Ownership: ReadTokenizerJson fills the caller's FlatVocabAndMerges and returns the DOM
// by value; the flat arrays own their strings (nothing points into `text`). Thread safety:
// independent calls may run on any threads at once. Errors: text that is not valid JSON is
// a Corruption error "NAME: not valid JSON (...)" with nlohmann's message; nothing throws.
// A bad vocab value or merge is not an error here: it is recorded (id -1, MergeForm) for
// the tokenizer to report in its own words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trace::engine {

// The largest token id a tokenizer.json may use (a larger id is reported as bad).
inline constexpr int64_t kMaxTokenId = 16'000'000;

// model.vocab and model.merges of a tokenizer.json (the last of duplicated keys), in
// document order, as flat arrays: two strings of text and small fixed-size records.
struct FlatVocabAndMerges {
  // model.vocab. id: the value when it is a token id (an integer in [0, kMaxTokenId]),
  // else -1.
  struct VocabEntry {
    size_t offset;  // of the key in vocab_keys
    size_t size;
    int32_t id;
  };
  std::string vocab_keys;
  std::vector<VocabEntry> vocab;

  // model.merges: the two token strings, adjacent in merge_text (so their concatenation,
  // the merged token, is a view too).
  enum class MergeForm : uint8_t { kPair, kNoSpace, kNeither };
  struct Merge {
    size_t offset;  // of the left token in merge_text; the right one follows it
    size_t left_size;
    size_t right_size;
    MergeForm form;  // kNoSpace: a string without a space; kNeither: not "a b" nor [a, b]
  };
  std::string merge_text;
  std::vector<Merge> merges;

  std::string_view Key(const VocabEntry& e) const { return {vocab_keys.data() + e.offset, e.size}; }

  void AddVocab(std::string_view key, int32_t id);
  // A merge [left, right] (or "left right"): form kPair.
  void AddMerge(std::string_view left, std::string_view right);
  // A merge that is not one (form kNoSpace or kNeither).
  void AddBadMerge(MergeForm form);

  // Indices into `vocab` in the order a json object iterates its keys: sorted (bytewise,
  // as std::string compares), one per key, the last value of a duplicated key.
  std::vector<uint32_t> SortedUniqueVocab() const;
};

// Parses `text` (`name`: the file as errors show it, already escaped). Returns the document
// with an empty object / array in place of the root object's model.vocab / model.merges
// when that (last) value was an object / array, which went into *flat (cleared first by
// each such value); other values of those keys stay in the DOM.
Result<nlohmann::json> ReadTokenizerJson(std::string_view text, const std::string& name,
                                         FlatVocabAndMerges* flat);

// An nlohmann exception's message as error messages quote it: escaped, clipped (it quotes
// the input near the error, at any length).
std::string JsonErrorText(const nlohmann::json::exception& e);

}  // namespace trace::engine
