// Test oracle of the streaming tokenizer.json reader (engine/tokenizer/tokenizer_json_reader.h):
// the reading as it was before it, a whole-document nlohmann::json::parse (std::map order:
// keys sorted, the last value of a duplicated key), with model.vocab and model.merges then
// copied from the DOM into the same flat form and built by the same code
// (BuildTokenizerForTesting). What differs from Tokenizer::LoadFromString is exactly the
// reading: parse errors (nlohmann's message, word for word), which duplicate wins, the
// order the vocabulary is visited in (here always the DOM's sorted order; the streaming
// path builds in document order when that order cannot show) and how each vocab value and
// merge is classified.
//
// Ownership: returns a Tokenizer the caller owns. Thread safety: independent calls may run
// at once. Errors: the Status LoadFromString gives for the same input.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/escape.h"
#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"
#include "engine/tokenizer/tokenizer_testing.h"

namespace trace::engine::testing {

// model.vocab and model.merges of a DOM in the flat form, classified as the old loader
// did: a vocab value is a token id iff is_number_integer() and in [0, kMaxTokenId] as an
// int64_t; a merge is a string (split at its first space; the right part ends at the next
// space) or an array of exactly two strings.
inline void FlattenDomModel(const nlohmann::json& root, FlatVocabAndMerges* flat) {
  using MergeForm = FlatVocabAndMerges::MergeForm;
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) return;
  const nlohmann::json& model = root["model"];
  if (model.contains("vocab") && model["vocab"].is_object()) {
    for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
      const nlohmann::json& v = it.value();
      const bool is_id =
          v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTokenId;
      flat->AddVocab(it.key(), is_id ? static_cast<int32_t>(v.get<int64_t>()) : -1);
    }
  }
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const nlohmann::json& m : model["merges"]) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos) {
          flat->AddBadMerge(MergeForm::kNoSpace);
          continue;
        }
        const size_t second = s.find(' ', space + 1);
        flat->AddMerge(s.substr(0, space),
                       s.substr(space + 1, second == std::string::npos ? std::string::npos
                                                                       : second - space - 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        flat->AddMerge(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        flat->AddBadMerge(MergeForm::kNeither);
      }
    }
  }
}

// Tokenizer::LoadFromString with the whole-document DOM reading.
inline Result<std::unique_ptr<Tokenizer>> DomOracleLoadFromString(std::string_view text,
                                                                  std::string_view name) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return Corruption(EscapePathForDisplay(name) + ": not valid JSON (" + JsonErrorText(e) + ")");
  }
  FlatVocabAndMerges flat;
  FlattenDomModel(root, &flat);
  return BuildTokenizerForTesting(root, flat, name);
}

}  // namespace trace::engine::testing
