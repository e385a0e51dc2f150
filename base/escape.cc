#include "base/escape.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "base/utf8.h"

namespace trace {
namespace {

// Code points that are valid UTF-8 but must not reach a terminal as they are.
bool IsHiddenControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x061C ||
         cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Appends the display form of the character (or invalid byte) at the start of `s`;
// returns how many input bytes it covered. `quoted`: the text goes between double quotes,
// so `"` and `\` are escaped too (QuoteForDisplay); deciding it here, per character, is what
// keeps a clip from ever separating a backslash from what it escapes.
size_t AppendPiece(std::string_view s, bool quoted, std::string* out) {
  char buf[16];  // \uXXXX or \xNN; room for any unsigned value
  uint32_t cp = 0;
  const size_t len = DecodeUtf8(s, &cp);
  if (len == 0) {
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<uint8_t>(s[0]));
    out->append(buf);
    return 1;
  }
  if (cp == '\n') {
    out->append("\\n");
  } else if (cp == '\r') {
    out->append("\\r");
  } else if (cp == '\t') {
    out->append("\\t");
  } else if (cp < 0x20 || cp == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
    out->append(buf);
  } else if (IsHiddenControl(cp)) {
    std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
    out->append(buf);
  } else if (quoted && (cp == '"' || cp == '\\')) {
    out->push_back('\\');
    out->push_back(static_cast<char>(cp));
  } else {
    out->append(s.data(), len);
  }
  return len;
}

constexpr std::string_view kEllipsis = "...";

// The escaped text, and whether it was cut to fit: then `text` is at most the limit less the
// ellipsis, which the caller puts where the cut was.
struct Clipped {
  std::string text;
  bool cut = false;
};

Clipped KeepHead(std::string_view text, size_t limit, bool quoted) {
  Clipped out;
  // Output offsets where each piece ends, to cut between characters. Each piece adds at
  // least one byte, so stopping past limit + a few bytes bounds the work on huge inputs.
  std::vector<size_t> ends;
  size_t at = 0;
  while (at < text.size() && out.text.size() <= limit) {
    at += AppendPiece(text.substr(at), quoted, &out.text);
    ends.push_back(out.text.size());
  }
  if (at == text.size() && out.text.size() <= limit) return out;
  const size_t room = limit > kEllipsis.size() ? limit - kEllipsis.size() : 0;
  size_t cut = 0;
  for (size_t end : ends) {
    if (end > room) break;
    cut = end;
  }
  out.text.resize(cut);
  out.cut = true;
  return out;
}

Clipped KeepTail(std::string_view text, size_t limit, bool quoted) {
  // Every input byte yields at least one output byte, so the last limit + 4 bytes hold
  // everything that can be kept; skip continuation bytes at the window's start so a
  // character cut by the window is not shown as invalid bytes.
  size_t start = text.size() > limit + 4 ? text.size() - (limit + 4) : 0;
  if (start > 0) {
    for (int i = 0; i < 3 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80; ++i) ++start;
  }
  std::vector<std::string> pieces;
  size_t total = 0;
  for (size_t at = start; at < text.size();) {
    std::string piece;
    at += AppendPiece(text.substr(at), quoted, &piece);
    total += piece.size();
    pieces.push_back(std::move(piece));
  }
  Clipped out;
  if (start == 0 && total <= limit) {
    for (const std::string& p : pieces) out.text += p;
    return out;
  }
  const size_t room = limit > kEllipsis.size() ? limit - kEllipsis.size() : 0;
  size_t kept = 0;
  size_t first = pieces.size();
  while (first > 0 && kept + pieces[first - 1].size() <= room) kept += pieces[--first].size();
  out.text.reserve(kept);
  for (size_t i = first; i < pieces.size(); ++i) out.text += pieces[i];
  out.cut = true;
  return out;
}

Clipped Escape(std::string_view text, size_t limit, ClipSide side, bool quoted) {
  if (limit == kNoLimit) {
    Clipped out;
    out.text.reserve(text.size());
    for (size_t at = 0; at < text.size();) at += AppendPiece(text.substr(at), quoted, &out.text);
    return out;
  }
  return side == ClipSide::kKeepHead ? KeepHead(text, limit, quoted)
                                     : KeepTail(text, limit, quoted);
}

}  // namespace

std::string EscapeForDisplay(std::string_view text, size_t limit, ClipSide side) {
  Clipped c = Escape(text, limit, side, /*quoted=*/false);
  if (!c.cut) return std::move(c.text);
  return side == ClipSide::kKeepHead ? c.text + std::string(kEllipsis)
                                     : std::string(kEllipsis) + c.text;
}

std::string QuoteForDisplay(std::string_view text, size_t limit, ClipSide side) {
  const Clipped c = Escape(text, limit, side, /*quoted=*/true);
  std::string out;
  out.reserve(c.text.size() + 2 + kEllipsis.size());
  if (c.cut && side == ClipSide::kKeepTail) out.append(kEllipsis);
  out.push_back('"');
  out.append(c.text);
  out.push_back('"');
  if (c.cut && side == ClipSide::kKeepHead) out.append(kEllipsis);
  return out;
}

}  // namespace trace
