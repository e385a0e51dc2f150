#include "base/escape.h"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace trace {
namespace {

// Length of the valid UTF-8 sequence at the start of `s` and its code point, or 0 when the
// first byte does not start one (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
size_t DecodeUtf8(std::string_view s, uint32_t* cp) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, min = 0x80, *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, min = 0x800, *cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, min = 0x10000, *cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b(i) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

// Code points that are valid UTF-8 but must not reach a terminal as they are.
bool IsHiddenControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0x061C ||
         cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Appends the display form of the character (or invalid byte) at the start of `s`;
// returns how many input bytes it covered.
size_t AppendPiece(std::string_view s, std::string* out) {
  char buf[8];
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
  } else {
    out->append(s.data(), len);
  }
  return len;
}

constexpr std::string_view kEllipsis = "...";

std::string KeepHead(std::string_view text, size_t limit) {
  std::string out;
  // Output offsets where each piece ends, to cut between characters. Each piece adds at
  // least one byte, so stopping past limit + a few bytes bounds the work on huge inputs.
  std::vector<size_t> ends;
  size_t at = 0;
  while (at < text.size() && out.size() <= limit) {
    at += AppendPiece(text.substr(at), &out);
    ends.push_back(out.size());
  }
  if (at == text.size() && out.size() <= limit) return out;
  const size_t room = limit > kEllipsis.size() ? limit - kEllipsis.size() : 0;
  size_t cut = 0;
  for (size_t end : ends) {
    if (end > room) break;
    cut = end;
  }
  out.resize(cut);
  out.append(kEllipsis);
  return out;
}

std::string KeepTail(std::string_view text, size_t limit) {
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
    at += AppendPiece(text.substr(at), &piece);
    total += piece.size();
    pieces.push_back(std::move(piece));
  }
  std::string out;
  if (start == 0 && total <= limit) {
    for (const std::string& p : pieces) out += p;
    return out;
  }
  const size_t room = limit > kEllipsis.size() ? limit - kEllipsis.size() : 0;
  size_t kept = 0;
  size_t first = pieces.size();
  while (first > 0 && kept + pieces[first - 1].size() <= room) kept += pieces[--first].size();
  out.reserve(kEllipsis.size() + kept);
  out.append(kEllipsis);
  for (size_t i = first; i < pieces.size(); ++i) out += pieces[i];
  return out;
}

}  // namespace

std::string EscapeForDisplay(std::string_view text, size_t limit, ClipSide side) {
  if (limit == kNoLimit) {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) at += AppendPiece(text.substr(at), &out);
    return out;
  }
  return side == ClipSide::kKeepHead ? KeepHead(text, limit) : KeepTail(text, limit);
}

}  // namespace trace
