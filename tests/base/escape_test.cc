#include "base/escape.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace trace {
namespace {

// An independent check of the promise: no C0/DEL byte, valid UTF-8 (decoded by hand
// here, not by the code under test), none of the hidden controls.
bool IsOneSafeLine(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int n = c >= 0xf8 ? -1 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : -1;
    if (n < 0 || i + n >= s.size()) return false;
    uint32_t cp = c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x202e ||
        cp == 0x2066 || cp == 0x200f) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

TEST(EscapeForDisplay, KeepsPrintableTextAndUnicode) {
  EXPECT_EQ(EscapeForDisplay("model.vocab[\"Ġthe\"] 'x' \\ {\"a\": 1}"),
            "model.vocab[\"Ġthe\"] 'x' \\ {\"a\": 1}");
  EXPECT_EQ(EscapeForDisplay("héllo 世界 😀 ﷽"), "héllo 世界 😀 ﷽");
  EXPECT_EQ(EscapeForDisplay(""), "");
}

TEST(EscapeForDisplay, EscapesControlCharacters) {
  EXPECT_EQ(EscapeForDisplay("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeForDisplay("\x1b[31mred\x1b[0m\x07"), "\\x1b[31mred\\x1b[0m\\x07");
  EXPECT_EQ(EscapeForDisplay(std::string("nul\0x\x7f", 6)), "nul\\x00x\\x7f");
  // C1 controls, line/paragraph separators and bidi overrides are valid UTF-8 but hidden.
  EXPECT_EQ(EscapeForDisplay("a\xC2\x85"
                             "b\xC2\x9B"
                             "c"),
            "a\\u0085b\\u009Bc");
  EXPECT_EQ(EscapeForDisplay("x\xE2\x80\xA8y\xE2\x80\xA9z"), "x\\u2028y\\u2029z");
  EXPECT_EQ(EscapeForDisplay("ab\xE2\x80\xAE"
                             "dc\xE2\x81\xA6"
                             "e\xE2\x80\x8F"),
            "ab\\u202Edc\\u2066e\\u200F");
}

TEST(EscapeForDisplay, EscapesInvalidUtf8BytePerByte) {
  EXPECT_EQ(EscapeForDisplay("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForDisplay("a\x80z"), "a\\x80z");                         // stray continuation
  EXPECT_EQ(EscapeForDisplay("\xC0\xAF"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeForDisplay("\xED\xA0\x80"), "\\xed\\xa0\\x80");           // surrogate U+D800
  EXPECT_EQ(EscapeForDisplay("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(EscapeForDisplay("ok\xE4\xB8"), "ok\\xe4\\xb8");                // truncated at the end
  EXPECT_EQ(EscapeForDisplay("\xF0\x9F\x98\x80\xF0\x9F"), "😀\\xf0\\x9f");
}

TEST(EscapeForDisplay, IsIdempotent) {
  for (const char* s : {"a\nb", "\x1b]0;title\x07", "\xff\xc2\x85", "plain \\n text"}) {
    const std::string once = EscapeForDisplay(s, kNoLimit);
    EXPECT_EQ(EscapeForDisplay(once, kNoLimit), once) << once;
  }
}

TEST(EscapeForDisplay, ClipsLongValuesBetweenCharacters) {
  EXPECT_EQ(EscapeForDisplay(std::string(10, 'a'), 10), "aaaaaaaaaa");
  EXPECT_EQ(EscapeForDisplay(std::string(11, 'a'), 10), "aaaaaaa...");
  EXPECT_EQ(EscapeForDisplay("abcdefghijk", 10, ClipSide::kKeepTail), "...efghijk");
  EXPECT_EQ(EscapeForDisplay("abcdefghij", 10, ClipSide::kKeepTail), "abcdefghij");
  // A multi-byte character or an escape is never cut in half.
  EXPECT_EQ(EscapeForDisplay("aaaaaa😀bbbbbbbb", 11), "aaaaaa...");
  EXPECT_EQ(EscapeForDisplay("aaaaa\nbbbbbbbbbb", 9), "aaaaa...");
  EXPECT_EQ(EscapeForDisplay("aaaaaaaaaa😀bb", 9, ClipSide::kKeepTail), "...😀bb");
  EXPECT_EQ(EscapeForDisplay("aaaaaaaaaa\x1b"
                             "bb",
                             8, ClipSide::kKeepTail),
            "...bb");
  // Escapes count towards the limit: 50 ESC bytes are 200 bytes of output.
  EXPECT_EQ(EscapeForDisplay(std::string(50, '\x1b'), 13), "\\x1b\\x1b...");
  const std::string huge(8 << 20, 'x');
  EXPECT_EQ(EscapeForDisplay(huge).size(), kDisplayLimit);
  EXPECT_EQ(EscapeForDisplay(huge, 40, ClipSide::kKeepTail).size(), 40u);
  EXPECT_EQ(EscapeForDisplay(huge, kNoLimit).size(), huge.size());
  EXPECT_EQ(EscapeForDisplay("abc", 0), "...");
}

// Random bytes (biased towards the interesting ones) always come out as one safe line
// within the limit, whichever side is kept; a fixed seed keeps the test reproducible.
TEST(EscapeForDisplay, AnyBytesBecomeOneSafeLine) {
  std::mt19937_64 rng(16);
  const std::string alphabet[] = {"a",    "\n",   "\r",       "\x1b",         "\x7f",
                                  "\xff", "\x80", "\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xAE",
                                  "é",    "😀",    "\\",       "\xF0\x9F",     "\xED\xA0\x80"};
  for (int trial = 0; trial < 3000; ++trial) {
    std::string s;
    const size_t n = rng() % 64;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        s += static_cast<char>(rng());
      } else {
        s += alphabet[rng() % std::size(alphabet)];
      }
    }
    const size_t limit = rng() % 2 ? kNoLimit : rng() % 40;
    const ClipSide side = rng() % 2 ? ClipSide::kKeepHead : ClipSide::kKeepTail;
    const std::string out = EscapeForDisplay(s, limit, side);
    ASSERT_TRUE(IsOneSafeLine(out)) << out;
    if (limit != kNoLimit) {
      ASSERT_LE(out.size(), std::max<size_t>(limit, 3)) << out;
    }
    ASSERT_EQ(EscapeForDisplay(out, kNoLimit), out);
  }
}

}  // namespace
}  // namespace trace
