// UTF-8 helpers of the tokenizer: WHATWG-style sanitising, validation, NFC (whole or by
// spans), and the streaming decoder.
#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace trace::engine {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of a sequence by its lead byte (0: not a valid lead byte), and the allowed
// range of its second byte (WHATWG "UTF-8 lower/upper boundary").
struct LeadInfo {
  int length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the trailing bytes of `s` that form a proper prefix of a valid sequence
// (a character still waiting for its continuation bytes); 0 when there is none.
size_t IncompleteTailLength(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const LeadInfo lead = Lead(b);
    if (lead.length <= static_cast<int>(k)) return 0;  // ASCII, invalid, or complete
    for (size_t j = 1; j < k; ++j) {
      const auto c = static_cast<uint8_t>(s[s.size() - k + j]);
      const uint8_t lo = j == 1 ? lead.second_lo : 0x80;
      const uint8_t hi = j == 1 ? lead.second_hi : 0xBF;
      if (c < lo || c > hi) return 0;
    }
    return k;
  }
  return 0;
}

// Decodes the code point at s[i] of valid UTF-8; sets *len to its byte length.
uint32_t DecodeAt(std::string_view s, size_t i, size_t* len) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return b;
  }
  if (b < 0xE0) {
    *len = 2;
    return ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
  }
  if (b < 0xF0) {
    *len = 3;
    return ((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
  }
  *len = 4;
  return ((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
         ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
}

// True for characters with NFC_Quick_Check=Yes and canonical combining class 0 that are
// never the second half of a composition: NFC has a boundary before each of them, so text
// can be normalised piecewise between them. Only whole, long-assigned blocks are listed
// (checked against the Unicode data); everything else takes the utf8proc path.
bool IsNfcBoundary(uint32_t cp) {
  if (cp < 0x300) return true;
  if (cp < 0x2000) {
    return (cp >= 0x391 && cp <= 0x3A9) || (cp >= 0x3B1 && cp <= 0x3C9) ||
           (cp >= 0x400 && cp <= 0x482) || (cp >= 0x48A && cp <= 0x52F) ||
           (cp >= 0x5D0 && cp <= 0x5EA) || (cp >= 0x620 && cp <= 0x64A) ||
           (cp >= 0x904 && cp <= 0x939) || (cp >= 0xE01 && cp <= 0xE30) ||
           (cp >= 0x1E00 && cp <= 0x1EFF);
  }
  return (cp >= 0x2002 && cp <= 0x206F) || (cp >= 0x20A0 && cp <= 0x20BF) ||
         (cp >= 0x2190 && cp <= 0x21FF) || (cp >= 0x2500 && cp <= 0x27BF) ||
         (cp >= 0x3000 && cp <= 0x3029) || (cp >= 0x3041 && cp <= 0x3096) ||
         (cp >= 0x30A1 && cp <= 0x30FA) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
         (cp >= 0xFF01 && cp <= 0xFF5E) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
         (cp >= 0x1F680 && cp <= 0x1F6FF) || (cp >= 0x1F900 && cp <= 0x1F9FF);
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  // Fast path: the common case of valid input is copied through unchanged.
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const LeadInfo lead = Lead(b);
    if (lead.length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // Consume continuation bytes while they are valid; a bad or missing one ends the
    // maximal subpart, which becomes one U+FFFD, and is itself reprocessed.
    size_t j = 1;
    for (; j < static_cast<size_t>(lead.length); ++j) {
      if (i + j >= n) break;
      const auto c = static_cast<uint8_t>(bytes[i + j]);
      const uint8_t lo = j == 1 ? lead.second_lo : 0x80;
      const uint8_t hi = j == 1 ? lead.second_hi : 0xBF;
      if (c < lo || c > hi) break;
    }
    if (j == static_cast<size_t>(lead.length)) {
      out.append(bytes.data() + i, j);
    } else {
      out += kReplacement;
    }
    i += j;
  }
  return out;
}

std::string NormalizeNfc(std::string_view utf8) {
  // Nothing below U+0300 composes or reorders (every combining character is U+0300 or
  // above, lead byte 0xCC or more), so such text only needs sanitising.
  bool needs_nfc = false;
  for (char c : utf8) {
    if (static_cast<uint8_t>(c) >= 0xCC) {
      needs_nfc = true;
      break;
    }
  }
  if (!needs_nfc) return SanitizeUtf8(utf8);
  std::string valid = SanitizeUtf8(utf8);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                   static_cast<utf8proc_ssize_t>(valid.size()), &mapped,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (len < 0) return valid;  // cannot happen for sanitised input; keep the text as is
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(len));
  std::free(mapped);
  return out;
}

std::string IncrementalDecoder::Push(int32_t id) {
  std::string out;
  if (tokenizer_.IsAdded(id)) {
    // Added tokens are emitted as their content, never glued to byte-level pieces.
    out = SanitizeUtf8(pending_);
    pending_.clear();
    if (!(skip_special_ && tokenizer_.IsSpecial(id))) out += tokenizer_.TokenBytes(id);
    return out;
  }
  pending_ += tokenizer_.TokenBytes(id);
  const size_t keep = IncompleteTailLength(pending_);
  out = SanitizeUtf8(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string IncrementalDecoder::Push(std::span<const int32_t> ids) {
  std::string out;
  for (int32_t id : ids) out += Push(id);
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

namespace internal {

// Declared in utf8.h.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i + 8 <= n) {  // eight ASCII bytes at a time
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    const auto c1 = static_cast<uint8_t>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t j = 2; j < len; ++j) {
      if ((static_cast<uint8_t>(s[i + j]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// Declared in utf8.h.
bool NfcSpans(std::string_view s, std::string* out) {
  size_t i = 0;
  size_t copied = 0;      // s[0, copied) is already in *out
  size_t last_start = 0;  // start of the previous character (a boundary one)
  bool changed = false;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      last_start = i++;
      continue;
    }
    size_t len;
    const uint32_t cp = DecodeAt(s, i, &len);
    if (IsNfcBoundary(cp)) {
      last_start = i;
      i += len;
      continue;
    }
    // A span: the boundary character before (it may compose with what follows), then up
    // to the next boundary character.
    const size_t span_start = i == 0 ? 0 : last_start;
    size_t end = i + len;
    while (end < s.size()) {
      size_t l;
      if (IsNfcBoundary(DecodeAt(s, end, &l))) break;
      end += l;
    }
    if (!changed) {
      out->clear();
      out->reserve(s.size() + 16);
      changed = true;
    }
    out->append(s.data() + copied, span_start - copied);
    *out += NormalizeNfc(s.substr(span_start, end - span_start));
    copied = end;
    i = end;
    last_start = end;  // the next character, if any, is a boundary one
  }
  if (changed) out->append(s.data() + copied, s.size() - copied);
  return changed;
}

}  // namespace internal
}  // namespace trace::engine
