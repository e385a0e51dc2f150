// UTF-8 helpers of Encode's hot path (internal to engine/tokenizer; the public ones,
// SanitizeUtf8 and NormalizeNfc, are in tokenizer.h), defined in utf8.cc. Validation is
// base/utf8.h's IsValidUtf8 (the one strict validator), which Encode calls directly.
//
// Ownership: plain functions over caller-owned strings. Thread safety: safe from any
// thread. Errors: none; NfcSpans requires valid UTF-8 (Encode sanitises first).
#pragma once

#include <string>
#include <string_view>

namespace trace::engine::internal {

// NFC of valid UTF-8, touching only the spans that need it: each run of non-boundary
// characters together with the boundary character before it goes through utf8proc; the
// rest is copied. Returns false (and leaves *out alone) when the text is already NFC by
// this check, so the caller can keep using its view.
bool NfcSpans(std::string_view s, std::string* out);

}  // namespace trace::engine::internal
