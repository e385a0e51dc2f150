// Test oracle: the tokenizer.json loader as it was before the streaming loader (a whole-
// document nlohmann DOM), kept verbatim in legacy_dom_tokenizer.cc so that the differential
// tests can check the streaming loader against it input by input.
//
// Ownership: the loaders return a Tokenizer the caller owns. Thread safety: as Tokenizer.
// Errors: the loaders return the Status the old code gave (the point of the oracle).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::engine::legacy_dom {

Result<std::unique_ptr<Tokenizer>> LegacyDomLoadFromString(std::string_view tokenizer_json,
                                                           std::string_view name);
Result<std::unique_ptr<Tokenizer>> LegacyDomLoad(const std::string& tokenizer_json_path);
// DumpTokenizerTablesForTesting for a tokenizer these loaders built.
std::string LegacyDomDumpTables(const Tokenizer& tokenizer);

}  // namespace trace::engine::legacy_dom
