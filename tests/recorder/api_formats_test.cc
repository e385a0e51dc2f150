// Unit tests of the OpenAI Responses and Anthropic Messages wire formats: requests mapped
// onto the internal model call (and every refusal naming its field), responses and event
// streams rendered in each API's shape and read back (what proxy mode records), item
// merging and the response store behind previous_response_id / item_reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_completions.h"
#include "recorder/api/openai_responses.h"
#include "recorder/api/sse.h"
#include "recorder/server/response_store.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

// `body` as text keeps its key order (a json's dump would sort it).
CompletionRequest ParseOk(const WireFormat& f, const std::string& body) {
  auto parsed = f.Parse(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    ADD_FAILURE() << body << " -> " << e->message;
    return {};
  }
  return std::get<CompletionRequest>(parsed);
}
CompletionRequest ParseOk(const WireFormat& f, const json& body) {
  return ParseOk(f, body.dump());
}

ApiError ParseError(const WireFormat& f, const std::string& body) {
  auto parsed = f.Parse(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(ResponsesFormat, MapsInputItemsInstructionsToolsAndFormat) {
  const WireFormat& f = OpenAiResponsesFormat();
  CompletionRequest r = ParseOk(f, std::string(R"({
    "model": "gpt-4.1", "instructions": "Be terse.",
    "input": [
      {"role": "user", "content": "What is the weather in Paris?"},
      {"type": "message", "role": "assistant", "id": "msg_1",
       "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
       "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
      {"type": "item_reference", "id": "msg_0"},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"role": "developer", "content": [{"type": "input_text", "text": "Answer in French."}]}
    ],
    "tools": [{"type": "function", "name": "weather", "description": "Weather now",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}],
    "tool_choice": {"type": "function", "name": "weather"}, "parallel_tool_calls": false,
    "text": {"format": {"type": "json_schema", "name": "answer",
                        "schema": {"type": "object", "properties": {"t": {"type": "number"}}}}},
    "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 77, "store": false,
    "previous_response_id": "resp_0", "include": ["message.output_text.logprobs"],
    "top_logprobs": 3, "stream": true})"));
  ASSERT_TRUE(r.system.has_value());
  EXPECT_EQ(*r.system, "Be terse.");
  ASSERT_EQ(r.messages.size(), 6u);  // the reasoning item renders nothing
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[1].role, "assistant");
  EXPECT_EQ(r.messages[1].content, "Let me look.");
  EXPECT_EQ(r.messages[1].item_id, "msg_1");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[2].tool_calls[0].item_id, "fc_1");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[3].content, "18C");
  EXPECT_EQ(r.messages[4].item_reference, "msg_0");
  EXPECT_EQ(r.messages[5].role, "system");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_TRUE(r.tools[0].strict);  // Responses' default
  EXPECT_EQ(r.tools[0].parameters_ordered.dump(),
            R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format.kind, ResponseFormat::kJsonSchema);
  EXPECT_EQ(r.response_format.name, "answer");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.max_tokens, 77);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.previous_response_id, "resp_0");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.stream);

  // A string input is one user message; store defaults to true, as OpenAI's does.
  CompletionRequest s = ParseOk(f, {{"model", "m"}, {"input", "hi"}});
  ASSERT_EQ(s.messages.size(), 1u);
  EXPECT_EQ(s.messages[0].content, "hi");
  EXPECT_TRUE(s.store);
  EXPECT_EQ(s.tool_choice, ToolChoice::kNone);
  EXPECT_FALSE(s.max_tokens_given);
}

TEST(ResponsesFormat, RefusesWhatItCannotDoNamingTheField) {
  const WireFormat& f = OpenAiResponsesFormat();
  struct Case {
    std::string body;
    std::string param;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"model": "m"})", "input"},
          {R"({"model": "m", "input": 3})", "input"},
          {R"({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})",
           "input[0].call_id"},
          {R"({"model": "m", "input": [{"type": "function_call_output", "call_id": "c"}]})",
           "input[0].output"},
          {R"({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image",
               "image_url": "x"}]}]})",
           "input[0].content[0].type"},
          {R"({"model": "m", "input": [{"type": "web_search_call", "id": "w"}]})", "input[0].type"},
          {R"({"model": "m", "input": [{"type": "item_reference"}]})", "input[0].id"},
          {R"({"model": "m", "input": [{"role": "tool", "content": "x"}]})", "input[0].role"},
          {R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
          {R"({"model": "m", "input": "x", "tools": [{"type": "function"}]})", "tools[0].name"},
          {R"({"model": "m", "input": "x", "tool_choice": "required"})", "tool_choice"},
          {R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "a"}],
               "tool_choice": {"type": "function", "name": "b"}})",
           "tool_choice.name"},
          {R"({"model": "m", "input": "x", "temperature": 2.5})", "temperature"},
          {R"({"model": "m", "input": "x", "max_output_tokens": 0})", "max_output_tokens"},
          {R"({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}})",
           "text.format.type"},
          {R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}})",
           "text.format.name"},
          {R"({"model": "m", "input": "x", "background": true})", "background"},
          {R"({"model": "m", "input": "x", "conversation": "conv_1"})", "conversation"},
          {R"({"model": "m", "input": "x", "top_logprobs": 21})", "top_logprobs"},
          {R"({"model": "m", "input": "x", "previous_response_id": 5})", "previous_response_id"},
          {R"({"input": "x"})", "model"},
      }) {
    ApiError e = ParseError(f, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
    // OpenAI's error shape.
    json body = json::parse(f.ErrorBody(e));
    EXPECT_EQ(body["error"]["param"], c.param);
  }
  // previous_response_id alone is enough.
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      f.Parse(R"({"model": "m", "previous_response_id": "resp_1"})")));
}

TEST(ResponsesFormat, MergesFunctionCallsIntoTheirAssistantTurn) {
  auto msg = [](std::string role, std::string content) {
    ChatMessage m;
    m.role = std::move(role);
    m.content = std::move(content);
    return m;
  };
  auto call = [](std::string id) {
    ChatMessage m;
    m.role = "assistant";
    m.tool_calls.push_back({id, "f", "{}", ""});
    return m;
  };
  std::vector<ChatMessage> merged = MergeResponsesItems(
      {msg("user", "q"), msg("assistant", "thinking"), call("a"), call("b"), msg("tool", "1"),
       msg("tool", "2"), call("c"), msg("assistant", "done")});
  ASSERT_EQ(merged.size(), 6u);
  EXPECT_EQ(merged[1].content, "thinking");
  ASSERT_EQ(merged[1].tool_calls.size(), 2u);
  EXPECT_EQ(merged[1].tool_calls[1].id, "b");
  EXPECT_EQ(merged[4].content, "");  // a call with no text before it starts its own turn
  ASSERT_EQ(merged[4].tool_calls.size(), 1u);
  EXPECT_EQ(merged[5].content, "done");
}

CompletionResult SampleResult(const std::string& id) {
  CompletionResult r;
  r.id = id;
  r.message_item_id = "msg_x";
  r.created = 1700000000;
  r.model = "demo";
  r.text = "Hello there";
  r.finish_reason = "stop";
  r.prompt_tokens = 12;
  r.completion_tokens = 3;
  r.token_ids = {1, 2, 3};
  r.logits_digests = {7, 8, 9};
  return r;
}

// The concatenated non-streamed object equals what the stream folds back to: the format's
// own reader (proxy mode's) sees one answer whichever way it travelled.
TEST(ResponsesFormat, StreamFoldsBackToTheBody) {
  const WireFormat& f = OpenAiResponsesFormat();
  CompletionRequest req = ParseOk(f, {{"model", "demo"}, {"input", "hi"}, {"stream", true}});
  for (bool tools : {false, true}) {
    CompletionResult r = SampleResult("resp_1");
    if (tools) {
      r.text = "";
      r.finish_reason = "tool_calls";
      r.tool_calls = {{"call_1", "weather", R"({"city": "Paris"})", "fc_1"},
                      {"call_2", "time", "{}", "fc_2"}};
    }
    CompletionResult header = r;
    header.text.clear();
    header.tool_calls.clear();
    auto enc = f.NewStream(req, header);
    std::string stream = enc->Begin();
    if (!tools) {
      stream += enc->Text("Hello", {});  // one statement each: events in order
      stream += enc->Text(" there", {});
    }
    stream += enc->End(r, "", {});
    std::vector<SseEvent> events = ParseSse(stream);
    ASSERT_GE(events.size(), 4u);
    EXPECT_EQ(events.front().event, "response.created");
    EXPECT_EQ(events.back().event, "response.completed");
    int64_t seq = 0;
    for (const SseEvent& e : events) {
      json d = json::parse(e.data);
      EXPECT_EQ(d["type"], e.event);
      EXPECT_EQ(d["sequence_number"], seq++);
    }
    json body = json::parse(f.Body(req, r));
    EXPECT_EQ(f.FoldStream(stream), body);
    ResponseSummary s = f.ReadResponse(body);
    EXPECT_EQ(s.id, "resp_1");
    EXPECT_EQ(s.text, r.text);
    EXPECT_EQ(s.finish_reason, tools ? "tool_calls" : "stop");
    EXPECT_EQ(s.tool_calls.size(), r.tool_calls.size());
    EXPECT_EQ(s.input_tokens, 12);
    EXPECT_EQ(s.output_tokens, 3);
    if (tools) {
      EXPECT_EQ(body["output"].size(), 2u);
      EXPECT_EQ(body["output"][1]["call_id"], "call_2");
      EXPECT_EQ(body["output"][1]["id"], "fc_2");
    } else {
      EXPECT_EQ(body["output"][0]["content"][0]["text"], "Hello there");
    }
  }
  // Cut by max_output_tokens: incomplete, as OpenAI says it.
  CompletionResult cut = SampleResult("resp_2");
  cut.finish_reason = "length";
  json body = json::parse(f.Body(req, cut));
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(f.ReadResponse(body).finish_reason, "length");
}

TEST(AnthropicFormat, MapsMessagesBlocksToolsAndPrefill) {
  const WireFormat& f = AnthropicMessagesFormat();
  CompletionRequest r = ParseOk(f, std::string(R"({
    "model": "claude-sonnet-4-5", "max_tokens": 300,
    "system": [{"type": "text", "text": "You are terse."}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"zeta": 1, "city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}],
         "is_error": true},
        {"type": "text", "text": "And "}, {"type": "text", "text": "tomorrow?"}]},
      {"role": "assistant", "content": "It will be"}
    ],
    "tools": [{"name": "weather", "description": "d", "input_schema":
               {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "temperature": 0.7, "top_k": 5, "stop_sequences": ["END"], "stream": true,
    "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}})"));
  EXPECT_EQ(*r.system, "You are terse.");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "Checking.");
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"zeta":1,"city":"Paris"})");  // as sent
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.messages[2].content, "18C");
  EXPECT_TRUE(r.messages[2].is_error);
  EXPECT_EQ(r.messages[3].role, "user");
  EXPECT_EQ(r.messages[3].content, "And tomorrow?");
  EXPECT_EQ(r.assistant_prefill, "It will be");
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(r.sampling.max_tokens, 300);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.response_format.kind, ResponseFormat::kJsonSchema);
  EXPECT_TRUE(r.response_format.strict);
}

TEST(AnthropicFormat, RefusesWhatAnthropicRefusesInItsShape) {
  const WireFormat& f = AnthropicMessagesFormat();
  struct Case {
    std::string body;
    std::string param;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
           {R"({"model": "m", "max_tokens": 5})", "messages"},
           {R"({"model": "m", "max_tokens": 5, "messages": []})", "messages"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})",
            "messages[0].role"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content":
               [{"type": "image", "source": {}}]}]})",
            "messages[0].content[0].type"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content":
               [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})",
            "messages[0].content[0].type"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content":
               [{"type": "tool_result"}]}]})",
            "messages[0].content[0].tool_use_id"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"},
               {"role": "assistant", "content": "trailing "}]})",
            "messages"},
           {R"({"model": "m", "max_tokens": 5, "temperature": 1.5,
               "messages": [{"role": "user", "content": "x"}]})",
            "temperature"},
           {R"({"model": "m", "max_tokens": 5, "tools": [{"name": "f"}],
               "messages": [{"role": "user", "content": "x"}]})",
            "tools[0].input_schema"},
           {R"({"model": "m", "max_tokens": 5, "tools": [{"type": "web_search_20250305",
               "name": "web_search"}], "messages": [{"role": "user", "content": "x"}]})",
            "tools[0].type"},
           {R"({"model": "m", "max_tokens": 5, "tool_choice": {"type": "tool", "name": "g"},
               "tools": [{"name": "f", "input_schema": {"type": "object"}}],
               "messages": [{"role": "user", "content": "x"}]})",
            "tool_choice.name"},
           {R"({"model": "m", "max_tokens": 5, "thinking": {"type": "enabled", "budget_tokens": 9},
               "messages": [{"role": "user", "content": "x"}]})",
            "thinking"},
           {R"({"model": "m", "max_tokens": 5, "stop_sequences": "END",
               "messages": [{"role": "user", "content": "x"}]})",
            "stop_sequences"},
           {R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})", "model"},
           // A tool_result must answer a tool_use of the assistant message just before it.
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content":
               [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "18C"}]}]})",
            "messages[0].content[0].tool_use_id"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                "name": "f", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"},
                {"type": "tool_result", "tool_use_id": "toolu_2"}]}]})",
            "messages[2].content[1].tool_use_id"},
           {R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                "name": "f", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
               {"role": "assistant", "content": "ok"},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}]})",
            "messages[4].content[0].tool_use_id"},
       }) {
    ApiError e = ParseError(f, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    // Anthropic's error shape.
    json body = json::parse(f.ErrorBody(e));
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["message"], e.message);
  }
  ApiError bad = ParseError(f, "{not json");
  EXPECT_EQ(json::parse(f.ErrorBody(bad))["error"]["type"], "invalid_request_error");
  // anthropic-version is required and must be a date Anthropic's API could know.
  auto headers = [](std::string v) {
    return [v](const std::string& name) { return name == "anthropic-version" ? v : ""; };
  };
  EXPECT_FALSE(f.CheckHeaders(headers("2023-06-01")).has_value());
  EXPECT_EQ(f.CheckHeaders(headers(""))->param, "anthropic-version");
  // Later dates (newer SDKs) are served alike; older ones and non-dates are refused.
  EXPECT_FALSE(f.CheckHeaders(headers("2026-10-21")).has_value());
  EXPECT_EQ(f.CheckHeaders(headers("2022-12-31"))->param, "anthropic-version");
  EXPECT_EQ(f.CheckHeaders(headers("latest"))->param, "anthropic-version");
  EXPECT_EQ(f.CheckHeaders(headers("2026-1-021"))->param, "anthropic-version");
  // Error types by status, and OpenAI-shaped errors converted (the frontend's safety net).
  ApiError auth;
  auth.http_status = 401;
  auth.message = "bad key";
  EXPECT_EQ(json::parse(AnthropicErrorBody(auth))["error"]["type"], "authentication_error");
  json converted = json::parse(AnthropicErrorFromOpenAi(404, auth.Body()));
  EXPECT_EQ(converted["error"]["type"], "not_found_error");
  EXPECT_EQ(converted["error"]["message"], "bad key");
  EXPECT_EQ(AnthropicErrorFromOpenAi(404, AnthropicErrorBody(auth)), "");
  EXPECT_TRUE(IsAnthropicRoute("/messages"));
  EXPECT_FALSE(IsAnthropicRoute("/v1/responses"));
}

TEST(AnthropicFormat, StreamFoldsBackToTheBody) {
  const WireFormat& f = AnthropicMessagesFormat();
  CompletionRequest req;
  for (int variant = 0; variant < 3; ++variant) {
    CompletionResult r = SampleResult("msg_1");
    if (variant == 1) {
      r.finish_reason = "tool_calls";
      r.tool_calls = {{"toolu_1", "weather", R"({"zeta": 1, "city": "Paris"})", ""}};
    } else if (variant == 2) {
      r.stop_sequence = "END";
    }
    CompletionResult header = r;
    auto enc = f.NewStream(req, header);
    std::string stream = enc->Begin();
    stream += enc->Text("Hello", {});
    stream += enc->End(r, " there", {});
    std::vector<SseEvent> events = ParseSse(stream);
    EXPECT_EQ(events.front().event, "message_start");
    EXPECT_EQ(events.back().event, "message_stop");
    for (const SseEvent& e : events) EXPECT_EQ(json::parse(e.data)["type"], e.event);
    json body = json::parse(f.Body(req, r));
    EXPECT_EQ(f.FoldStream(stream), body) << stream;
    EXPECT_EQ(body["stop_reason"], variant == 1   ? "tool_use"
                                   : variant == 2 ? "stop_sequence"
                                                  : "end_turn");
    if (variant == 2) {
      EXPECT_EQ(body["stop_sequence"], "END");
    }
    ResponseSummary s = f.ReadResponse(body);
    EXPECT_EQ(s.text, "Hello there");
    EXPECT_EQ(s.finish_reason, variant == 1 ? "tool_calls" : "stop");
    if (variant == 1) {
      ASSERT_EQ(s.tool_calls.size(), 1u);
      EXPECT_EQ(json::parse(s.tool_calls[0].arguments), json::parse(r.tool_calls[0].arguments));
      // The input keeps the order the model wrote it in.
      EXPECT_NE(f.Body(req, r).find(R"("input":{"zeta":1,"city":"Paris"})"), std::string::npos);
    }
  }
}

TEST(ChatFormat, StreamFoldsBackToTheBody) {
  const WireFormat& f = OpenAiChatFormat();
  CompletionRequest req;
  req.stream = true;
  req.include_usage_in_stream = true;
  CompletionResult r = SampleResult("chatcmpl-1");
  r.tool_calls = {{"call_1", "f", "{}", ""}};
  r.finish_reason = "tool_calls";
  auto enc = f.NewStream(req, r);
  std::string stream = enc->Begin();
  stream += enc->Text("Hello", {});
  stream += enc->End(r, " there", {});
  json folded = f.FoldStream(stream);
  json body = json::parse(f.Body(req, r));
  EXPECT_EQ(folded["choices"], body["choices"]);
  EXPECT_EQ(folded["usage"], body["usage"]);
  EXPECT_EQ(f.ReadResponse(folded).tool_calls.at(0).id, "call_1");
}

TEST(Sse, ParsesEventsAsClientsDo) {
  std::vector<SseEvent> e = ParseSse(
      ": comment\r\nevent: a\r\ndata: 1\r\n\r\ndata: x\ndata: y\n\nevent: partial\ndata: z");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].event, "a");
  EXPECT_EQ(e[0].data, "1");
  EXPECT_EQ(e[1].event, "");
  EXPECT_EQ(e[1].data, "x\ny");
  EXPECT_EQ(SseFrame("a", "{}"), "event: a\ndata: {}\n\n");
}

ChatMessage Msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

TEST(ResponseStore, ResolvesPreviousResponsesAndItemReferences) {
  ResponseStore store;
  // Turn 1: a question; the answer is a text item and a function call.
  CompletionRequest t1;
  t1.messages = {Msg("user", "weather?")};
  auto r1 = store.Resolve(&t1);
  ASSERT_TRUE(std::holds_alternative<ResponseStore::Resolved>(r1));
  CompletionResult a1;
  a1.id = "resp_1";
  a1.message_item_id = "msg_1";
  a1.text = "Checking.";
  a1.tool_calls = {{"call_1", "weather", "{}", "fc_1"}};
  store.Put(std::move(std::get<ResponseStore::Resolved>(r1)), a1, "{\"id\":\"resp_1\"}");
  EXPECT_EQ(store.Body("resp_1"), "{\"id\":\"resp_1\"}");

  // Turn 2 by previous_response_id: the conversation so far, then the tool output.
  CompletionRequest t2;
  t2.previous_response_id = "resp_1";
  ChatMessage out = Msg("tool", "18C");
  out.tool_call_id = "call_1";
  t2.messages = {out};
  auto r2 = store.Resolve(&t2);
  ASSERT_TRUE(std::holds_alternative<ResponseStore::Resolved>(r2));
  ASSERT_EQ(t2.messages.size(), 3u);
  EXPECT_EQ(t2.messages[0].content, "weather?");
  EXPECT_EQ(t2.messages[1].content, "Checking.");
  EXPECT_EQ(t2.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(t2.messages[2].role, "tool");
  CompletionResult a2;
  a2.id = "resp_2";
  a2.message_item_id = "msg_2";
  a2.text = "18 degrees.";
  store.Put(std::move(std::get<ResponseStore::Resolved>(r2)), a2, "{}");

  // Turn 3 the AI SDK's way: the whole conversation with earlier outputs by reference.
  CompletionRequest t3;
  ChatMessage ref1, ref_call, ref2;
  ref1.item_reference = "msg_1";
  ref_call.item_reference = "fc_1";
  ref2.item_reference = "msg_2";
  t3.messages = {Msg("user", "weather?"), ref1, ref_call, out, ref2, Msg("user", "thanks")};
  auto r3 = store.Resolve(&t3);
  ASSERT_TRUE(std::holds_alternative<ResponseStore::Resolved>(r3));
  ASSERT_EQ(t3.messages.size(), 5u);
  EXPECT_EQ(t3.messages[1].content, "Checking.");
  ASSERT_EQ(t3.messages[1].tool_calls.size(), 1u);  // the call joined its turn
  EXPECT_EQ(t3.messages[3].content, "18 degrees.");

  // Unknown ids: 404 naming them.
  CompletionRequest bad;
  bad.previous_response_id = "resp_nope";
  auto e = store.Resolve(&bad);
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(std::get<ApiError>(e).http_status, 404);
  EXPECT_NE(std::get<ApiError>(e).message.find("resp_nope"), std::string::npos);
  CompletionRequest bad_ref;
  ChatMessage unknown;
  unknown.item_reference = "msg_nope";
  bad_ref.messages = {unknown};
  auto e2 = store.Resolve(&bad_ref);
  ASSERT_TRUE(std::holds_alternative<ApiError>(e2));
  EXPECT_NE(std::get<ApiError>(e2).message.find("msg_nope"), std::string::npos);

  // Deleting forgets the response.
  EXPECT_TRUE(store.Delete("resp_2"));
  EXPECT_FALSE(store.Body("resp_2").has_value());
}

TEST(ResponseStore, DropsTheOldestPastItsMemoryLimit) {
  ResponseStore store(/*max_bytes=*/4096);
  for (int i = 0; i < 40; ++i) {
    CompletionRequest t;
    t.messages = {Msg("user", std::string(200, 'q'))};
    auto r = store.Resolve(&t);
    CompletionResult a;
    a.id = "resp_" + std::to_string(i);
    a.message_item_id = "msg_" + std::to_string(i);
    a.text = std::string(100, 'a');
    store.Put(std::move(std::get<ResponseStore::Resolved>(r)), a, std::string(100, 'b'));
  }
  EXPECT_LE(store.stored_bytes(), 4096u);
  EXPECT_FALSE(store.Body("resp_0").has_value());
  EXPECT_TRUE(store.Body("resp_39").has_value());
  CompletionRequest t;
  ChatMessage ref;
  ref.item_reference = "msg_0";
  t.messages = {ref};
  EXPECT_TRUE(std::holds_alternative<ApiError>(store.Resolve(&t)));
}

// frequency_penalty, presence_penalty and logit_bias reach the sampler through both OpenAI
// formats; null is absent; every malformed value is a 400 naming the field.
// A tool name may appear once in a request, in each format.
TEST(ToolFields, DuplicateNamesAreRefusedInEveryFormat) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  const json chat_tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  ApiError e = ParseError(
      OpenAiChatFormat(),
      json{{"model", "m"}, {"messages", messages}, {"tools", {chat_tool, chat_tool}}}.dump());
  EXPECT_EQ(e.param, "tools[1].function.name");
  EXPECT_EQ(e.message, "duplicate tool name \"f\"");
  const json responses_tool = {{"type", "function"}, {"name", "f"}};
  e = ParseError(
      OpenAiResponsesFormat(),
      json{{"model", "m"}, {"input", "hi"}, {"tools", {responses_tool, responses_tool}}}.dump());
  EXPECT_EQ(e.param, "tools[1].name");
  EXPECT_EQ(e.message, "duplicate tool name \"f\"");
  const json anthropic_tool = {{"name", "f"}, {"input_schema", {{"type", "object"}}}};
  e = ParseError(AnthropicMessagesFormat(), json{{"model", "m"},
                                                 {"max_tokens", 1},
                                                 {"messages", messages},
                                                 {"tools", {anthropic_tool, anthropic_tool}}}
                                                .dump());
  EXPECT_EQ(e.param, "tools[1].name");
  EXPECT_EQ(e.message, "duplicate tool name \"f\"");
}

// The duplicate check is a set: comparing each name with every earlier one took 5 * 10^11
// comparisons for the million tools of a 32 MB body, inside the body limit: more than 12
// minutes of a server thread (1.8 s at 50,000 names, growing faster than the square). Such
// a body is now refused before it is parsed (kMaxJsonValues: a tool of one name is 5
// values and keys), and the 49,000 tools the limit lets through are checked.
TEST(ToolFields, AMillionToolsAreRefusedAndTheMostALimitAllowsAreChecked) {
  for (int n : {1'000'000, 49'000}) {
    std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[)";
    for (int i = 0; i < n; ++i) {  // "type" may be left out
      body += (i ? R"(,{"function":{"name":"f)" : R"({"function":{"name":"f)") + std::to_string(i) +
              R"("}})";
    }
    body += "]}";
    ASSERT_LT(body.size(), 32u << 20);
    if (n > 50'000) {
      auto parsed = OpenAiChatFormat().Parse(body);
      ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
      EXPECT_EQ(std::get<ApiError>(parsed).code, "too_many_json_values");
      EXPECT_EQ(std::get<ApiError>(parsed).param, "tools");
      continue;
    }
    const CompletionRequest r = ParseOk(OpenAiChatFormat(), body);
    ASSERT_EQ(r.tools.size(), static_cast<size_t>(n));
    EXPECT_EQ(r.tools.back().name, "f" + std::to_string(n - 1));
  }
}

TEST(OpenAiPenalties, ParsedByChatAndCompletions) {
  const std::string chat = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string completions = R"("prompt": "x")";
  for (const auto& [format, input] : std::vector<std::pair<const WireFormat*, std::string>>{
           {&OpenAiChatFormat(), chat}, {&OpenAiCompletionsFormat(), completions}}) {
    CompletionRequest r = ParseOk(*format, R"({"model": "m", )" + input +
                                               R"(, "frequency_penalty": 0.5,
        "presence_penalty": -1.25, "logit_bias": {"50256": -100, "7": 2.5, "0": 100}})");
    EXPECT_EQ(r.sampling.frequency_penalty, 0.5f);
    EXPECT_EQ(r.sampling.presence_penalty, -1.25f);
    // Ascending by id.
    EXPECT_EQ(r.sampling.logit_bias,
              (std::vector<std::pair<int32_t, float>>{{0, 100.0f}, {7, 2.5f}, {50256, -100.0f}}));
    CompletionRequest none = ParseOk(*format, R"({"model": "m", )" + input +
                                                  R"(, "frequency_penalty": null,
        "presence_penalty": null, "logit_bias": null})");
    EXPECT_FALSE(none.sampling.AdjustsLogits());
    CompletionRequest empty =
        ParseOk(*format, R"({"model": "m", )" + input + R"(, "logit_bias": {}})");
    EXPECT_FALSE(empty.sampling.AdjustsLogits());
    CompletionRequest edges = ParseOk(*format, R"({"model": "m", )" + input +
                                                   R"(, "frequency_penalty": -2,
        "presence_penalty": 2, "logit_bias": {"2147483647": 0.5}})");
    EXPECT_EQ(edges.sampling.frequency_penalty, -2.0f);
    EXPECT_EQ(edges.sampling.presence_penalty, 2.0f);
    ASSERT_EQ(edges.sampling.logit_bias.size(), 1u);
    EXPECT_EQ(edges.sampling.logit_bias[0].first, 2147483647);

    json many = json::object();
    for (int i = 0; i < 300; ++i) many[std::to_string(i)] = 1;
    EXPECT_EQ(
        ParseOk(*format, R"({"model": "m", )" + input + R"(, "logit_bias": )" + many.dump() + "}")
            .sampling.logit_bias.size(),
        300u);
    many["300"] = 1;

    struct Case {
      std::string fields;
      std::string param;
    };
    for (const Case& c : std::vector<Case>{
             {R"("frequency_penalty": 2.01)", "frequency_penalty"},
             {R"("frequency_penalty": -3)", "frequency_penalty"},
             {R"("frequency_penalty": "0.5")", "frequency_penalty"},
             {R"("frequency_penalty": true)", "frequency_penalty"},
             {R"("presence_penalty": 1e300)", "presence_penalty"},
             {R"("presence_penalty": [0])", "presence_penalty"},
             {R"("logit_bias": [1, 2])", "logit_bias"},
             {R"("logit_bias": "50256:-100")", "logit_bias"},
             {R"("logit_bias": {"abc": 1})", "logit_bias"},
             {R"("logit_bias": {"-1": 1})", "logit_bias"},
             {R"("logit_bias": {"1.5": 1})", "logit_bias"},
             {R"("logit_bias": {"07": 1})", "logit_bias"},
             {R"("logit_bias": {"": 1})", "logit_bias"},
             {R"("logit_bias": {"2147483648": 1})", "logit_bias"},
             {R"("logit_bias": {"5": 100.5})", "logit_bias.5"},
             {R"("logit_bias": {"5": -101})", "logit_bias.5"},
             {R"("logit_bias": {"5": "1"})", "logit_bias.5"},
             {R"("logit_bias": {"5": null})", "logit_bias.5"},
             {R"("logit_bias": )" + many.dump(), "logit_bias"},
         }) {
      ApiError e = ParseError(*format, R"({"model": "m", )" + input + ", " + c.fields + "}");
      EXPECT_EQ(e.http_status, 400) << c.fields;
      EXPECT_EQ(e.param, c.param) << c.fields << " -> " << e.message;
      EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
      json body = json::parse(format->ErrorBody(e));
      EXPECT_EQ(body["error"]["param"], c.param);
    }
    // A key is client text: quoted escaped, so the error stays one printable line.
    ApiError e = ParseError(
        *format, R"({"model": "m", )" + input + R"(, "logit_bias": {"1\n\u001b[31m": 1}})");
    EXPECT_EQ(e.param, "logit_bias");
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\x1b'), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace trace::recorder
