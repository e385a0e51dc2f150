// UTF-8 helpers of the tokenizer: NFC (whole or by spans) and the streaming decoder.
// Validation, sanitising and the incomplete-tail rule are base/utf8.h's, written once.
#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>

#include "base/utf8.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace trace::engine {
namespace {

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
  const size_t keep = IncompleteUtf8TailLength(pending_);
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
