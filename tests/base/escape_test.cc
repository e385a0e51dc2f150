#include "base/escape.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <string_view>

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

// Up to 63 pieces, each a random byte (one in three) or one of `alphabet`'s strings.
template <size_t N>
std::string RandomText(std::mt19937_64& rng, const std::string (&alphabet)[N]) {
  std::string s;
  const size_t n = rng() % 64;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      s += static_cast<char>(rng());
    } else {
      s += alphabet[rng() % N];
    }
  }
  return s;
}

// Random bytes (biased towards the interesting ones) always come out as one safe line
// within the limit, whichever side is kept; a fixed seed keeps the test reproducible.
TEST(EscapeForDisplay, AnyBytesBecomeOneSafeLine) {
  std::mt19937_64 rng(16);
  const std::string alphabet[] = {"a",    "\n",   "\r",       "\x1b",         "\x7f",
                                  "\xff", "\x80", "\xC2\x85", "\xE2\x80\xA8", "\xE2\x80\xAE",
                                  "é",    "😀",    "\\",       "\xF0\x9F",     "\xED\xA0\x80"};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string s = RandomText(rng, alphabet);
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

// Reads the text between QuoteForDisplay's quotes back into the bytes it shows (written here
// from the header's promise, not from the code under test); nullopt where it is not a whole
// sequence of escapes and characters: a lone backslash, a cut \xNN or \uXXXX, a raw quote.
std::optional<std::string> Unquote(std::string_view body) {
  std::string out;
  const auto hex = [](std::string_view h) -> std::optional<uint32_t> {
    uint32_t v = 0;
    for (char c : h) {
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + d;
    }
    return v;
  };
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"') return std::nullopt;
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= body.size()) return std::nullopt;
    const char e = body[i + 1];
    if (e == 'n' || e == 'r' || e == 't' || e == '"' || e == '\\') {
      out += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
      i += 2;
    } else if (e == 'x' && i + 4 <= body.size()) {
      auto v = hex(body.substr(i + 2, 2));
      if (!v) return std::nullopt;
      out += static_cast<char>(*v);
      i += 4;
    } else if (e == 'u' && i + 6 <= body.size()) {
      auto v = hex(body.substr(i + 2, 4));
      if (!v) return std::nullopt;
      if (*v < 0x800) {  // the escaped code points are all >= U+0080
        out += static_cast<char>(0xC0 | (*v >> 6));
      } else {
        out += static_cast<char>(0xE0 | (*v >> 12));
        out += static_cast<char>(0x80 | ((*v >> 6) & 0x3F));
      }
      out += static_cast<char>(0x80 | (*v & 0x3F));
      i += 6;
    } else {
      return std::nullopt;
    }
  }
  // A character cut in half would show as its first bytes; check the body is whole UTF-8.
  if (!IsOneSafeLine(std::string(body))) return std::nullopt;
  return out;
}

TEST(QuoteForDisplay, QuotesAndEscapesQuotesAndBackslashes) {
  EXPECT_EQ(QuoteForDisplay(""), "\"\"");
  EXPECT_EQ(QuoteForDisplay("Ġthe 世界 😀"), "\"Ġthe 世界 😀\"");
  EXPECT_EQ(QuoteForDisplay("say \"hi\"\n"), R"("say \"hi\"\n")");
  // A literal backslash-n and a newline no longer look the same.
  EXPECT_EQ(QuoteForDisplay("a\\nb"), R"("a\\nb")");
  EXPECT_EQ(QuoteForDisplay("a\nb"), R"("a\nb")");
  EXPECT_EQ(QuoteForDisplay("{\"q\": \"C:\\\\x\"}"), R"("{\"q\": \"C:\\\\x\"}")");
}

TEST(QuoteForDisplay, EscapesEverythingEscapeForDisplayEscapes) {
  EXPECT_EQ(QuoteForDisplay("\x1b]0;title\x07\x1b[2J"), R"("\x1b]0;title\x07\x1b[2J")");
  EXPECT_EQ(QuoteForDisplay("a\xC2\x85"
                            "b\xC2\x9B"
                            "c\xE2\x80\xA8"
                            "d\xE2\x80\xAE"
                            "e\xE2\x81\xA7"
                            "f\xD8\x9C"),
            R"("a\u0085b\u009Bc\u2028d\u202Ee\u2067f\u061C")");
  EXPECT_EQ(QuoteForDisplay("\xff\xC0\xAF\xED\xA0\x80ok\xE4\xB8"),
            R"("\xff\xc0\xaf\xed\xa0\x80ok\xe4\xb8")");
}

// Every single byte, each in its class: C0 controls (three named), the quote and the
// backslash, the other printable ASCII, DEL, and bytes >= 0x80 (alone, never valid UTF-8).
TEST(QuoteForDisplay, EveryByteInItsClass) {
  for (int b = 0; b < 256; ++b) {
    SCOPED_TRACE(b);
    const std::string in(1, static_cast<char>(b));
    char hex[8];
    std::snprintf(hex, sizeof hex, "\\x%02x", b);
    std::string want;
    if (b == '\n') {
      want = "\\n";
    } else if (b == '\r') {
      want = "\\r";
    } else if (b == '\t') {
      want = "\\t";
    } else if (b == '"' || b == '\\') {
      want = std::string("\\") + static_cast<char>(b);
    } else if (b < 0x20 || b >= 0x7f) {
      want = hex;
    } else {
      want = in;
    }
    EXPECT_EQ(QuoteForDisplay(in), "\"" + want + "\"");
    // EscapeForDisplay differs only on the quote and the backslash.
    EXPECT_EQ(EscapeForDisplay(in), b == '"' || b == '\\' ? in : want);
  }
  // Code points: C1 controls are escaped, the first non-control after them is kept.
  EXPECT_EQ(QuoteForDisplay("\xC2\x80\xC2\x9F\xC2\xA0"), "\"\\u0080\\u009F\xC2\xA0\"");
}

TEST(QuoteForDisplay, IsNotIdempotentButEscapeForDisplayKeepsIt) {
  // Quoting a quoted value quotes it again: that is what makes it read back as that value.
  const std::string once = QuoteForDisplay("x\"y\\z\n");
  EXPECT_EQ(once, R"("x\"y\\z\n")");
  EXPECT_EQ(QuoteForDisplay(once), R"("\"x\\\"y\\\\z\\n\"")");
  // A message that holds a quoted value can still go through the error-message net.
  EXPECT_EQ(EscapeForDisplay(once, kNoLimit), once);
}

TEST(QuoteForDisplay, ClipsBetweenEscapesAndCharactersWithTheEllipsisOutside) {
  EXPECT_EQ(QuoteForDisplay("abcdef", 6), "\"abcdef\"");
  EXPECT_EQ(QuoteForDisplay("abcdefg", 6), "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abcdefg", 6, ClipSide::kKeepTail), "...\"efg\"");
  EXPECT_EQ(QuoteForDisplay("abc...", 6), "\"abc...\"");  // not clipped: dots inside
  EXPECT_EQ(QuoteForDisplay("abc", 0), "\"\"...");
  // The room after "..." is 4 bytes: each escape below would end at byte 5, so none is cut.
  EXPECT_EQ(QuoteForDisplay("abc\"defgh", 7), "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abc\\defgh", 7), "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abc\x1b"
                            "defgh",
                            7),
            "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abc\xE2\x80\xAE"
                            "defgh",
                            7),
            "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abc😀defgh", 7), "\"abc\"...");
  EXPECT_EQ(QuoteForDisplay("abc\xff"
                            "defgh",
                            7),
            "\"abc\"...");
  // From the end: the same, the cut falls before the escape.
  EXPECT_EQ(QuoteForDisplay("hgfed\"abc", 7, ClipSide::kKeepTail), "...\"abc\"");
  EXPECT_EQ(QuoteForDisplay("hgfed\\abc", 7, ClipSide::kKeepTail), "...\"abc\"");
  EXPECT_EQ(QuoteForDisplay("hgfed\xC2\x9B"
                            "abc",
                            7, ClipSide::kKeepTail),
            "...\"abc\"");
  // Huge values stay bounded: 48 escaped quotes fill 96 of the 97 bytes left for them (a
  // 49th would not fit whole), then the quotes and "...".
  const std::string huge(8 << 20, '"');
  std::string escaped_quotes;
  for (int i = 0; i < 48; ++i) escaped_quotes += "\\\"";
  EXPECT_EQ(QuoteForDisplay(huge, 100), "\"" + escaped_quotes + "\"...");
  EXPECT_EQ(QuoteForDisplay(huge, 100, ClipSide::kKeepTail), "...\"" + escaped_quotes + "\"");
}

// Random bytes: the result is one safe line, within limit + 2, and what is between the
// quotes reads back (Unquote) as the input, or, when clipped, as a prefix (a suffix when
// keeping the tail): no escape or character was split. Fixed seed.
TEST(QuoteForDisplay, AnyBytesReadBackAndClipsNeverSplitAnEscape) {
  std::mt19937_64 rng(16);
  const std::string alphabet[] = {"a",    "\"",   "\\",       "\n",           "\x1b",
                                  "\x7f", "\xff", "\x80",     "\xC2\x85",     "\xC2\x9B",
                                  "é",    "😀",    "\xF0\x9F", "\xE2\x80\xAE", "\xED\xA0\x80"};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string s = RandomText(rng, alphabet);
    const size_t limit = rng() % 2 ? kNoLimit : rng() % 40;
    const ClipSide side = rng() % 2 ? ClipSide::kKeepHead : ClipSide::kKeepTail;
    const std::string out = QuoteForDisplay(s, limit, side);
    ASSERT_TRUE(IsOneSafeLine(out)) << out;
    std::string_view body = out;
    bool clipped = false;
    if (body.size() >= 5 && body.substr(0, 4) == "...\"") {
      body.remove_prefix(3);
      clipped = true;
    } else if (body.size() >= 5 && body.substr(body.size() - 4) == "\"...") {
      body.remove_suffix(3);
      clipped = true;
    }
    ASSERT_GE(body.size(), 2u) << out;
    ASSERT_EQ(body.front(), '"') << out;
    ASSERT_EQ(body.back(), '"') << out;
    const std::optional<std::string> back = Unquote(body.substr(1, body.size() - 2));
    ASSERT_TRUE(back.has_value()) << out;
    if (limit == kNoLimit) {
      ASSERT_FALSE(clipped);
      ASSERT_EQ(*back, s) << out;
      continue;
    }
    ASSERT_LE(out.size(), limit + 2 + (limit < 3 ? 3 : 0)) << out;
    if (!clipped) {
      ASSERT_EQ(*back, s) << out;
    } else if (side == ClipSide::kKeepHead) {
      ASSERT_EQ(s.substr(0, back->size()), *back) << out;
    } else {
      ASSERT_GE(s.size(), back->size());
      ASSERT_EQ(s.substr(s.size() - back->size()), *back) << out;
    }
  }
}

}  // namespace
}  // namespace trace
