#include "base/utf8.h"

#include <cstring>

namespace trace {
namespace {

// What a lead byte allows: the sequence's length (0: not a lead byte: a continuation
// byte, C0, C1 or F5..FF) and the range of its second byte (the Unicode Standard's table
// 3-7; every later byte is 80..BF). The second byte's range is what excludes overlong
// forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
struct Lead {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

constexpr Lead LeadOf(uint8_t b) {
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

struct LeadTable {
  Lead entry[256];
  constexpr LeadTable() : entry{} {
    for (int b = 0; b < 256; ++b) entry[b] = LeadOf(static_cast<uint8_t>(b));
  }
};
constexpr LeadTable kLeads;

inline uint8_t Byte(const char* p) {
  return static_cast<uint8_t>(*p);
}

// The sequence starting at p[0] (p[0] >= 0x80), n bytes available: returns its length when
// it is well-formed; otherwise 0, with *subpart the length of its maximal subpart (the
// lead byte and the continuation bytes that still fit, at least 1).
inline size_t CheckSequence(const char* p, size_t n, size_t* subpart) {
  const Lead lead = kLeads.entry[Byte(p)];
  if (lead.length == 0) {
    *subpart = 1;
    return 0;
  }
  if (n >= lead.length) {  // the common case, a whole valid character: no loop
    const uint8_t c1 = Byte(p + 1);
    bool ok = c1 >= lead.second_lo && c1 <= lead.second_hi;
    if (lead.length >= 3) ok &= (Byte(p + 2) & 0xC0) == 0x80;
    if (lead.length == 4) ok &= (Byte(p + 3) & 0xC0) == 0x80;
    if (ok) return lead.length;
  }
  size_t j = 1;
  for (; j < lead.length && j < n; ++j) {
    const uint8_t c = Byte(p + j);
    const uint8_t lo = j == 1 ? lead.second_lo : 0x80;
    const uint8_t hi = j == 1 ? lead.second_hi : 0xBF;
    if (c < lo || c > hi) break;
  }
  if (j == lead.length) return j;
  *subpart = j;
  return 0;
}

// Skips ASCII from `i`, eight bytes at a time; returns the index of the first byte >= 0x80
// (or n).
inline size_t SkipAscii(const char* p, size_t i, size_t n) {
  while (i + 8 <= n) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && Byte(p + i) < 0x80) ++i;
  return i;
}

}  // namespace

size_t ValidUtf8PrefixLength(std::string_view s) {
  const char* p = s.data();
  const size_t n = s.size();
  size_t i = 0;
  for (;;) {
    i = SkipAscii(p, i, n);
    if (i >= n) return n;
    size_t subpart;
    const size_t len = CheckSequence(p + i, n - i, &subpart);
    if (len == 0) return i;
    i += len;
  }
}

bool IsValidUtf8(std::string_view s) {
  return ValidUtf8PrefixLength(s) == s.size();
}

size_t DecodeUtf8(std::string_view s, uint32_t* code_point) {
  if (s.empty()) return 0;
  const uint8_t b = Byte(s.data());
  if (b < 0x80) {
    *code_point = b;
    return 1;
  }
  size_t subpart;
  const size_t len = CheckSequence(s.data(), s.size(), &subpart);
  if (len == 0) return 0;
  uint32_t cp = b & (len == 2 ? 0x1Fu : len == 3 ? 0x0Fu : 0x07u);
  for (size_t j = 1; j < len; ++j) cp = (cp << 6) | (Byte(s.data() + j) & 0x3Fu);
  *code_point = cp;
  return len;
}

void AppendSanitizedUtf8(std::string_view s, std::string* out) {
  const char* p = s.data();
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Copy the well-formed run from i in one piece, then replace one maximal subpart.
    const size_t valid = ValidUtf8PrefixLength(s.substr(i));
    out->append(p + i, valid);
    i += valid;
    if (i >= n) break;
    size_t subpart = 1;
    CheckSequence(p + i, n - i, &subpart);
    out->append(kUtf8Replacement);
    i += subpart;
  }
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendSanitizedUtf8(s, &out);
  return out;
}

size_t IncompleteUtf8TailLength(std::string_view s) {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const uint8_t b = Byte(s.data() + s.size() - k);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const Lead lead = kLeads.entry[b];
    if (lead.length <= k) return 0;  // ASCII, not a lead byte, or complete
    size_t subpart;
    CheckSequence(s.data() + s.size() - k, k, &subpart);
    return subpart == k ? k : 0;  // every byte so far fits the sequence
  }
  return 0;
}

}  // namespace trace
