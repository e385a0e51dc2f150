// The GPT-2 byte-level alphabet of BPE token strings (internal to engine/tokenizer).
//
// A byte-level tokenizer.json names each token by a string in which every byte of the
// token's text stands as one visible character ("Ġthe" is " the"). Only loading reads it:
// Build maps each model.vocab key to the bytes the token stands for.
//
// Ownership: plain functions over caller-owned strings. Thread safety: safe from any
// thread (the alphabet is a function-local static, built once). Errors: ByteLevelToBytes
// returns false for a string that is not in the alphabet.
#pragma once

#include <string>
#include <string_view>

namespace trace::engine::internal {

// Maps a byte-level token string ("Ġthe") to the bytes it stands for (" the"). Returns
// false when a character is not in the byte alphabet.
bool ByteLevelToBytes(std::string_view text, std::string* bytes);

}  // namespace trace::engine::internal
