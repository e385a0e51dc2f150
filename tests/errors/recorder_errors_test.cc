// Control characters, invalid UTF-8 and huge values through the error paths of the
// recorder's parsers of client input: the OpenAI request formats (every node of a full
// chat request and of a legacy completion request replaced by the hostile text, every key
// renamed to it), the trace event API's events, and the JSON Schemas of structured
// outputs and tool parameters. Each 4xx message must be one bounded printable line: the
// OpenAI SDKs print it on the agent developer's terminal.
//
// Each value a message quotes goes through EscapeForDisplay (base/escape.h); the test
// fails for any variant whose message is not one safe line (the fuzz finding
// openai-request-unescaped-role: a role with a newline and ESC came back verbatim).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/grammar/json_schema.h"
#include "recorder/openai_api.h"
#include "recorder/server/event_api.h"
#include "tests/errors/hostile.h"

namespace trace {
namespace {

using ojson = nlohmann::ordered_json;
using testing::HostileText;
using testing::HostileVariants;
using testing::IsOneSafeLine;

// Runs `message_of` on every variant; returns the pointers whose error message is not one
// safe line, and counts the errors.
struct Outcome {
  int errors = 0;
  std::set<std::string> unsafe;
};
Outcome CheckVariants(const ojson& doc,
                      const std::function<std::optional<std::string>(const ojson&)>& message_of) {
  Outcome o;
  for (const auto& [pointer, variant] : HostileVariants(doc)) {
    std::optional<std::string> message = message_of(variant);
    if (!message) continue;
    ++o.errors;
    if (!IsOneSafeLine(*message)) o.unsafe.insert(pointer);
  }
  return o;
}

void ExpectAllSafe(const Outcome& o, const char* what) {
  for (const std::string& p : o.unsafe) {
    ADD_FAILURE() << what << ": the error for a hostile " << p << " is not one safe line";
  }
}

std::optional<std::string> RequestError(const recorder::WireFormat& format, const ojson& body) {
  auto parsed = format.Parse(body.dump());
  if (auto* err = std::get_if<recorder::ApiError>(&parsed)) {
    EXPECT_GE(err->http_status, 400);
    EXPECT_LT(err->http_status, 500);
    return err->message;
  }
  return std::nullopt;
}

TEST(RecorderErrorMessages, ChatCompletionsRequestEveryNode) {
  const ojson doc = ojson::parse(R"({
    "model": "gpt-4o-mini",
    "messages": [
      {"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "strict": true, "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
      "required": ["city"], "additionalProperties": false}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": true,
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
    "temperature": 0.5, "top_p": 0.9, "seed": 3, "max_tokens": 7, "stop": ["x"],
    "logprobs": true, "top_logprobs": 2, "stream": true,
    "stream_options": {"include_usage": true}, "n": 1})");
  const Outcome o = CheckVariants(
      doc, [](const ojson& body) { return RequestError(recorder::OpenAiChatFormat(), body); });
  EXPECT_GT(o.errors, 40);
  ExpectAllSafe(o, "chat request");
}

TEST(RecorderErrorMessages, CompletionsRequestEveryNode) {
  const ojson doc = ojson::parse(R"({"model": "m", "prompt": "abc", "max_tokens": 4,
    "logprobs": 2, "stop": "\n", "seed": 1, "guided_choice": ["a", "b"], "stream": false})");
  const Outcome o = CheckVariants(doc, [](const ojson& body) {
    return RequestError(recorder::OpenAiCompletionsFormat(), body);
  });
  EXPECT_GE(o.errors, 7);
  ExpectAllSafe(o, "completions request");
}

TEST(RecorderErrorMessages, EventApiEveryNode) {
  const std::vector<ojson> events = {
      ojson::parse(R"({"type": "tool_call", "name": "f", "call_id": "c", "arguments": {"a": 1}})"),
      ojson::parse(R"({"type": "tool_result", "name": "f", "call_id": "c", "content": "r",
                       "is_error": false})"),
      ojson::parse(
          R"({"type": "context", "source": "s", "chunk_id": "i", "content": "c", "score": 0.5, "query": "q"})"),
      ojson::parse(R"({"type": "template_var", "name": "n", "value": "v", "template": "t"})"),
      ojson::parse(R"({"type": "clock", "clock": "wall", "value_ns": 5, "text": "t"})"),
      ojson::parse(R"({"type": "note", "topic": "t", "text": "x", "data": {"k": [1]}})")};
  Outcome all;
  for (const ojson& event : events) {
    const std::string type = event["type"].get<std::string>();
    const Outcome o = CheckVariants(event, [](const ojson& e) -> std::optional<std::string> {
      auto parsed = recorder::EventApi::ParseAgentEvent(nlohmann::json(e), "events[0]");
      if (auto* err = std::get_if<recorder::ApiError>(&parsed)) return err->message;
      return std::nullopt;
    });
    all.errors += o.errors;
    for (const std::string& p : o.unsafe) all.unsafe.insert(type + p);
  }
  EXPECT_GT(all.errors, 10);
  ExpectAllSafe(all, "event");
}

TEST(RecorderErrorMessages, JsonSchemaEveryNode) {
  const ojson schema = ojson::parse(R"({"$defs": {"n": {"type": "integer", "minimum": 0}},
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 3},
    "n": {"$ref": "#/$defs/n"}, "any": {"anyOf": [{"type": "null"}, {"const": 1}]},
    "x": {"type": "number", "exclusiveMinimum": 1, "maximum": 9}},
    "required": ["name", "n"], "additionalProperties": false})");
  for (bool strict : {false, true}) {
    const Outcome o = CheckVariants(schema, [strict](const ojson& s) -> std::optional<std::string> {
      recorder::grammar::SchemaOptions options;
      options.strict = strict;
      auto g = recorder::grammar::CompileJsonSchema(s, options);
      if (g.ok()) return std::nullopt;
      return g.status().message();
    });
    EXPECT_GT(o.errors, 15);
    ExpectAllSafe(o, strict ? "strict schema" : "schema");
  }
  // A $ref, a property name and a type name quoted in messages come out escaped. (The
  // property name without its 3000-byte tail: a path is clipped at its start.)
  recorder::grammar::SchemaOptions options;
  const std::string hostile_name = HostileText().substr(0, HostileText().size() - 3000);
  for (const ojson& s :
       {ojson{{"$ref", "#/" + HostileText()}},
        ojson{{"properties", {{hostile_name, {{"type", 5}}}}}}, ojson{{"type", HostileText()}},
        ojson{{"required", {HostileText()}}, {"properties", ojson::object()}}}) {
    auto g = recorder::grammar::CompileJsonSchema(s, options);
    ASSERT_FALSE(g.ok()) << s.dump();
    EXPECT_TRUE(IsOneSafeLine(g.status().message())) << g.status().message();
    EXPECT_NE(g.status().message().find(testing::kEscapedStart), std::string::npos)
        << g.status().message();
  }
}

}  // namespace
}  // namespace trace
