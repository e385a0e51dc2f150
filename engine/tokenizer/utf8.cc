// UTF-8 helpers of the tokenizer: WHATWG-style sanitising, NFC, and the streaming decoder.
#include <utf8proc.h>

#include <cstdlib>
#include <cstring>

#include "engine/tokenizer/tokenizer.h"

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

}  // namespace trace::engine
