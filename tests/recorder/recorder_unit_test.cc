// Unit tests of the recorder's pieces that need no model: request parsing and errors,
// tool-call extraction, constrained decoding over the real Qwen3 vocabulary, seeds, and
// the RunLog's once-per-call_id recording through a real store.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/model_init.h"
#include "engine/tokenizer/tokenizer.h"
#include "recorder/constrained.h"
#include "recorder/openai_api.h"
#include "recorder/run_log.h"
#include "recorder/server.h"
#include "store/store.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

ApiError ParseError(const std::string& body, bool chat = true) {
  auto r = ParseCompletionRequest(body, chat);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

CompletionRequest ParseOk(const std::string& body, bool chat = true) {
  auto r = ParseCompletionRequest(body, chat);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return std::get<CompletionRequest>(r);
}

// What the chat template sees keeps the client's key order (as Python dicts do for
// apply_chat_template): tool parameter schemas and tool-call arguments given as objects
// or as JSON text; the sorted json forms stay available.
TEST(OpenAiApi, TemplateInputsKeepTheKeyOrderReceived) {
  CompletionRequest r = ParseOk(R"({"model": "m", "messages": [
      {"role": "user", "content": "u"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": {"y": 2, "x": 3}}}},
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{\"d\": 1, \"c\": 2}"}}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}}}}],
    "chat_template_kwargs": {"z": 1, "enable_thinking": false}})");
  ASSERT_EQ(r.messages.size(), 2u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"b":1,"a":{"y":2,"x":3}})");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(
      r.tools[0].parameters_ordered.dump(),
      R"({"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string"}}})");
  EXPECT_EQ(r.tools[0].parameters, json::parse(r.tools[0].parameters_ordered.dump()));
  EXPECT_EQ(r.raw_ordered["chat_template_kwargs"].dump(), R"({"z":1,"enable_thinking":false})");
  EXPECT_EQ(r.raw, json::parse(r.raw_ordered.dump()));
  nlohmann::ordered_json m = MessagesForTemplateOrdered(r.messages);
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":{"y":2,"x":3}})");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"].dump(), R"({"d":1,"c":2})");
  EXPECT_EQ(ToolsForTemplateOrdered(r.tools).dump(),
            R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
            R"("properties":{"name":{"type":"string"},"email":{"type":"string"}}}}}])");
  // The json forms: the same values, keys sorted.
  EXPECT_EQ(MessagesForTemplate(r.messages), json(m));
  EXPECT_EQ(ToolsForTemplate(r.tools), json(ToolsForTemplateOrdered(r.tools)));
  // A ToolSpec built in code with only `parameters` still renders them.
  ToolSpec spec;
  spec.name = "g";
  spec.parameters = {{"type", "object"}};
  EXPECT_EQ(ToolsForTemplateOrdered({spec})[0]["function"]["parameters"].dump(),
            R"({"type":"object"})");
}

TEST(OpenAiApi, ParsesAFullChatRequest) {
  CompletionRequest r = ParseOk(R"({"model": "m", "messages": [
      {"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "temperature": 0.5, "top_p": 0.9, "top_k": 20, "seed": 7, "max_completion_tokens": 9,
    "stop": ["END"], "logprobs": true, "top_logprobs": 3, "stream": true})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "ab");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(r.messages[3].tool_call_id, "c1");
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "f");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.sampling.max_tokens, 9);
  EXPECT_EQ(r.seed, std::optional<uint64_t>(7));
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);
}

TEST(OpenAiApi, BadRequestsNameTheFieldAndStatus) {
  struct Case {
    const char* body;
    int status;
    const char* param;
  } cases[] = {
      {"{not json", 400, ""},
      {"[1, 2]", 400, "body"},
      {R"({"messages": [{"role": "user", "content": "x"}]})", 400, "model"},
      {R"({"model": "m"})", 400, "messages"},
      {R"({"model": "m", "messages": []})", 400, "messages"},
      {R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", 400,
       "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})", 400,
       "messages[0].tool_call_id"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})",
       400, "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": -1})", 400,
       "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 0})", 400,
       "top_p"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_k": -2})", 400,
       "top_k"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", 400,
       "max_tokens"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"})", 400,
       "stream"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "tool_choice": "required"})",
       400, "tool_choice"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "tools": [{"type": "function", "function": {"name": "f"}}],
           "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       400, "tool_choice.function.name"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "guided_choice": []})",
       400, "guided_choice"},
      // OpenAI: temperature is 0..2, top_logprobs needs logprobs, seed is a signed 64-bit int.
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5})", 400,
       "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
       "top_logprobs"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "seed": 18446744073709551615})",
       400, "seed"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "stream_options": {"include_usage": true}})",
       400, "stream_options"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "response_format": {"type": "xml"}})",
       400, "response_format.type"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})",
       400, "response_format.json_schema.name"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "functions": [{"name": "f"}], "tools": [{"type": "function",
           "function": {"name": "g"}}]})",
       400, "functions"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
           "functions": [{"name": "f"}], "function_call": {"name": "g"}})",
       400, "function_call.name"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"},
           {"role": "tool", "tool_call_id": "c1", "content": "42"}]})",
       400, "messages[1].tool_call_id"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"},
           {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "c2", "content": "42"}]})",
       400, "messages[2].tool_call_id"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"},
           {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]},
           {"role": "user", "content": "y"},
           {"role": "tool", "tool_call_id": "c1", "content": "42"}]})",
       400, "messages[3].tool_call_id"},
      {R"({"model": "m", "messages": [{"role": "function", "name": "f", "content": "1"}]})", 400,
       "messages[0].tool_call_id"},
  };
  for (const Case& c : cases) {
    ApiError e = ParseError(c.body);
    EXPECT_EQ(e.http_status, c.status) << c.body << " -> " << e.message;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_FALSE(e.message.empty());
    json body = json::parse(e.Body());
    EXPECT_EQ(body["error"]["message"], e.message);
    EXPECT_TRUE(body["error"].contains("type"));
  }
  EXPECT_EQ(ParseError(R"({"model": "m", "prompt": 3})", false).param, "prompt");
  EXPECT_EQ(ParseError(R"({"model": "m", "prompt": ["a", "b"]})", false).param, "prompt");
}

// A json_schema format's name is 1 to 64 of [a-zA-Z0-9_-], as OpenAI checks it.
TEST(OpenAiApi, JsonSchemaNameIsOneToSixtyFourLettersDigitsUnderscoresOrDashes) {
  auto body = [](const std::string& name) {
    return R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
               "response_format": {"type": "json_schema", "json_schema": {"name": ")" +
           name + R"(", "schema": {}}}})";
  };
  for (const std::string& ok : {std::string("a"), std::string("Person_v2-b"),
                                std::string("09_-AZaz"), std::string(64, 'x')}) {
    EXPECT_EQ(ParseOk(body(ok)).response_format.name, ok);
  }
  for (const std::string& bad :
       {std::string(""), std::string(65, 'x'), std::string("a b"), std::string("a.b"),
        std::string("caf\\u00e9"), std::string("a/b"), std::string("x\\n")}) {
    EXPECT_EQ(ParseError(body(bad)).param, "response_format.json_schema.name") << bad;
  }
}

// What OpenAI accepts and this server used to refuse or mangle: a negative seed keeps its
// sign, a huge max_tokens is accepted (clamped to the context when served), prompts of token
// ids, response_format with its schema in the order sent.
TEST(OpenAiApi, AcceptsWhatOpenAiAccepts) {
  auto chat = ParseCompletionRequest(
      R"({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "seed": -5,
          "max_tokens": 2000000, "logprobs": true, "top_logprobs": 2, "stream": true,
          "stream_options": {"include_usage": true}, "parallel_tool_calls": false,
          "response_format": {"type": "json_schema", "json_schema": {"name": "person",
            "strict": true, "schema": {"type": "object", "properties": {"zeta": {"type": "string"},
            "alpha": {"type": "integer"}}}}}})",
      true);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(chat)) << std::get<ApiError>(chat).message;
  const CompletionRequest& r = std::get<CompletionRequest>(chat);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, -5);
  EXPECT_EQ(r.sampling.max_tokens, 2000000);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format.kind, ResponseFormat::kJsonSchema);
  EXPECT_TRUE(r.response_format.strict);
  EXPECT_EQ(r.response_format.schema["properties"].begin().key(), "zeta");  // order kept
  for (const char* prompt : {"[1, 2, 3]", "[[1, 2, 3]]"}) {
    auto legacy = ParseCompletionRequest(
        std::string(R"({"model": "m", "prompt": )") + prompt + R"(, "logprobs": 1})", false);
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(legacy)) << prompt;
    const CompletionRequest& l = std::get<CompletionRequest>(legacy);
    EXPECT_TRUE(l.prompt_is_tokens);
    EXPECT_EQ(l.prompt_token_ids, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(l.top_logprobs, 1);
  }
}

TEST(OpenAiApi, ExtractsQwenToolCalls) {
  ExtractedToolCalls ex = ExtractToolCalls(
      "Let me check.\n<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"id\": 3}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"other\", \"arguments\": \"{}\"}\n</tool_call>",
      "call_x_");
  ASSERT_EQ(ex.calls.size(), 2u);
  EXPECT_EQ(ex.calls[0].name, "lookup");
  EXPECT_EQ(json::parse(ex.calls[0].arguments), json({{"id", 3}}));
  EXPECT_EQ(ex.calls[0].id, "call_x_0");
  EXPECT_EQ(ex.calls[1].name, "other");
  EXPECT_EQ(ex.content, "Let me check.");
  // Malformed JSON stays content.
  ExtractedToolCalls bad = ExtractToolCalls("<tool_call>{oops</tool_call>", "x");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{oops</tool_call>");
  // Arguments keep the order the model wrote them in (the schema's), not sorted.
  ExtractedToolCalls ordered = ExtractToolCalls(
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"zeta\": 1, \"alpha\": 2}}\n</tool_call>",
      "x");
  ASSERT_EQ(ordered.calls.size(), 1u);
  EXPECT_EQ(ordered.calls[0].arguments, R"({"zeta": 1, "alpha": 2})");
  // A call cut off by max_tokens: without allow_truncated it is content; with it, the call
  // with the arguments written so far.
  const std::string cut = "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"zeta\": 1";
  EXPECT_TRUE(ExtractToolCalls(cut, "x").calls.empty());
  ExtractedToolCalls t = ExtractToolCalls(cut, "x", /*allow_truncated=*/true);
  EXPECT_TRUE(t.truncated);
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].name, "f");
  EXPECT_EQ(t.calls[0].arguments, R"({"zeta": 1)");
  EXPECT_EQ(t.content, "Sure.");
  ExtractedToolCalls early = ExtractToolCalls("<tool_call>\n{\"na", "x", true);
  EXPECT_TRUE(early.truncated);
  EXPECT_TRUE(early.calls.empty());
  EXPECT_EQ(early.content, "");
}

// A call cut by the token limit: no wrapper text in its arguments, which are a prefix of
// the JSON the model wrote; a call whose arguments were complete (only its closing tag was
// cut) is complete; a cut inside the opening tag leaves no "<tool" in the content.
TEST(OpenAiApi, CutToolCallsKeepOnlyTheArgumentsJson) {
  const std::string whole =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\", \"unit\": "
      "\"celsius\"}}\n</tool_call>";
  const std::string args = R"({"city": "", "unit": "celsius"})";
  ExtractedToolCalls full = ExtractToolCalls(whole, "x");
  ASSERT_EQ(full.calls.size(), 1u);
  EXPECT_EQ(full.calls[0].arguments, args);
  EXPECT_FALSE(full.calls[0].cut);
  // Every cut of the text: before the name is complete no call; after it, the arguments are
  // a prefix of `args`, and the call is complete exactly when they all are.
  const size_t args_at = whole.find(args);
  for (size_t n = 0; n < whole.size(); ++n) {
    const std::string cut = whole.substr(0, n);
    ExtractedToolCalls ex = ExtractToolCalls(cut, "x", /*allow_truncated=*/true);
    EXPECT_EQ(ex.content, "") << cut;
    EXPECT_EQ(ex.truncated, n > 0) << cut;
    const bool name_done = cut.find("\"get_weather\"") != std::string::npos;
    ASSERT_EQ(ex.calls.size(), name_done ? 1u : 0u) << cut;
    if (!name_done) continue;
    const ToolCall& c = ex.calls[0];
    EXPECT_EQ(c.name, "get_weather");
    EXPECT_EQ(args.substr(0, c.arguments.size()), c.arguments) << cut;
    EXPECT_EQ(c.cut, n < args_at + args.size()) << cut;
    if (!c.cut) EXPECT_EQ(c.arguments, args) << cut;
  }
  // Text before a cut tag stays; the part of the tag goes.
  ExtractedToolCalls text = ExtractToolCalls("Let me see. <tool_c", "x", true);
  EXPECT_EQ(text.content, "Let me see.");
  EXPECT_TRUE(text.truncated);
  EXPECT_TRUE(text.calls.empty());
  // Without allow_truncated (a finished answer) a "<" is text.
  EXPECT_EQ(ExtractToolCalls("a < b", "x").content, "a < b");
  EXPECT_EQ(ExtractToolCalls("x <", "x").content, "x <");
}

TEST(OpenAiApi, JsonValueEndFindsTheEndOfTheFirstValue) {
  const size_t npos = std::string::npos;
  struct Case {
    const char* text;
    size_t end;
  } cases[] = {
      {R"({"a": 1}})", 8},    {R"( {"a": "}"}x)", 11},
      {R"(["]", [1]] )", 10}, {R"("x\"y")", 6},
      {"12, 3", 2},           {"true}", 4},
      {R"({"a": 1)", npos},   {R"({"a": "})", npos},
      {"12", npos},           {"", npos},
      {"  ", npos},           {R"("abc\)", npos},
  };
  for (const Case& c : cases) EXPECT_EQ(JsonValueEnd(c.text), c.end) << c.text;
}

// Chat Completions' deprecated functions API: functions are the tools, function_call the
// tool_choice, an assistant function_call a tool call that the function message answers.
TEST(OpenAiApi, LegacyFunctionsMapOntoTools) {
  CompletionRequest req = ParseOk(R"({"model": "m",
      "functions": [{"name": "lookup", "description": "find", "parameters":
                     {"type": "object", "properties": {"id": {"type": "integer"}}}}],
      "function_call": {"name": "lookup"},
      "messages": [{"role": "user", "content": "x"},
                   {"role": "assistant", "content": null,
                    "function_call": {"name": "lookup", "arguments": "{\"id\": 3}"}},
                   {"role": "function", "name": "lookup", "content": "found"}]})");
  EXPECT_TRUE(req.legacy_functions);
  ASSERT_EQ(req.tools.size(), 1u);
  EXPECT_EQ(req.tools[0].name, "lookup");
  EXPECT_EQ(req.tools[0].description, "find");
  EXPECT_EQ(req.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(req.tool_choice_name, "lookup");
  EXPECT_FALSE(req.parallel_tool_calls);
  ASSERT_EQ(req.messages.size(), 3u);
  ASSERT_EQ(req.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(req.messages[1].tool_calls[0].arguments, R"({"id": 3})");
  EXPECT_EQ(req.messages[2].role, "tool");
  EXPECT_EQ(req.messages[2].tool_call_id, req.messages[1].tool_calls[0].id);
  EXPECT_EQ(ParseOk(R"({"model": "m", "functions": [{"name": "f"}],
                        "messages": [{"role": "user", "content": "x"}]})")
                .tool_choice,
            ToolChoice::kAuto);
  EXPECT_EQ(ParseOk(R"({"model": "m", "functions": [{"name": "f"}], "function_call": "none",
                        "messages": [{"role": "user", "content": "x"}]})")
                .tool_choice,
            ToolChoice::kNone);
  // The answer in the functions API's shape: message.function_call, finish "function_call".
  CompletionResult r;
  r.finish_reason = "tool_calls";
  r.tool_calls.push_back({"call_1", "lookup", R"({"id": 4})", ""});
  json legacy = json::parse(ChatCompletionBody(r, false, /*legacy_functions=*/true));
  const json& choice = legacy["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "function_call");
  EXPECT_EQ(choice["message"]["function_call"],
            json({{"name", "lookup"}, {"arguments", R"({"id": 4})"}}));
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_TRUE(choice["message"]["content"].is_null());
  json modern = json::parse(ChatCompletionBody(r, false));
  EXPECT_EQ(modern["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(ReadChatResponse(legacy).tool_calls.at(0).name, "lookup");
}

TEST(RunSeeds, DerivedSeedsAreFixedAndDistinct) {
  EXPECT_EQ(DeriveCallSeed(1, 0), DeriveCallSeed(1, 0));
  EXPECT_NE(DeriveCallSeed(1, 0), DeriveCallSeed(1, 1));
  EXPECT_NE(DeriveCallSeed(1, 0), DeriveCallSeed(2, 0));
}

class ConstraintTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = engine::BundledTokenizerDir();
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    auto tok = engine::Tokenizer::Load(*dir + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = std::move(tok).value().release();
    classes_ = new TokenClasses(*tokenizer_);
    end_ = *tokenizer_->TokenId("<|im_end|>");
  }
  // Samples uniformly among allowed tokens until done; returns the decoded text.
  std::string Walk(Constraint& c, uint64_t seed, int limit = 400) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids;
    std::vector<uint8_t> mask;
    for (int step = 0; step < limit && !c.Done(); ++step) {
      c.AllowedMask(&mask);
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < mask.size(); ++i) {
        if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
      }
      EXPECT_FALSE(allowed.empty()) << "dead end at step " << step;
      if (allowed.empty()) break;
      int32_t t = allowed[rng() % allowed.size()];
      EXPECT_TRUE(c.Advance(t).ok());
      ids.push_back(t);
    }
    EXPECT_TRUE(c.Done());
    EXPECT_EQ(ids.back(), end_);
    ids.pop_back();
    return tokenizer_->Decode(ids);
  }
  static engine::Tokenizer* tokenizer_;
  static TokenClasses* classes_;
  static int32_t end_;
};
engine::Tokenizer* ConstraintTest::tokenizer_ = nullptr;
TokenClasses* ConstraintTest::classes_ = nullptr;
int32_t ConstraintTest::end_ = 0;

TEST_F(ConstraintTest, GuidedChoiceYieldsOneOfTheChoices) {
  std::vector<std::string> choices = {"yes", "no", "not sure", "no way"};
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto c = Constraint::Create(GuidedChoiceSpec(choices), *tokenizer_, *classes_, end_);
    ASSERT_TRUE(c.ok()) << c.status().message();
    std::string out = Walk(**c, seed);
    EXPECT_NE(std::find(choices.begin(), choices.end(), out), choices.end()) << out;
    seen.insert(out);
  }
  EXPECT_GE(seen.size(), 3u);  // the walk really chooses
}

TEST_F(ConstraintTest, ToolCallsAreValidJsonForTheSchema) {
  json tools = json::array();
  tools.push_back({{"type", "function"},
                   {"function",
                    {{"name", "update_email"},
                     {"parameters",
                      {{"type", "object"},
                       {"properties",
                        {{"customer_id", {{"type", "integer"}}},
                         {"email", {{"type", "string"}}},
                         {"notify", {{"type", "boolean"}}},
                         {"level", {{"enum", {"low", "high"}}}}}}}}}}});
  tools.push_back({{"type", "function"}, {"function", {{"name", "ping"}}}});
  std::set<std::string> names;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    auto c = Constraint::Create(ToolCallConstraintSpec(tools, ""), *tokenizer_, *classes_, end_);
    ASSERT_TRUE(c.ok()) << c.status().message();
    std::string out = Walk(**c, seed);
    ExtractedToolCalls ex = ExtractToolCalls(out, "t");
    ASSERT_EQ(ex.calls.size(), 1u) << out;
    names.insert(ex.calls[0].name);
    json args = json::parse(ex.calls[0].arguments);
    if (ex.calls[0].name == "update_email") {
      EXPECT_TRUE(args["customer_id"].is_number_integer()) << out;
      EXPECT_TRUE(args["email"].is_string()) << out;
      EXPECT_TRUE(args["notify"].is_boolean()) << out;
      EXPECT_TRUE(args["level"] == "low" || args["level"] == "high") << out;
    } else {
      EXPECT_EQ(ex.calls[0].name, "ping");
      EXPECT_EQ(args, json::object());
    }
  }
  EXPECT_EQ(names.size(), 2u);
  // Named: only that tool.
  auto named =
      Constraint::Create(ToolCallConstraintSpec(tools, "ping"), *tokenizer_, *classes_, end_);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(ExtractToolCalls(Walk(**named, 1), "t").calls.at(0).name, "ping");
}

TEST_F(ConstraintTest, MasksAreDeterministicAndRejectOthers) {
  auto a = Constraint::Create(GuidedChoiceSpec({"alpha", "beta"}), *tokenizer_, *classes_, end_);
  auto b = Constraint::Create(GuidedChoiceSpec({"alpha", "beta"}), *tokenizer_, *classes_, end_);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint8_t> ma, mb;
  (*a)->AllowedMask(&ma);
  (*b)->AllowedMask(&mb);
  EXPECT_EQ(ma, mb);
  int32_t not_allowed = 0;
  while (ma[not_allowed]) ++not_allowed;
  EXPECT_FALSE((*a)->Advance(not_allowed).ok());
  EXPECT_FALSE(Constraint::Create(json{{"kind", "regex"}}, *tokenizer_, *classes_, end_).ok());
}

TEST(RunLog, RecordsEachToolResultOnceAndCountsEvents) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("trace_runlog_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto store = store::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto writer = (*store)->BeginRun(proto::RunHeader());
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  std::string run_id = (*writer)->run_id();
  {
    RunLog log(std::move(writer).value(), 5);
    proto::ToolResult r;
    r.set_call_id("c1");
    r.set_content("x");
    auto s1 = log.RecordToolResult(r);
    auto s2 = log.RecordToolResult(r);
    ASSERT_TRUE(s1.ok() && s2.ok());
    EXPECT_GT(*s1, 0u);
    EXPECT_EQ(*s2, 0u);
    proto::Note n;
    n.set_text("hello");
    ASSERT_TRUE(log.RecordNote(n).ok());
    EXPECT_EQ(log.counts().tool_results, 1);
    EXPECT_EQ(log.counts().notes, 1);
    ASSERT_TRUE(log.writer().End(proto::RunEnd()).ok());
  }
  auto events = (*store)->LoadEvents(run_id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_TRUE((*events)[0].has_tool_result());
  EXPECT_TRUE((*events)[1].has_note());
  std::filesystem::remove_all(dir);
}

// `trace record -- true` once in 20 never exited: the agent was done before the server's
// listening thread had marked itself running, httplib's stop() did nothing, and Stop()
// joined a thread that never ended. Stop right after Start, many times over (the proxy
// server needs no model). Hangs (the ctest timeout) without the fix.
TEST(ServerLifecycle, StopRightAfterStartAlwaysReturns) {
  for (int i = 0; i < 300; ++i) {
    auto server = Server::CreateProxy("http://127.0.0.1:9/v1", ServerOptions());
    ASSERT_TRUE(server.ok()) << server.status().message();
    ASSERT_TRUE((*server)->Start().ok());
    (*server)->Stop();
  }
}

// A commit that cannot happen (the store stopped taking writes) is a 503-worthy
// Unavailable from Commit and from Writable, not a silent success.
TEST(RunLog, CommitWaitsForTheStoreAndReportsWhenItCannotTakeWrites) {
  std::string dir =
      std::filesystem::temp_directory_path() / ("trace_runlog_c_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto store = store::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  store::WriterOptions wo;
  wo.commit_interval_ms = 3'600'000;  // only Commit makes a commit happen
  auto writer = (*store)->BeginRun(proto::RunHeader(), wo);
  ASSERT_TRUE(writer.ok());
  std::string run_id = (*writer)->run_id();
  RunLog log(std::move(writer).value(), 5);
  proto::Note n;
  n.set_text("acknowledged");
  auto seq = log.RecordNote(n);
  ASSERT_TRUE(log.Commit(seq).ok());
  EXPECT_TRUE(log.Commit(uint64_t{0}).ok());
  EXPECT_TRUE(log.Writable().ok());
  // Committed: another connection sees it.
  auto events = (*store)->LoadEvents(run_id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);
  // The run deleted under the recorder: the next commit fails for good.
  store::DeleteOptions force;
  force.force = true;
  ASSERT_TRUE((*store)->DeleteRun(run_id, force).ok());
  Status st = log.Commit(log.RecordNote(n));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("not recorded"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("deleted"), std::string::npos) << st.message();
  EXPECT_EQ(log.Writable().code(), StatusCode::kUnavailable);
  EXPECT_EQ(log.Commit(log.RecordNote(n)).code(), StatusCode::kUnavailable);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trace::recorder
