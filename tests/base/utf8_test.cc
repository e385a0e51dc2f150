// base/utf8.h against the Unicode Standard's table 3-7 (a table of boundary sequences
// written here by hand) and against an independent implementation: Python's
// bytes.decode('utf-8') (strict: valid or not) and decode('utf-8', 'replace') (the
// maximal-subpart practice) on random byte strings from a fixed seed, compared byte for
// byte. Also JsonText (base/json_print.h): never throws, replaces exactly what
// SanitizeUtf8 replaces.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/json_print.h"
#include "testkit/shell.h"
#include "testkit/temp_dir.h"

namespace trace {
namespace {

using ::trace::testing::ReadWholeFile;
using ::trace::testing::ShellQuote;
using ::trace::testing::TempDir;

const char* kPython = "/usr/bin/python3";
const std::string kFffd = "\xEF\xBF\xBD";

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

struct Case {
  const char* name;
  std::string bytes;
  bool valid;
  std::string sanitized;  // SanitizeUtf8's result
};

std::string R(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kFffd;
  return s;
}

// Every boundary of table 3-7, each side of it.
std::vector<Case> BoundaryCases() {
  return {
      {"empty", "", true, ""},
      {"U+0000", std::string("\x00", 1), true, std::string("\x00", 1)},
      {"U+007F", "\x7F", true, "\x7F"},
      {"U+0080", "\xC2\x80", true, "\xC2\x80"},
      {"U+07FF", "\xDF\xBF", true, "\xDF\xBF"},
      {"U+0800", "\xE0\xA0\x80", true, "\xE0\xA0\x80"},
      {"U+D7FF", "\xED\x9F\xBF", true, "\xED\x9F\xBF"},
      {"U+E000", "\xEE\x80\x80", true, "\xEE\x80\x80"},
      {"U+FFFD", "\xEF\xBF\xBD", true, "\xEF\xBF\xBD"},
      {"U+FFFF", "\xEF\xBF\xBF", true, "\xEF\xBF\xBF"},
      {"U+10000", "\xF0\x90\x80\x80", true, "\xF0\x90\x80\x80"},
      {"U+10FFFF", "\xF4\x8F\xBF\xBF", true, "\xF4\x8F\xBF\xBF"},
      {"ascii and more", "a\xC3\xA9z\xE2\x82\xAC!", true, "a\xC3\xA9z\xE2\x82\xAC!"},
      // U+110000 and above: F4 90.. and F5..FF.
      {"U+110000", "\xF4\x90\x80\x80", false, R(4)},
      {"F5 lead", "\xF5\x80\x80\x80", false, R(4)},
      {"FF", "\xFF", false, R(1)},
      // Surrogates U+D800..U+DFFF.
      {"U+D800", "\xED\xA0\x80", false, R(3)},
      {"U+DFFF", "\xED\xBF\xBF", false, R(3)},
      {"surrogate pair", "\xED\xA0\xBD\xED\xB8\x80", false, R(6)},
      // Overlong forms.
      {"C0 80 (overlong NUL)", "\xC0\x80", false, R(2)},
      {"C1 BF", "\xC1\xBF", false, R(2)},
      {"E0 80 80", "\xE0\x80\x80", false, R(3)},
      {"E0 9F BF", "\xE0\x9F\xBF", false, R(3)},
      {"F0 80 80 80", "\xF0\x80\x80\x80", false, R(4)},
      {"F0 8F BF BF", "\xF0\x8F\xBF\xBF", false, R(4)},
      // Stray continuation bytes.
      {"lone 80", "\x80", false, R(1)},
      {"lone BF", "a\xBFz", false, "a" + R(1) + "z"},
      // Truncated sequences: one U+FFFD per maximal subpart.
      {"truncated E2 82", "\xE2\x82", false, R(1)},
      {"truncated E2 82 then ASCII", "\xE2\x82(", false, R(1) + "("},
      {"truncated F0 9F 98", "\xF0\x9F\x98", false, R(1)},
      {"truncated C3", "x\xC3", false, "x" + R(1)},
      {"C3 then ASCII", "\xC3(", false, R(1) + "("},
      {"E1 80 then C3 A9", "\xE1\x80\xC3\xA9", false, R(1) + "\xC3\xA9"},
      {"F4 8F then 41", "\xF4\x8F\x41", false, R(1) + "A"},
      {"41 FF 42",
       "A\xFF"
       "B",
       false, "A" + R(1) + "B"},
  };
}

TEST(Utf8Test, BoundaryTable) {
  for (const Case& c : BoundaryCases()) {
    EXPECT_EQ(IsValidUtf8(c.bytes), c.valid) << c.name;
    EXPECT_EQ(Hex(SanitizeUtf8(c.bytes)), Hex(c.sanitized)) << c.name;
    EXPECT_EQ(ValidUtf8PrefixLength(c.bytes) == c.bytes.size(), c.valid) << c.name;
    // Every 8-byte ASCII alignment of the fast path, before and after.
    for (size_t pad = 0; pad < 9; ++pad) {
      const std::string ascii(pad, 'x');
      EXPECT_EQ(IsValidUtf8(ascii + c.bytes + ascii), c.valid) << c.name << " pad " << pad;
      EXPECT_EQ(Hex(SanitizeUtf8(ascii + c.bytes + ascii)), Hex(ascii + c.sanitized + ascii))
          << c.name << " pad " << pad;
    }
  }
}

TEST(Utf8Test, DecodeGivesCodePointsAndRefusesWhatIsInvalid) {
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("A", &cp), 1u);
  EXPECT_EQ(cp, 0x41u);
  EXPECT_EQ(DecodeUtf8("\xDF\xBF", &cp), 2u);
  EXPECT_EQ(cp, 0x7FFu);
  EXPECT_EQ(DecodeUtf8("\xEF\xBF\xBFrest", &cp), 3u);
  EXPECT_EQ(cp, 0xFFFFu);
  EXPECT_EQ(DecodeUtf8("\xF4\x8F\xBF\xBF", &cp), 4u);
  EXPECT_EQ(cp, 0x10FFFFu);
  cp = 7;
  for (const char* bad : {"", "\x80", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82"}) {
    EXPECT_EQ(DecodeUtf8(bad, &cp), 0u) << Hex(bad);
    EXPECT_EQ(cp, 7u);
  }
  // Every code point encodes (by hand, here) and decodes back; surrogates do not decode.
  for (uint32_t c = 0; c <= 0x10FFFF; c += (c < 0x20000 ? 1 : 97)) {
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
    uint32_t back = 0;
    ASSERT_EQ(DecodeUtf8(s, &back), surrogate ? 0u : s.size()) << std::hex << c;
    if (!surrogate) {
      ASSERT_EQ(back, c);
    }
    ASSERT_EQ(IsValidUtf8(s), !surrogate) << std::hex << c;
  }
}

TEST(Utf8Test, IncompleteTailIsAProperPrefixOfAValidSequence) {
  EXPECT_EQ(IncompleteUtf8TailLength(""), 0u);
  EXPECT_EQ(IncompleteUtf8TailLength("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\xE2"), 1u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\xE2\x82"), 2u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\xE2\x82\xAC"), 0u);  // complete
  EXPECT_EQ(IncompleteUtf8TailLength("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8TailLength("\xED\xA0"), 0u);  // a surrogate never completes
  EXPECT_EQ(IncompleteUtf8TailLength("\xE0\x80"), 0u);  // nor an overlong form
  EXPECT_EQ(IncompleteUtf8TailLength("\xF4\x90"), 0u);  // nor U+110000
  EXPECT_EQ(IncompleteUtf8TailLength("\x80\x80"), 0u);  // stray continuation bytes
  EXPECT_EQ(IncompleteUtf8TailLength("\xC3"), 1u);
}

// Random byte strings built to hit every kind of byte: ASCII, each lead-byte class,
// continuation bytes in and out of the second byte's range, and whole valid characters.
std::vector<std::string> RandomStrings(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  const std::vector<std::pair<int, int>> classes = {
      {0x00, 0x7F}, {0x80, 0x8F}, {0x90, 0x9F}, {0xA0, 0xBF}, {0xC0, 0xC1},
      {0xC2, 0xDF}, {0xE0, 0xE0}, {0xE1, 0xEC}, {0xED, 0xED}, {0xEE, 0xEF},
      {0xF0, 0xF0}, {0xF1, 0xF3}, {0xF4, 0xF4}, {0xF5, 0xFF}};
  const std::vector<std::string> whole = {
      "\xC2\x80",     "\xDF\xBF",         "\xE0\xA0\x80",     "\xED\x9F\xBF", "\xEE\x80\x80",
      "\xEF\xBF\xBF", "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xE2\x82\xAC", "\xC3\xA9"};
  std::vector<std::string> out;
  for (int n = 0; n < count; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    // A third of the strings are random bytes of every class; a third valid text (ASCII and
    // whole characters); a third valid text with one random byte put in or cut out.
    const int mode = static_cast<int>(rng() % 3);
    for (int i = 0; i < len; ++i) {
      if (mode != 0 && rng() % 2 == 0) {
        s += static_cast<char>(0x20 + rng() % 0x5F);
      } else if (mode != 0 || rng() % 5 == 0) {
        s += whole[rng() % whole.size()];
      } else {
        const auto& [lo, hi] = classes[rng() % classes.size()];
        s += static_cast<char>(lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)));
      }
    }
    if (mode == 2 && !s.empty()) {
      const size_t at = rng() % s.size();
      if (rng() % 2 == 0) {
        s.erase(at, 1);
      } else {
        const auto& [lo, hi] = classes[rng() % classes.size()];
        s.insert(
            at, 1,
            static_cast<char>(lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1))));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

TEST(Utf8Test, MatchesPythonStrictAndReplaceOnRandomBytes) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::vector<std::string> inputs = RandomStrings(/*seed=*/20251207, 4000);
  const std::vector<Case> table = BoundaryCases();
  {
    std::ofstream in(dir.file("in.txt"));
    for (const std::string& s : inputs) in << Hex(s) << "\n";
    for (const Case& c : table) in << Hex(c.bytes) << "\n";
  }
  const std::string script =
      "import sys\n"
      "out = open(sys.argv[2], 'w')\n"
      "for line in open(sys.argv[1]):\n"
      "    b = bytes.fromhex(line.strip())\n"
      "    try:\n"
      "        b.decode('utf-8')\n"
      "        ok = 1\n"
      "    except UnicodeDecodeError:\n"
      "        ok = 0\n"
      "    out.write('%d %s\\n' % (ok, b.decode('utf-8', 'replace').encode('utf-8').hex()))\n";
  {
    std::ofstream py(dir.file("ref.py"));
    py << script;
  }
  const std::string cmd = std::string(kPython) + " " + ShellQuote(dir.file("ref.py")) + " " +
                          ShellQuote(dir.file("in.txt")) + " " + ShellQuote(dir.file("out.txt"));
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::istringstream ref(ReadWholeFile(dir.file("out.txt")));
  std::vector<std::pair<bool, std::string>> expected;
  for (std::string line; std::getline(ref, line);) {
    const size_t sp = line.find(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    expected.emplace_back(line[0] == '1', Unhex(line.substr(sp + 1)));
  }
  ASSERT_EQ(expected.size(), inputs.size() + table.size());
  int valid = 0, invalid = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& s = inputs[i];
    ASSERT_EQ(IsValidUtf8(s), expected[i].first) << Hex(s);
    ASSERT_EQ(Hex(SanitizeUtf8(s)), Hex(expected[i].second)) << Hex(s);
    // The valid prefix is what Python decodes before its first error.
    const size_t prefix = ValidUtf8PrefixLength(s);
    ASSERT_TRUE(IsValidUtf8(s.substr(0, prefix))) << Hex(s);
    ASSERT_EQ(SanitizeUtf8(s).substr(0, prefix), s.substr(0, prefix)) << Hex(s);
    (expected[i].first ? valid : invalid)++;
  }
  // The hand-written table agrees with Python too.
  for (size_t k = 0; k < table.size(); ++k) {
    const auto& [ok, replaced] = expected[inputs.size() + k];
    EXPECT_EQ(ok, table[k].valid) << table[k].name;
    EXPECT_EQ(Hex(replaced), Hex(table[k].sanitized)) << table[k].name;
  }
  // Both outcomes are well represented (the generator is not degenerate).
  RecordProperty("valid", valid);
  RecordProperty("invalid", invalid);
  EXPECT_GT(valid, 1000);
  EXPECT_GT(invalid, 1000);
}

TEST(JsonTextTest, ReplacesInvalidUtf8InValuesAndKeysAndNeverThrows) {
  nlohmann::json j = {{"label", std::string("A\xFF"
                                            "B")},
                      {"list", {std::string("\xC0\x80"), "ok", 3}},
                      {std::string("k\xED\xA0\x80"), std::string("\xE2\x82")},
                      {"nested", {{"x", std::string("\x80")}}}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);  // what the CLI did before
  std::string text;
  ASSERT_NO_THROW(text = JsonText(j));
  ASSERT_TRUE(IsValidUtf8(text));
  auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back["label"], "A" + kFffd + "B");
  EXPECT_EQ(back["list"][0], kFffd + kFffd);
  EXPECT_EQ(back["list"][1], "ok");
  EXPECT_EQ(back["k" + kFffd + kFffd + kFffd], kFffd);
  EXPECT_EQ(back["nested"]["x"], kFffd);

  // Valid documents are written exactly as dump() writes them.
  nlohmann::json good = {{"a", "\xC3\xA9\xF0\x9F\x98\x80"}, {"b", {1, 2.5, nullptr, true}}};
  EXPECT_EQ(JsonText(good), good.dump());
  EXPECT_EQ(JsonText(good, 2), good.dump(2));
  nlohmann::ordered_json ordered;
  ordered["z"] = std::string("\xFF");
  ordered["a"] = 1;
  EXPECT_EQ(JsonText(ordered), "{\"z\":\"" + kFffd + "\",\"a\":1}");
  std::ostringstream os;
  PrintJson(os, j, 2);
  EXPECT_EQ(os.str(), JsonText(j, 2) + "\n");
}

}  // namespace
}  // namespace trace
