// UTF-8, strictly as RFC 3629 defines it, written once for every part: the store's check
// of text fields, the exporters' choice between an OTLP string and bytes value, the
// tokenizer's input and streaming output, EscapeForDisplay, and every JSON document the
// CLI prints (base/json_print.h).
//
// Well-formed UTF-8 here is exactly the Unicode Standard's table 3-7: no overlong forms
// (C0, C1, E0 80..9F, F0 80..8F), no surrogates (ED A0..BF, U+D800..U+DFFF), nothing
// above U+10FFFF (F4 90.., F5..FF), no truncated sequence and no stray continuation byte.
// SanitizeUtf8 replaces each maximal subpart of an ill-formed sequence by one U+FFFD, the
// practice of the Unicode Standard (section 3.9, "U+FFFD Substitution of Maximal
// Subparts") and of WHATWG's decoder, which Python's decode('utf-8', 'replace') follows too.
//
// Ownership: plain functions over caller-owned bytes; results are new strings or lengths.
// Thread safety: pure functions, safe from any thread. Errors: none; invalid input is
// reported by the results (false, 0, a shorter prefix), never by an exception or abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trace {

// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// True when `s` is well-formed UTF-8 (fast for ASCII: eight bytes at a time).
bool IsValidUtf8(std::string_view s);

// The length of the longest well-formed prefix of `s`: s.size() when all of it is valid,
// else the offset of the first byte of the first ill-formed sequence.
size_t ValidUtf8PrefixLength(std::string_view s);

// Length (1 to 4) of the well-formed sequence at the start of `s`, with its code point in
// *code_point; 0 when `s` is empty or does not start with one (*code_point untouched).
size_t DecodeUtf8(std::string_view s, uint32_t* code_point);

// `s` made well-formed: valid sequences copied, each maximal subpart of an ill-formed one
// replaced by U+FFFD (so "\xF0\x9F\x98" is one U+FFFD, "\xED\xA0\x80" three, "\xC3(" is
// U+FFFD then "("). Valid input comes back unchanged.
std::string SanitizeUtf8(std::string_view s);

// The same, appended to *out.
void AppendSanitizedUtf8(std::string_view s, std::string* out);

// Length of the trailing bytes of `s` that are a proper prefix of a well-formed sequence
// (a character still waiting for its continuation bytes, as a stream cut between chunks
// leaves it); 0 when there is none. For streaming decoders: hold those bytes back.
size_t IncompleteUtf8TailLength(std::string_view s);

}  // namespace trace
