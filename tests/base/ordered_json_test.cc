#include "base/ordered_json.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/base/same_json.h"

namespace trace {
namespace {

using Json = nlohmann::ordered_json;

void ExpectLikeNlohmann(const std::string& text) {
  const Json expected = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const Json got = ParseOrderedJson(text);
  EXPECT_TRUE(testing::SameJson(got, expected))
      << "text: " << text
      << "\nnlohmann: " << expected.dump(-1, ' ', false, Json::error_handler_t::replace)
      << "\nParseOrderedJson: " << got.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A repeated key keeps its first place and takes its last value, in objects small enough to
// be scanned and in ones large enough to be indexed, at any depth.
TEST(OrderedJson, GivesWhatNlohmannsParserGives) {
  std::string wide = "{";
  for (int i = 0; i < 40; ++i)
    wide += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  const std::vector<std::string> texts = {
      "{}",
      "[]",
      "null",
      "true",
      "0",
      "-0",
      "-0.0",
      "1.0",
      "1e400",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775809",
      "\"a\\u00e9\\ud83d\\ude00\"",
      R"({"b": 1, "a": 2, "c": [1, {"z": 0, "y": 1}]})",
      R"({"a": 1, "b": 2, "a": 3})",
      R"({"a": {"x": 1}, "b": 2, "a": [4, 5]})",
      R"({"a": [1, 2], "a": {"y": {"y": 1, "y": 2}}})",
      R"([{"a": 1, "a": 2}, {"a": 3}, [{"b": {"b": {}}}]])",
      wide + "\"k3\": \"again\", \"k39\": {\"k39\": 1}, \"new\": null}",
      wide + "\"k0\": [" + wide + "\"k1\": 2}]}",
      // Not JSON: each is discarded by both.
      "",
      " ",
      "{",
      "{\"a\": 1,}",
      "[1, 2",
      "{\"a\" 1}",
      "{} x",
      "01",
      "1.",
      "\"\\ud800\"",
      "\"\xff\"",
      "\"a\nb\"",
      "{\"a\": 1}\0",
      "[1] [2]",
      "/* c */ 1",
      "nul",
  };
  for (const std::string& text : texts) ExpectLikeNlohmann(text);
}

// The one difference: nlohmann's lexer takes a NUL byte for the end of the input and
// accepted a valid text followed by a NUL and anything at all as that text. A NUL is never
// valid JSON (inside a string too: control characters must be escaped).
TEST(OrderedJson, TextHoldingANulByteIsNotJson) {
  const std::vector<std::string> after_a_value = {
      std::string("{\"a\": 1}\0{", 10), std::string("{\"a\": 1}\0junk", 13),
      std::string("[1, 2]\0]", 8), std::string("1\0", 2)};
  for (const std::string& text : after_a_value) {
    // nlohmann accepts these (it stops at the NUL): the reason for the check.
    EXPECT_FALSE(Json::parse(text, nullptr, false).is_discarded());
    EXPECT_TRUE(ParseOrderedJson(text).is_discarded()) << ::testing::PrintToString(text);
  }
  for (const std::string& text : {std::string("\"a\0b\"", 5), std::string("\0", 1)}) {
    EXPECT_TRUE(ParseOrderedJson(text).is_discarded()) << ::testing::PrintToString(text);
  }
  // An escaped NUL inside a string is a character like any other.
  const Json escaped = ParseOrderedJson(R"({"a": "x\u0000y"})");
  ASSERT_TRUE(escaped.is_object());
  EXPECT_EQ(escaped["a"].get<std::string>(), std::string("x\0y", 3));
}

// Seeded mutations of documents full of repeated keys: byte flips, cuts and insertions give
// invalid JSON as well as valid variants, and both parsers must agree on every one.
TEST(OrderedJson, AgreesWithNlohmannOnMutatedDocuments) {
  const std::vector<std::string> bases = {
      R"({"a": 1, "b": [true, null, 2.5e-3], "a": {"c": "d", "c": -7}, "e": "\u00e9"})",
      R"([{"k": 1, "k": [1, {"k": 2}]}, 18446744073709551615, -1.5, "s\"t"])",
  };
  std::mt19937 rng(20261202);
  const std::string alphabet = "{}[]\",:0123456789.-+eE \\truefalsnk";
  int valid = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string text = bases[round % bases.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 3);
          break;
        default:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    ExpectLikeNlohmann(text);
    valid += !Json::parse(text, nullptr, false).is_discarded();
  }
  // Both kinds were exercised (the count is fixed by the seed).
  EXPECT_GT(valid, 100);
  EXPECT_LT(valid, 3900);
}

// A million keys in one object (a 14 MB text, inside the recorder's 32 MiB body limit):
// nlohmann's ordered parse compares each new key with every earlier one, about 5 * 10^11
// comparisons (40,000 keys took 1.3 s, so this would take about 15 minutes and the test
// times out); the indexed lookup parses it in about a second.
TEST(OrderedJson, AMillionKeysParseInLinearTime) {
  constexpr int kKeys = 1'000'000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i)
    text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  text += "\"k5\":\"last\"}";
  const Json got = ParseOrderedJson(text);
  ASSERT_TRUE(got.is_object());
  ASSERT_EQ(got.size(), static_cast<size_t>(kKeys));
  auto it = got.items().begin();
  for (int i = 0; i < kKeys; ++i, ++it) {
    ASSERT_EQ(it.key(), "k" + std::to_string(i));
    if (i == 5) {
      ASSERT_EQ(it.value(), "last");
    } else {
      ASSERT_EQ(it.value(), i);
    }
  }
}

}  // namespace
}  // namespace trace
