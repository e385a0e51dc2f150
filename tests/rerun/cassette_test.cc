// Unit tests of the cassette (recorder/cassette/): request identity (what matches and what
// does not), the matcher (equal requests in another order, parameter differences,
// exhaustion), the divergence report (which message, which field), recorded answers in
// another streaming shape or API than recorded, and embeddings calls (their own identity).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recorder/api/openai_embeddings.h"
#include "recorder/cassette/call_matcher.h"
#include "recorder/cassette/cassette.h"
#include "recorder/cassette/cassette_gate.h"
#include "recorder/cassette/divergence.h"
#include "recorder/cassette/recorded_answer.h"
#include "recorder/openai_api.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

json ChatBody(const std::string& question, double temperature = 0.5, bool stream = false) {
  return json{{"model", "demo"},
              {"messages",
               {{{"role", "system"}, {"content", "You are terse."}},
                {{"role", "user"}, {"content", question}}}},
              {"temperature", temperature},
              {"max_tokens", 16},
              {"stream", stream}};
}

json ChatResponse(const std::string& text) {
  return json{{"id", "chatcmpl-rec"},
              {"object", "chat.completion"},
              {"created", 1},
              {"model", "demo"},
              {"choices",
               {{{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", text}}},
                 {"finish_reason", "stop"}}}},
              {"usage", {{"prompt_tokens", 9}, {"completion_tokens", 2}, {"total_tokens", 11}}}};
}

proto::Event LlmEvent(uint64_t seq, const json& request, const std::string& answer) {
  proto::Event e;
  e.set_seq(seq);
  proto::LlmCall* c = e.mutable_llm_call();
  c->set_api(std::string(kApiChatCompletions));
  c->set_endpoint("/v1/chat/completions");
  c->set_request_json(request.dump());
  c->set_response_json(ChatResponse(answer).dump());
  c->set_output_text(answer);
  c->set_finish_reason("stop");
  c->set_http_status(200);
  return e;
}

RequestIdentity IdentityOfBody(const WireFormat& format, const json& body) {
  auto parsed = format.Parse(body.dump());
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  return IdentityOf(std::get<CompletionRequest>(parsed));
}

Cassette MakeCassette(const std::vector<proto::Event>& events) {
  proto::RunHeader header;
  header.set_run_id("01TESTRUN0000000000000000A");
  auto c = Cassette::FromEvents(header, events);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c).value();
}

TEST(RequestIdentity, StreamingDoesNotChangeItButSamplingDoes) {
  const RequestIdentity plain = IdentityOfBody(OpenAiChatFormat(), ChatBody("hi"));
  const RequestIdentity streamed =
      IdentityOfBody(OpenAiChatFormat(), ChatBody("hi", 0.5, /*stream=*/true));
  EXPECT_EQ(plain.key, streamed.key);
  const RequestIdentity hotter = IdentityOfBody(OpenAiChatFormat(), ChatBody("hi", 0.9));
  EXPECT_NE(plain.key, hotter.key);
  std::vector<FieldChange> changes = CompareIdentities(plain, hotter);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].path, "sampling.temperature");
  EXPECT_EQ(changes[0].field, "temperature");
  EXPECT_EQ(changes[0].message, -1);
}

TEST(RequestIdentity, PenaltiesAndLogitBiasArePartOfItWhenSet) {
  const RequestIdentity plain = IdentityOfBody(OpenAiChatFormat(), ChatBody("hi"));
  // Zero penalties and an empty bias are the defaults: the key a request without them has.
  json zeros = ChatBody("hi");
  zeros["frequency_penalty"] = 0;
  zeros["presence_penalty"] = 0;
  zeros["logit_bias"] = json::object();
  EXPECT_EQ(IdentityOfBody(OpenAiChatFormat(), zeros).key, plain.key);
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"frequency_penalty", 0.5}, {"presence_penalty", -1}, {"logit_bias", {{"42", -100}}}}) {
    json body = ChatBody("hi");
    body[field] = value;
    const RequestIdentity changed = IdentityOfBody(OpenAiChatFormat(), body);
    EXPECT_NE(changed.key, plain.key) << field;
    std::vector<FieldChange> changes = CompareIdentities(plain, changed);
    ASSERT_EQ(changes.size(), 1u) << field;
    EXPECT_EQ(changes[0].path, "sampling." + field);
  }
  json a = ChatBody("hi"), b = ChatBody("hi");
  a["logit_bias"] = {{"42", -100}};
  b["logit_bias"] = {{"42", 5}};
  EXPECT_NE(IdentityOfBody(OpenAiChatFormat(), a).key, IdentityOfBody(OpenAiChatFormat(), b).key);
}

TEST(RequestIdentity, TheSameConversationThroughAnotherApiMatches) {
  json anthropic{{"model", "demo"},
                 {"system", "You are terse."},
                 {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"temperature", 0.5},
                 {"max_tokens", 16}};
  const RequestIdentity a = IdentityOfBody(AnthropicMessagesFormat(), anthropic);
  const RequestIdentity chat = IdentityOfBody(OpenAiChatFormat(), ChatBody("hi"));
  // The system text is a separate field in Anthropic's request and a message in OpenAI's:
  // the identities differ there, and only there.
  std::vector<FieldChange> changes = CompareIdentities(chat, a);
  ASSERT_FALSE(changes.empty());
  for (const FieldChange& c : changes) {
    EXPECT_TRUE(c.path.rfind("messages", 0) == 0 || c.path == "system") << c.path;
  }
}

TEST(CallMatcher, EqualRequestsInAnotherOrderEachGetTheirOwnRecordedAnswer) {
  // Recorded: A, B, A (the second A answered differently).
  Cassette cassette =
      MakeCassette({LlmEvent(3, ChatBody("A"), "first A"), LlmEvent(5, ChatBody("B"), "the B"),
                    LlmEvent(8, ChatBody("A"), "second A")});
  CallMatcher matcher(cassette);
  const RequestIdentity a = IdentityOfBody(OpenAiChatFormat(), ChatBody("A"));
  const RequestIdentity b = IdentityOfBody(OpenAiChatFormat(), ChatBody("B"));
  MatchResult m = matcher.Match(b);
  ASSERT_EQ(m.kind, MatchResult::kMatched);
  EXPECT_EQ(m.recorded->seq, 5u);
  m = matcher.Match(a);
  ASSERT_EQ(m.kind, MatchResult::kMatched);
  EXPECT_EQ(m.recorded->seq, 3u);
  EXPECT_EQ(m.recorded->call.output_text(), "first A");
  m = matcher.Match(a);
  ASSERT_EQ(m.kind, MatchResult::kMatched);
  EXPECT_EQ(m.recorded->seq, 8u);
  EXPECT_EQ(m.recorded->call.output_text(), "second A");
  EXPECT_EQ(matcher.used(), 3u);
  EXPECT_TRUE(matcher.Unused().empty());
  // A fourth call: the recording is exhausted.
  EXPECT_EQ(matcher.Match(a).kind, MatchResult::kExhausted);
}

TEST(CallMatcher, AParameterDifferenceIsADivergenceAgainstTheNextRecordedCall) {
  Cassette cassette =
      MakeCassette({LlmEvent(2, ChatBody("A"), "a"), LlmEvent(4, ChatBody("B", 0.5), "b")});
  CallMatcher matcher(cassette);
  ASSERT_EQ(matcher.Match(IdentityOfBody(OpenAiChatFormat(), ChatBody("A"))).kind,
            MatchResult::kMatched);
  const RequestIdentity hotter = IdentityOfBody(OpenAiChatFormat(), ChatBody("B", 0.7));
  MatchResult m = matcher.Match(hotter);
  ASSERT_EQ(m.kind, MatchResult::kDiverged);
  ASSERT_NE(m.expected, nullptr);
  EXPECT_EQ(m.expected->number, 2);
  EXPECT_EQ(m.expected->seq, 4u);
  // A divergence uses nothing: the recorded call is still there for the right request.
  EXPECT_EQ(matcher.used(), 1u);
  Divergence d =
      RequestDivergence(2, m.expected->number, m.expected->seq, m.expected->identity, hotter);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].path, "sampling.temperature");
  EXPECT_NE(d.Summary().find("call 2 differs from recorded call 2"), std::string::npos)
      << d.Summary();
}

TEST(CallMatcher, SkipMovesTheExpectedCallOn) {
  Cassette cassette =
      MakeCassette({LlmEvent(2, ChatBody("A"), "a"), LlmEvent(4, ChatBody("B"), "b")});
  CallMatcher matcher(cassette);
  const RecordedCall* skipped = matcher.Skip();
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->seq, 2u);
  // A was skipped (a fork's live call): it no longer answers.
  EXPECT_EQ(matcher.Match(IdentityOfBody(OpenAiChatFormat(), ChatBody("A"))).kind,
            MatchResult::kDiverged);
  EXPECT_EQ(matcher.Match(IdentityOfBody(OpenAiChatFormat(), ChatBody("B"))).kind,
            MatchResult::kMatched);
  EXPECT_EQ(matcher.Skip(), nullptr);
}

TEST(Divergence, NamesTheMessageTheFieldAndDiffsThePrompts) {
  Cassette cassette = MakeCassette({LlmEvent(2, ChatBody("What is my email?"), "x")});
  const RequestIdentity now = IdentityOfBody(OpenAiChatFormat(), ChatBody("What is my name?"));
  const RecordedCall& expected = cassette.calls()[0];
  Divergence d = RequestDivergence(1, 1, expected.seq, expected.identity, now);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].path, "messages[1].content");
  EXPECT_EQ(d.changes[0].message, 1);
  EXPECT_EQ(d.changes[0].role, "user");
  EXPECT_EQ(d.changes[0].field, "content");
  EXPECT_EQ(d.changes[0].recorded, "\"What is my email?\"");
  EXPECT_EQ(d.changes[0].now, "\"What is my name?\"");
  EXPECT_NE(d.prompt_diff.find("- What is my email?"), std::string::npos) << d.prompt_diff;
  EXPECT_NE(d.prompt_diff.find("+ What is my name?"), std::string::npos) << d.prompt_diff;
  const json j = d.Json();
  EXPECT_EQ(j["kind"], "request");
  EXPECT_EQ(j["changes"][0]["path"], "messages[1].content");
}

TEST(RecordedAnswer, ANonStreamedRecordingAnswersAStreamingClient) {
  Cassette cassette = MakeCassette({LlmEvent(2, ChatBody("hi"), "hello there")});
  auto parsed = OpenAiChatFormat().Parse(ChatBody("hi", 0.5, true).dump());
  const CompletionRequest& req = std::get<CompletionRequest>(parsed);
  RecordedReply reply = RenderRecordedAnswer(cassette.calls()[0], OpenAiChatFormat(), req);
  EXPECT_EQ(reply.status, 200);
  ASSERT_TRUE(reply.stream);
  EXPECT_EQ(reply.body.rfind("data: ", 0), 0u) << reply.body;
  EXPECT_NE(reply.body.find("hello there"), std::string::npos);
  EXPECT_NE(reply.body.find("data: [DONE]"), std::string::npos);
  // The stream folds back into the recorded answer.
  json folded = OpenAiChatFormat().FoldStream(reply.body);
  EXPECT_EQ(folded["choices"][0]["message"]["content"], "hello there");
}

TEST(RecordedAnswer, SameApiNonStreamedGetsTheRecordedBytes) {
  Cassette cassette = MakeCassette({LlmEvent(2, ChatBody("hi"), "hello")});
  auto parsed = OpenAiChatFormat().Parse(ChatBody("hi").dump());
  RecordedReply reply = RenderRecordedAnswer(cassette.calls()[0], OpenAiChatFormat(),
                                             std::get<CompletionRequest>(parsed));
  EXPECT_FALSE(reply.stream);
  EXPECT_EQ(reply.body, cassette.calls()[0].call.response_json());
}

TEST(RecordedAnswer, AStreamedRecordingAnswersBothShapes) {
  proto::Event e = LlmEvent(2, ChatBody("hi", 0.5, true), "hey");
  const std::string events =
      "data: {\"id\":\"chatcmpl-rec\",\"object\":\"chat.completion.chunk\",\"choices\":"
      "[{\"index\":0,\"delta\":{\"content\":\"hey\"}}]}\n\ndata: [DONE]\n\n";
  e.mutable_llm_call()->set_stream(true);
  e.mutable_llm_call()->set_response_stream(events);
  Cassette cassette = MakeCassette({e});
  // A streaming client gets the recorded events byte for byte...
  auto streamed = OpenAiChatFormat().Parse(ChatBody("hi", 0.5, true).dump());
  RecordedReply s = RenderRecordedAnswer(cassette.calls()[0], OpenAiChatFormat(),
                                         std::get<CompletionRequest>(streamed));
  EXPECT_TRUE(s.stream);
  EXPECT_EQ(s.body, events);
  // ...and a client that stopped streaming the recorded answer as one body.
  auto plain = OpenAiChatFormat().Parse(ChatBody("hi").dump());
  RecordedReply p = RenderRecordedAnswer(cassette.calls()[0], OpenAiChatFormat(),
                                         std::get<CompletionRequest>(plain));
  EXPECT_FALSE(p.stream);
  EXPECT_EQ(json::parse(p.body)["choices"][0]["message"]["content"], "hey");
}

TEST(RecordedAnswer, AnotherApiGetsItsOwnShape) {
  Cassette cassette = MakeCassette({LlmEvent(2, ChatBody("hi"), "hello")});
  json anthropic{
      {"model", "demo"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 16}};
  auto parsed = AnthropicMessagesFormat().Parse(anthropic.dump());
  RecordedReply reply = RenderRecordedAnswer(cassette.calls()[0], AnthropicMessagesFormat(),
                                             std::get<CompletionRequest>(parsed));
  json body = json::parse(reply.body);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["content"][0]["text"], "hello");
}

TEST(Cassette, ARunWithoutModelCallsIsAClearError) {
  proto::RunHeader header;
  header.set_run_id("01TESTRUN0000000000000000B");
  proto::Event note;
  note.set_seq(1);
  note.mutable_note()->set_text("nothing");
  auto c = Cassette::FromEvents(header, {note});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("has no model calls"), std::string::npos);
  EXPECT_NE(c.status().message().find("01TESTRUN0000000000000000B"), std::string::npos);
}

TEST(Cassette, ToolResultsAreKeyedByTheirCallsArguments) {
  proto::RunHeader header;
  header.set_run_id("01TESTRUN0000000000000000C");
  std::vector<proto::Event> events = {LlmEvent(1, ChatBody("A"), "a")};
  proto::Event call;
  call.set_seq(2);
  call.mutable_tool_call()->set_call_id("call_1");
  call.mutable_tool_call()->set_name("delete_customer");
  call.mutable_tool_call()->set_arguments_json("{\"customer_id\": 4}");
  events.push_back(call);
  proto::Event result;
  result.set_seq(3);
  result.mutable_tool_result()->set_call_id("call_1");
  result.mutable_tool_result()->set_name("delete_customer");
  result.mutable_tool_result()->set_content("{\"deleted\": 1}");
  events.push_back(result);
  auto c = Cassette::FromEvents(header, events);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->tools().size(), 1u);
  EXPECT_EQ(c->tools()[0].arguments_key, ToolArgumentsKey(json{{"customer_id", 4}}));
  EXPECT_EQ(c->tools()[0].seq, 3u);
}

TEST(CassetteGate, AToolCallIdFindsItsResultWhateverItsArguments) {
  // The model's tool call had arguments that are not JSON (cut off at max_tokens): the agent
  // reads them as {} and looks the tool up by the call id the recorded answer gave it.
  proto::RunHeader header;
  header.set_run_id("01TESTRUN0000000000000000D");
  std::vector<proto::Event> events = {LlmEvent(1, ChatBody("A"), "a")};
  for (int i = 0; i < 2; ++i) {
    proto::Event call;
    call.set_seq(2 + 2 * i);
    call.mutable_tool_call()->set_call_id("call_" + std::to_string(i));
    call.mutable_tool_call()->set_name("update_email");
    call.mutable_tool_call()->set_arguments_json("{\"customer_id\": 3, \"ema");
    events.push_back(call);
    proto::Event result;
    result.set_seq(3 + 2 * i);
    result.mutable_tool_result()->set_call_id("call_" + std::to_string(i));
    result.mutable_tool_result()->set_name("update_email");
    result.mutable_tool_result()->set_content("result " + std::to_string(i));
    events.push_back(result);
  }
  auto cassette = Cassette::FromEvents(header, events);
  ASSERT_TRUE(cassette.ok()) << cassette.status().message();
  CassetteGate gate(*cassette, CassetteGateOptions{});
  auto second = gate.LookupTool("update_email", json::object(), "call_1");
  ASSERT_TRUE(std::holds_alternative<CallGate::ToolAnswer>(second));
  EXPECT_TRUE(std::get<CallGate::ToolAnswer>(second).recorded);
  EXPECT_EQ(std::get<CallGate::ToolAnswer>(second).result.content(), "result 1");
  auto first = gate.LookupTool("update_email", json::object(), "call_0");
  EXPECT_EQ(std::get<CallGate::ToolAnswer>(first).result.content(), "result 0");
  // Used up: the same lookup again has no recording and runs live (a divergence).
  auto again = gate.LookupTool("update_email", json::object(), "call_0");
  ASSERT_TRUE(std::holds_alternative<CallGate::ToolAnswer>(again));
  EXPECT_FALSE(std::get<CallGate::ToolAnswer>(again).recorded);
  ASSERT_TRUE(gate.divergence().has_value());
  EXPECT_EQ(gate.divergence()->kind, Divergence::kTool);
}

TEST(CassetteGate, RecordedOnlyToolsRefuseWhatWasNotRecorded) {
  Cassette cassette = MakeCassette({LlmEvent(1, ChatBody("A"), "a")});
  CassetteGateOptions options;
  options.tools_recorded_only = true;
  CassetteGate gate(cassette, options);
  auto answer = gate.LookupTool("delete_customer", json{{"customer_id", 4}}, "");
  ASSERT_TRUE(std::holds_alternative<ApiError>(answer));
  EXPECT_EQ(std::get<ApiError>(answer).http_status, 409);
  EXPECT_NE(std::get<ApiError>(answer).message.find("--tools recorded-only"), std::string::npos);
}

TEST(CassetteGate, ClockReadsComeBackInRecordedOrderPerClock) {
  std::vector<proto::Event> events = {LlmEvent(1, ChatBody("A"), "a")};
  for (int i = 0; i < 3; ++i) {
    proto::Event e;
    e.set_seq(2 + i);
    e.mutable_clock_read()->set_clock(i == 1 ? "monotonic" : "wall");
    e.mutable_clock_read()->set_value_ns(1000 + i);
    events.push_back(e);
  }
  Cassette cassette = MakeCassette(events);
  CassetteGate gate(cassette, CassetteGateOptions{});
  EXPECT_EQ(gate.RecordedClock("wall")->value_ns(), 1000);
  EXPECT_EQ(gate.RecordedClock("monotonic")->value_ns(), 1001);
  auto wall = gate.RecordedClock("wall");
  EXPECT_EQ(wall->value_ns(), 1002);
  EXPECT_EQ(wall->cassette_seq(), 4u);
  EXPECT_FALSE(gate.RecordedClock("wall").has_value());  // used up: the live clock
}

proto::Event EmbeddingsEvent(uint64_t seq, const json& request) {
  proto::Event e;
  e.set_seq(seq);
  proto::LlmCall* c = e.mutable_llm_call();
  c->set_api(std::string(kApiEmbeddings));
  c->set_endpoint(kEmbeddingsRoute);
  c->set_request_json(request.dump());
  c->set_response_json(
      json{{"object", "list"},
           {"data", {{{"object", "embedding"}, {"index", 0}, {"embedding", {0.5, -0.25}}}}},
           {"usage", {{"prompt_tokens", 2}, {"total_tokens", 2}}}}
          .dump());
  c->set_http_status(200);
  c->set_upstream("http://upstream.test/v1");
  return e;
}

TEST(EmbeddingsIdentity, EncodingDefaultsToFloatAndUserDoesNotCount) {
  json body{{"model", "e"}, {"input", {"a", "b"}}};
  auto plain = EmbeddingsIdentityOf(body.dump());
  ASSERT_TRUE(plain.has_value());
  json with_float = body;
  with_float["encoding_format"] = "float";
  with_float["user"] = "someone";
  EXPECT_EQ(EmbeddingsIdentityOf(with_float.dump())->key, plain->key);
  json base64 = body;
  base64["encoding_format"] = "base64";
  EXPECT_NE(EmbeddingsIdentityOf(base64.dump())->key, plain->key);
  json dims = body;
  dims["dimensions"] = 3;
  EXPECT_NE(EmbeddingsIdentityOf(dims.dump())->key, plain->key);
  EXPECT_EQ(plain->prompt_text, "[input]\na\n[input]\nb\n");
  EXPECT_FALSE(EmbeddingsIdentityOf("[1, 2]").has_value());
  EXPECT_FALSE(EmbeddingsIdentityOf("not json").has_value());
}

TEST(EmbeddingsIdentity, ARecordedCallIsMatchedByItsRequestAndNeverByAChatCall) {
  json request{{"model", "e"}, {"input", {"a", "b"}}, {"encoding_format", "base64"}};
  Cassette cassette = MakeCassette({LlmEvent(1, ChatBody("A"), "a"), EmbeddingsEvent(2, request)});
  CallMatcher matcher(cassette);
  MatchResult m = matcher.Match(*EmbeddingsIdentityOf(request.dump()));
  ASSERT_EQ(m.kind, MatchResult::kMatched);
  EXPECT_EQ(m.recorded->seq, 2u);
  // Another input: a divergence against the next recorded call, naming the input.
  json other = request;
  other["input"][1] = "c";
  m = matcher.Match(*EmbeddingsIdentityOf(other.dump()));
  ASSERT_EQ(m.kind, MatchResult::kDiverged);
  ASSERT_EQ(m.expected->seq, 1u);
  // The chat call left is not what an embeddings request of its text would match either.
  json chat_like{{"model", "demo"}, {"input", "A"}};
  EXPECT_EQ(matcher.Match(*EmbeddingsIdentityOf(chat_like.dump())).kind, MatchResult::kDiverged);
  RequestIdentity recorded = *EmbeddingsIdentityOf(request.dump());
  std::vector<FieldChange> changes =
      CompareIdentities(recorded, *EmbeddingsIdentityOf(other.dump()));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].path, "input[1]");
  EXPECT_EQ(changes[0].recorded, "\"b\"");
}

TEST(EmbeddingsResponse, VectorsDimensionsAndUsageInBothEncodings) {
  json floats{{"model", "e-v1"},
              {"data", {{{"embedding", {0.5, 0.25, 1.0}}}, {{"embedding", {0.0, 0.0, 0.0}}}}},
              {"usage", {{"prompt_tokens", 7}, {"total_tokens", 7}}}};
  EmbeddingsSummary s = ReadEmbeddingsResponse(floats);
  EXPECT_EQ(s.model, "e-v1");
  EXPECT_EQ(s.vectors, 2);
  EXPECT_EQ(s.dimensions, 3);
  EXPECT_TRUE(s.has_usage);
  EXPECT_EQ(s.input_tokens, 7);
  // Three little-endian float32s (12 bytes) in base64, and two (8 bytes, padded).
  EXPECT_EQ(
      ReadEmbeddingsResponse(json{{"data", {{{"embedding", "AAAAPwAAgD4AAIA/"}}}}}).dimensions, 3);
  EXPECT_EQ(ReadEmbeddingsResponse(json{{"data", {{{"embedding", "AAAAPwAAgD4="}}}}}).dimensions,
            2);
  EXPECT_FALSE(ReadEmbeddingsResponse(json{{"data", json::array()}}).has_usage);
  EXPECT_EQ(UnsupportedEmbeddings().http_status, 404);
}

}  // namespace
}  // namespace trace::recorder
