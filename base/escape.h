// EscapeForDisplay (and QuoteForDisplay, below): the one way user data (a vocab key, a
// tensor name, a template snippet, a run id, an agent's output) goes into an error message
// or a terminal line.
//
// Whatever the input bytes, the result is one line of valid UTF-8 that cannot move the
// cursor, recolour or retitle a terminal, or reorder the text around it:
//   - "\n", "\r", "\t" become the two characters \n, \r, \t;
//   - every other C0 control byte and DEL become \xNN (ESC is \x1b);
//   - bytes that are not part of valid UTF-8 (stray continuation bytes, overlong forms,
//     surrogates, truncated sequences) become \xNN, one per byte;
//   - C1 controls (U+0080..U+009F), the line and paragraph separators (U+2028, U+2029)
//     and the bidirectional controls (U+061C, U+200E, U+200F, U+202A..U+202E,
//     U+2066..U+2069: "Trojan Source") become \uXXXX;
//   - everything else, non-ASCII letters and emoji included, is kept as it is.
// Backslashes and quotes are left alone, so escaping is idempotent (escaping a message that
// already holds escaped values changes nothing) and JSON text reads as JSON; the price is
// that a literal backslash-n and a newline look the same.
//
// Long values are clipped to `limit` bytes of output, cut between characters, with "..."
// marking the cut: at the end (kKeepHead) or at the start (kKeepTail, for the text just
// before something). Pass kNoLimit to keep everything.
//
// Ownership: returns a new string. Thread safety: pure function. Errors: none.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace trace {

enum class ClipSide { kKeepHead, kKeepTail };

// A default for one value inside a message: long enough to recognise it, short enough that
// a 1 MB vocab key or template does not flood the terminal.
inline constexpr size_t kDisplayLimit = 120;
inline constexpr size_t kNoLimit = std::string_view::npos;

std::string EscapeForDisplay(std::string_view text, size_t limit = kDisplayLimit,
                             ClipSide side = ClipSide::kKeepHead);

// A value shown between double quotes, where the reader must be able to tell exactly what
// it was (a token's text, a tool's result, a template variable): the result is the quotes
// and, between them, the text escaped as by EscapeForDisplay and, in the same per-character
// pass, `"` as \" and `\` as \\, so the quoted text reads back unambiguously (a literal
// backslash-n is \\n, a newline \n) and a clip never separates a backslash from what it
// escapes, nor cuts a \xNN, a \uXXXX or a character.
//   QuoteForDisplay("say \"hi\"\n") == R"("say \"hi\"\n")"
// `limit` counts the text between the quotes and the "..." marking a cut, not the quotes
// (the result is at most limit + 2 bytes); the "..." goes outside the quotes, after them
// (kKeepHead) or before them (kKeepTail), so a clipped value is not mistaken for one that
// ends in three dots.
// Unlike EscapeForDisplay it is not idempotent: quoting a quoted value escapes its quotes
// and backslashes again (as it must, for the result to read back as that value). Passing
// the result through EscapeForDisplay changes nothing.
//
// Ownership: returns a new string. Thread safety: pure function. Errors: none.
std::string QuoteForDisplay(std::string_view text, size_t limit = kNoLimit,
                            ClipSide side = ClipSide::kKeepHead);

// A file path in a message: the same escaping, clipped at the start (the file's own name
// is the part worth keeping) to a limit real paths stay under.
inline constexpr size_t kPathDisplayLimit = 400;
inline std::string EscapePathForDisplay(std::string_view path) {
  return EscapeForDisplay(path, kPathDisplayLimit, ClipSide::kKeepTail);
}

}  // namespace trace
