// Test hooks of engine/tokenizer (not for production code).
//
// Ownership: returns values; BuildTokenizerForTesting returns a Tokenizer the caller owns.
// Thread safety: as the Tokenizer's const methods; independent builds may run at once.
// Errors: DumpTokenizerTablesForTesting has none (an unknown Tokenizer implementation
// dumps as an empty string); BuildTokenizerForTesting returns the Status
// Tokenizer::LoadFromString would give for the same document.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"

namespace trace::engine {

// Every table a loaded tokenizer built (vocabulary ids, texts, bytes and flags, the text
// and byte indexes, the merge table, added tokens and their match index, the options), as
// text in a canonical order: two loads built the same tokenizer iff their dumps are equal.
// The differential test of the streaming reader compares it with the DOM oracle's.
std::string DumpTokenizerTablesForTesting(const Tokenizer& tokenizer);

// What Tokenizer::LoadFromString does after reading: builds the tokenizer from a parsed
// document `root` and its model.vocab / model.merges in `flat` (as ReadTokenizerJson gives
// them; Build does not read those two keys' contents in `root`, only their types). `name`
// is unescaped, as LoadFromString takes it. For the oracle of the reader's differential
// tests (tests/tokenizer/dom_oracle.h), which fills `flat` from a whole-document DOM.
Result<std::unique_ptr<Tokenizer>> BuildTokenizerForTesting(const nlohmann::json& root,
                                                            const FlatVocabAndMerges& flat,
                                                            std::string_view name);

}  // namespace trace::engine
