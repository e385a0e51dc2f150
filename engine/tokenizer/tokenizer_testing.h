// Test hooks of engine/tokenizer (not for production code).
//
// Ownership: returns values. Thread safety: as the Tokenizer's const methods.
// Errors: none (an unknown Tokenizer implementation dumps as an empty string).
#pragma once

#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace trace::engine {

// Every table a loaded tokenizer built (vocabulary ids, texts, bytes and flags, the text
// and byte indexes, the merge table, added tokens and their match index, the options), as
// text in a canonical order: two loads built the same tokenizer iff their dumps are equal.
// The differential test of the streaming loader compares it with the DOM loader's.
std::string DumpTokenizerTablesForTesting(const Tokenizer& tokenizer);

}  // namespace trace::engine
