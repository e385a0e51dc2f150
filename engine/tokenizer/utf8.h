// UTF-8 helpers of Encode's hot path (internal to engine/tokenizer; the public ones,
// SanitizeUtf8 and NormalizeNfc, are in tokenizer.h). Both are defined in utf8.cc.
//
// Ownership: plain functions over caller-owned strings. Thread safety: safe from any
// thread. Errors: none; invalid input is reported by IsValidUtf8's result, and NfcSpans
// requires valid UTF-8 (Encode sanitises first).
#pragma once

#include <string>
#include <string_view>

namespace trace::engine::internal {

// True when `s` is well-formed UTF-8 (fast for ASCII).
bool IsValidUtf8(std::string_view s);

// NFC of valid UTF-8, touching only the spans that need it: each run of non-boundary
// characters together with the boundary character before it goes through utf8proc; the
// rest is copied. Returns false (and leaves *out alone) when the text is already NFC by
// this check, so the caller can keep using its view.
bool NfcSpans(std::string_view s, std::string* out);

}  // namespace trace::engine::internal
