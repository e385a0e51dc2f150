// The OTLP mapping (exporters/otlp_trace.h) on a hand-built run whose every time and id is
// known: span tree, names, kinds, times, GenAI attributes, content only on request, tool
// call pairing and links, errors, replay levels, redaction facts; the GenAI content shapes
// of each wire format; OTLP/JSON ids; header and URL parsing for OTLP/HTTP.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "exporters/genai_content.h"
#include "exporters/otlp_http.h"
#include "exporters/otlp_json.h"
#include "exporters/otlp_trace.h"
#include "exporters/url.h"

namespace trace::exporters {
namespace {

namespace otrace = opentelemetry::proto::trace::v1;
using nlohmann::json;

constexpr int64_t kStart = 1'800'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;

// The attributes of a span (or resource) as key -> JSON-ish text for easy checks.
std::map<std::string, const opentelemetry::proto::common::v1::AnyValue*> Attrs(
    const google::protobuf::RepeatedPtrField<opentelemetry::proto::common::v1::KeyValue>& kvs) {
  std::map<std::string, const opentelemetry::proto::common::v1::AnyValue*> out;
  for (const auto& kv : kvs) out[kv.key()] = &kv.value();
  return out;
}

std::string Hex(const std::string& bytes) {
  static const char k[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(k[c >> 4]);
    out.push_back(k[c & 15]);
  }
  return out;
}

RunData MakeRun() {
  RunData run;
  proto::RunHeader& h = run.header;
  h.set_run_id("01ARZ3NDEKTSV4RRFFQ69G5FAV");
  h.set_start_time_ns(kStart);
  h.add_argv("python3");
  h.add_argv("-u");
  h.add_argv("agents/support.py");
  h.set_endpoint("http://127.0.0.1:43210");
  h.set_hostname("box");
  h.set_run_seed(18446744073709551615ull);  // does not fit an int64
  h.mutable_engine()->set_numerics("canonical-v1");
  h.mutable_engine()->set_threads(4);
  h.mutable_device()->add_cpu_flags("avx2");
  h.mutable_model()->set_model_name("demo-tiny");
  h.mutable_model()->set_weights_sha256("ab12");
  run.summary.run_id = h.run_id();
  run.summary.status = store::RunStatus::kComplete;

  auto add = [&](int64_t at_ms) -> proto::Event& {
    proto::Event& e = run.events.emplace_back();
    e.set_seq(run.events.size());
    e.set_wall_time_ns(kStart + at_ms * kMs);
    return e;
  };
  add(5).mutable_clock_read()->set_clock("wall");
  {
    proto::ContextChunk* c = add(6).mutable_context_chunk();
    c->set_source("kb/refunds.md");
    c->set_content("Refunds within 30 days.");
    c->set_score(0.75);
  }
  {
    proto::LlmCall* c = add(110).mutable_llm_call();  // seq 3
    c->set_endpoint("/v1/chat/completions");
    c->set_model("demo-tiny");
    c->set_request_json(json{{"model", "demo-tiny"},
                             {"messages",
                              {{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "Refund order 17?"}}}},
                             {"tools",
                              {{{"type", "function"},
                                {"function",
                                 {{"name", "refund"},
                                  {"description", "Refund an order"},
                                  {"parameters", {{"type", "object"}}}}}}}}}
                            .dump());
    c->set_response_json(
        json{{"id", "chatcmpl-1"},
             {"model", "demo-tiny"},
             {"choices",
              {{{"index", 0},
                {"finish_reason", "tool_calls"},
                {"message",
                 {{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls",
                   {{{"id", "call_1"},
                     {"type", "function"},
                     {"function", {{"name", "refund"}, {"arguments", "{\"order\":17}"}}}}}}}}}}},
             {"usage", {{"prompt_tokens", 4}, {"completion_tokens", 3}}}}
            .dump());
    for (int i = 0; i < 4; ++i) c->add_prompt_token_ids(i);
    for (int i = 0; i < 3; ++i) {
      c->add_token_ids(10 + i);
      c->add_logits_digests(0x1111u * (i + 1));
    }
    c->mutable_params()->set_temperature(0.7f);
    c->mutable_params()->set_top_p(0.9f);
    c->mutable_params()->set_top_k(40);
    c->mutable_params()->set_max_tokens(64);
    c->mutable_params()->set_seed(42);
    c->mutable_params()->add_stop("\n\n");
    c->set_seed_used(42);
    c->set_numerics("canonical-v1");
    c->set_finish_reason("tool_calls");
    c->set_request_id("chatcmpl-1");
    c->set_http_status(200);
    c->mutable_timings()->set_start_ns(kStart + 10 * kMs);
    c->mutable_timings()->set_end_ns(kStart + 100 * kMs);
    c->set_prompt_tokens_reused(2);
  }
  {
    proto::ToolCall* t = add(111).mutable_tool_call();  // seq 4
    t->set_call_id("call_1");
    t->set_name("refund");
    t->set_arguments_json("{\"order\":17}");
    t->set_source("model");
    t->set_llm_call_seq(3);
  }
  {
    proto::ToolResult* r = add(300).mutable_tool_result();  // seq 5
    r->set_call_id("call_1");
    r->set_name("refund");
    r->set_content("refunded");
    r->set_duration_ms(50);
  }
  {
    proto::ToolResult* r = add(320).mutable_tool_result();  // seq 6: agent-only, failed
    r->set_call_id("agent_7");
    r->set_name("send_mail");
    r->set_content("smtp down");
    r->set_is_error(true);
  }
  {
    proto::LlmCall* c = add(400).mutable_llm_call();  // seq 7: a rejected request
    c->set_endpoint("/v1/chat/completions");
    c->set_model("demo-tiny");
    c->set_request_json("{\"model\":\"demo-tiny\",\"messages\":[]}");
    c->set_http_status(400);
    c->set_error("messages must not be empty");
    c->mutable_timings()->set_start_ns(kStart + 390 * kMs);
    c->mutable_timings()->set_end_ns(kStart + 391 * kMs);
  }
  add(450).mutable_note()->set_text("done");
  add(460).mutable_output()->set_data("bye\n");
  {
    proto::RunEnd* end = add(500).mutable_run_end();
    end->set_how(proto::RunEnd::EXITED);
    end->set_exit_code(3);
  }
  return run;
}

const otrace::Span* Find(const OtlpRequest& r, const std::string& name) {
  for (const auto& s : r.resource_spans(0).scope_spans(0).spans()) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

TEST(OtlpTraceTest, TraceIdIsTheRunIdsUlidAndSpanIdsAreStable) {
  // The ULID specification's example id and its 128-bit value.
  EXPECT_EQ(OtlpTraceIdHex("01ARZ3NDEKTSV4RRFFQ69G5FAV"), "01563e3ab5d3d6764c61efb99302bd5b");
  auto a = SpanIdOf("01ARZ3NDEKTSV4RRFFQ69G5FAV", "run");
  EXPECT_EQ(Hex(std::string(a.begin(), a.end())), "e5288f565f69458e");  // sha256(id/run)[:8]
  EXPECT_NE(OtlpTraceIdHex("not-a-ulid"), std::string(32, '0'));
  auto r1 = BuildOtlpRequest(MakeRun(), {});
  auto r2 = BuildOtlpRequest(MakeRun(), {});
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->SerializeAsString(), r2->SerializeAsString());  // exporting twice: same ids
}

TEST(OtlpTraceTest, SpanTreeNamesKindsAndTimesComeFromTheRecording) {
  auto r = BuildOtlpRequest(MakeRun(), {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->resource_spans_size(), 1);
  const auto& rs = r->resource_spans(0);
  EXPECT_EQ(rs.schema_url(), "https://opentelemetry.io/schemas/1.41.0");
  auto res = Attrs(rs.resource().attributes());
  EXPECT_EQ(res.at("trace.semconv.version")->string_value(), "1.41.0");
  EXPECT_EQ(res.at("service.name")->string_value(), "support.py");
  EXPECT_EQ(res.at("host.name")->string_value(), "box");
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "trace");
  // root, 2 model calls, 2 tool spans (call_1 with its result; the agent-only result).
  ASSERT_EQ(rs.scope_spans(0).spans_size(), 5);

  const otrace::Span* root = Find(*r, "invoke_agent support.py");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->kind(), otrace::Span::SPAN_KIND_INTERNAL);
  EXPECT_TRUE(root->parent_span_id().empty());
  EXPECT_EQ(Hex(root->trace_id()), "01563e3ab5d3d6764c61efb99302bd5b");
  EXPECT_EQ(root->start_time_unix_nano(), static_cast<uint64_t>(kStart));
  EXPECT_EQ(root->end_time_unix_nano(), static_cast<uint64_t>(kStart + 500 * kMs));  // RunEnd
  EXPECT_EQ(root->status().code(), otrace::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(root->status().message(), "agent exited with code 3");
  auto ra = Attrs(root->attributes());
  EXPECT_EQ(ra.at("gen_ai.operation.name")->string_value(), "invoke_agent");
  EXPECT_EQ(ra.at("gen_ai.provider.name")->string_value(), "trace");
  EXPECT_EQ(ra.at("gen_ai.usage.input_tokens")->int_value(), 4);
  EXPECT_EQ(ra.at("gen_ai.usage.output_tokens")->int_value(), 3);
  EXPECT_EQ(ra.at("trace.run.exit_code")->int_value(), 3);
  EXPECT_EQ(ra.at("error.type")->string_value(), "nonzero_exit");
  EXPECT_EQ(ra.at("trace.run.seed")->string_value(), "18446744073709551615");
  EXPECT_EQ(ra.at("trace.engine.numerics")->string_value(), "canonical-v1");
  EXPECT_EQ(ra.at("trace.engine.threads")->int_value(), 4);
  EXPECT_EQ(ra.at("trace.device.cpu_flags")->array_value().values(0).string_value(), "avx2");
  EXPECT_EQ(ra.at("trace.model.weights_sha256")->string_value(), "ab12");
  EXPECT_FALSE(ra.at("trace.redaction.applied")->bool_value());
  EXPECT_EQ(ra.count("trace.replay.level"), 0u);
  EXPECT_EQ(ra.at("process.command_args")->array_value().values_size(), 3);
  // Events without spans of their own: clock read, context chunk, note (no output
  // without content).
  ASSERT_EQ(root->events_size(), 3);
  EXPECT_EQ(root->events(1).name(), "trace.context_chunk");
  EXPECT_EQ(root->events(1).time_unix_nano(), static_cast<uint64_t>(kStart + 6 * kMs));
  EXPECT_EQ(Attrs(root->events(1).attributes()).count("trace.context.content"), 0u);

  const otrace::Span* call = Find(*r, "chat demo-tiny");
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->kind(), otrace::Span::SPAN_KIND_CLIENT);
  EXPECT_EQ(call->parent_span_id(), root->span_id());
  EXPECT_EQ(call->trace_id(), root->trace_id());
  EXPECT_EQ(call->start_time_unix_nano(), static_cast<uint64_t>(kStart + 10 * kMs));
  EXPECT_EQ(call->end_time_unix_nano(), static_cast<uint64_t>(kStart + 100 * kMs));
  EXPECT_EQ(call->status().code(), otrace::Status::STATUS_CODE_UNSET);
  auto ca = Attrs(call->attributes());
  EXPECT_EQ(ca.at("gen_ai.operation.name")->string_value(), "chat");
  EXPECT_EQ(ca.at("gen_ai.provider.name")->string_value(), "trace");
  EXPECT_EQ(ca.at("gen_ai.request.model")->string_value(), "demo-tiny");
  EXPECT_EQ(ca.at("gen_ai.conversation.id")->string_value(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
  EXPECT_EQ(ca.at("gen_ai.request.temperature")->double_value(), 0.7);  // not 0.69999998
  EXPECT_EQ(ca.at("gen_ai.request.top_p")->double_value(), 0.9);
  EXPECT_EQ(ca.at("gen_ai.request.top_k")->double_value(), 40.0);
  EXPECT_EQ(ca.at("gen_ai.request.max_tokens")->int_value(), 64);
  EXPECT_EQ(ca.at("gen_ai.request.seed")->int_value(), 42);
  EXPECT_EQ(ca.at("gen_ai.request.stop_sequences")->array_value().values(0).string_value(), "\n\n");
  EXPECT_EQ(ca.at("gen_ai.response.id")->string_value(), "chatcmpl-1");
  EXPECT_EQ(ca.at("gen_ai.response.model")->string_value(), "demo-tiny");
  EXPECT_EQ(ca.at("gen_ai.response.finish_reasons")->array_value().values(0).string_value(),
            "tool_calls");
  EXPECT_EQ(ca.at("gen_ai.usage.input_tokens")->int_value(), 4);
  EXPECT_EQ(ca.at("gen_ai.usage.output_tokens")->int_value(), 3);
  EXPECT_EQ(ca.at("gen_ai.usage.cache_read.input_tokens")->int_value(), 2);
  EXPECT_EQ(ca.at("server.address")->string_value(), "127.0.0.1");
  EXPECT_EQ(ca.at("server.port")->int_value(), 43210);
  EXPECT_EQ(ca.at("trace.event.seq")->int_value(), 3);
  EXPECT_EQ(ca.at("trace.call.number")->int_value(), 1);
  EXPECT_EQ(ca.at("trace.seed_used")->string_value(), "42");
  EXPECT_EQ(ca.at("trace.logits_digest")->string_value(),
            CombinedLogitsDigest(MakeRun().events[2].llm_call()));
  for (const char* content_key : {"gen_ai.input.messages", "gen_ai.output.messages",
                                  "gen_ai.tool.definitions", "gen_ai.system_instructions"}) {
    EXPECT_EQ(ca.count(content_key), 0u) << content_key << " without --content";
  }

  // The failed request: an errored CLIENT span.
  const auto& spans = rs.scope_spans(0).spans();
  const otrace::Span* failed = &spans[2];
  EXPECT_EQ(failed->name(), "chat demo-tiny");
  EXPECT_EQ(failed->status().code(), otrace::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(failed->status().message(), "messages must not be empty");
  EXPECT_EQ(Attrs(failed->attributes()).at("error.type")->string_value(), "400");
  EXPECT_EQ(Attrs(failed->attributes()).at("trace.call.number")->int_value(), 2);

  // The tool call: from the ToolCall to the ToolResult, shortened to the reported duration,
  // linked to the model call that asked for it.
  const otrace::Span* tool = Find(*r, "execute_tool refund");
  ASSERT_NE(tool, nullptr);
  EXPECT_EQ(tool->kind(), otrace::Span::SPAN_KIND_INTERNAL);
  EXPECT_EQ(tool->parent_span_id(), root->span_id());
  EXPECT_EQ(tool->start_time_unix_nano(), static_cast<uint64_t>(kStart + 250 * kMs));
  EXPECT_EQ(tool->end_time_unix_nano(), static_cast<uint64_t>(kStart + 300 * kMs));
  ASSERT_EQ(tool->links_size(), 1);
  EXPECT_EQ(tool->links(0).span_id(), call->span_id());
  auto ta = Attrs(tool->attributes());
  EXPECT_EQ(ta.at("gen_ai.operation.name")->string_value(), "execute_tool");
  EXPECT_EQ(ta.at("gen_ai.tool.name")->string_value(), "refund");
  EXPECT_EQ(ta.at("gen_ai.tool.call.id")->string_value(), "call_1");
  EXPECT_EQ(ta.at("trace.tool_call.seq")->int_value(), 4);
  EXPECT_EQ(ta.at("trace.tool_result.seq")->int_value(), 5);
  EXPECT_EQ(ta.count("gen_ai.tool.call.arguments"), 0u);

  const otrace::Span* mail = Find(*r, "execute_tool send_mail");
  ASSERT_NE(mail, nullptr);
  EXPECT_EQ(mail->status().code(), otrace::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(mail->status().message(), "");  // the error text is content
  EXPECT_EQ(mail->start_time_unix_nano(), mail->end_time_unix_nano());
  EXPECT_EQ(mail->links_size(), 0);
}

TEST(OtlpTraceTest, ContentIsOptInAndFollowsTheConventionsShapes) {
  OtlpOptions options;
  options.content = true;
  auto r = BuildOtlpRequest(MakeRun(), options);
  ASSERT_TRUE(r.ok());
  auto ca = Attrs(Find(*r, "chat demo-tiny")->attributes());
  json in = json::parse(ca.at("gen_ai.input.messages")->string_value());
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0],
            (json{{"role", "system"}, {"parts", {{{"type", "text"}, {"content", "Be brief."}}}}}));
  EXPECT_EQ(in[1]["parts"][0]["content"], "Refund order 17?");
  json out = json::parse(ca.at("gen_ai.output.messages")->string_value());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["role"], "assistant");
  EXPECT_EQ(out[0]["finish_reason"], "tool_call");
  EXPECT_EQ(out[0]["parts"][0], (json{{"type", "tool_call"},
                                      {"id", "call_1"},
                                      {"name", "refund"},
                                      {"arguments", {{"order", 17}}}}));
  json tools = json::parse(ca.at("gen_ai.tool.definitions")->string_value());
  EXPECT_EQ(tools, (json{{{"type", "function"},
                          {"name", "refund"},
                          {"description", "Refund an order"},
                          {"parameters", {{"type", "object"}}}}}));
  auto ta = Attrs(Find(*r, "execute_tool refund")->attributes());
  EXPECT_EQ(ta.at("gen_ai.tool.call.arguments")->string_value(), "{\"order\":17}");
  EXPECT_EQ(ta.at("gen_ai.tool.call.result")->string_value(), "refunded");
  const otrace::Span* root = Find(*r, "invoke_agent support.py");
  ASSERT_EQ(root->events_size(), 4);  // + the agent's output
  EXPECT_EQ(Attrs(root->events(1).attributes()).at("trace.context.content")->string_value(),
            "Refunds within 30 days.");
  EXPECT_EQ(Attrs(root->events(3).attributes()).at("trace.output.data")->string_value(), "bye\n");
}

TEST(OtlpTraceTest, ReplayLevelsAndRedactionFactsAreAttributes) {
  RunData run = MakeRun();
  run.redacted = true;
  run.redaction.fields.push_back({"seq 5", "tool_result.content", {{"sk-api-key", 2}}});
  run.redaction.prompt_tokens_removed = {3};
  ReplayLevels replay;
  replay.run_level = "tokens";
  replay.numerics = "canonical-v1";
  replay.call_levels[1] = "tokens";
  replay.skipped[2] = "HTTP 400";
  OtlpOptions options;
  options.replay = &replay;
  auto r = BuildOtlpRequest(run, options);
  ASSERT_TRUE(r.ok());
  const auto& spans = r->resource_spans(0).scope_spans(0).spans();
  auto root = Attrs(spans[0].attributes());
  EXPECT_EQ(root.at("trace.replay.level")->string_value(), "tokens");
  EXPECT_EQ(root.at("trace.replay.numerics")->string_value(), "canonical-v1");
  EXPECT_TRUE(root.at("trace.redaction.applied")->bool_value());
  EXPECT_EQ(root.at("trace.redaction.replacements")->int_value(), 2);
  EXPECT_EQ(root.at("trace.redaction.fields")->array_value().values(0).string_value(),
            "seq 5 tool_result.content (sk-api-key x2)");
  EXPECT_EQ(
      root.at("trace.redaction.prompt_token_ids_removed")->array_value().values(0).int_value(), 3);
  EXPECT_NE(root.at("trace.redaction.note")->string_value().find("tokens level"),
            std::string::npos);
  EXPECT_EQ(Attrs(spans[1].attributes()).at("trace.replay.level")->string_value(), "tokens");
  EXPECT_EQ(Attrs(spans[2].attributes()).at("trace.replay.level")->string_value(), "skipped");
  auto tool = Attrs(spans[3].attributes());
  EXPECT_EQ(tool.at("trace.redaction.fields")->array_value().values(0).string_value(),
            "seq 5 tool_result.content (sk-api-key x2)");
}

TEST(OtlpTraceTest, ProxiedRunsNameTheUpstreamProviderAndServer) {
  RunData run = MakeRun();
  (*run.header.mutable_attributes())["upstream"] = "https://api.anthropic.com/v1";
  run.events[2].mutable_llm_call()->set_endpoint("/v1/messages");
  auto r = BuildOtlpRequest(run, {});
  ASSERT_TRUE(r.ok());
  auto ca = Attrs(r->resource_spans(0).scope_spans(0).spans(1).attributes());
  EXPECT_EQ(ca.at("gen_ai.provider.name")->string_value(), "anthropic");
  EXPECT_EQ(ca.at("server.address")->string_value(), "api.anthropic.com");
  EXPECT_EQ(ca.at("server.port")->int_value(), 443);
  EXPECT_EQ(ca.count("gen_ai.response.model"), 1u);  // from the response body
}

TEST(GenAiContentTest, ResponsesAndAnthropicRequestsMapToTheSameShapes) {
  proto::LlmCall responses;
  responses.set_endpoint("/v1/responses");
  responses.set_request_json(
      json{{"instructions", "Be brief."},
           {"input",
            {{{"role", "user"}, {"content", "Refund 17"}},
             {{"type", "function_call"},
              {"call_id", "c1"},
              {"name", "refund"},
              {"arguments", "{\"order\":17}"}},
             {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}}},
           {"tools", {{{"type", "function"}, {"name", "refund"}}}}}
          .dump());
  responses.set_response_json(
      json{{"status", "completed"},
           {"output",
            {{{"type", "message"}, {"content", {{{"type", "output_text"}, {"text", "Done."}}}}}}}}
          .dump());
  GenAiContent c = ContentOf(responses, {});
  EXPECT_EQ(c.system_instructions, (json{{{"type", "text"}, {"content", "Be brief."}}}));
  ASSERT_EQ(c.input_messages.size(), 3u);
  EXPECT_EQ(c.input_messages[1]["parts"][0]["type"], "tool_call");
  EXPECT_EQ(c.input_messages[1]["parts"][0]["arguments"], (json{{"order", 17}}));
  EXPECT_EQ(
      c.input_messages[2],
      (json{{"role", "tool"},
            {"parts", {{{"type", "tool_call_response"}, {"id", "c1"}, {"response", "ok"}}}}}));
  EXPECT_EQ(c.tool_definitions[0]["name"], "refund");
  EXPECT_EQ(c.output_messages, (json{{{"role", "assistant"},
                                      {"parts", {{{"type", "text"}, {"content", "Done."}}}},
                                      {"finish_reason", "stop"}}}));

  proto::LlmCall anthropic;
  anthropic.set_endpoint("/v1/messages");
  anthropic.set_request_json(json{
      {"system", "Be brief."},
      {"messages",
       {{{"role", "user"}, {"content", "Refund 17"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "tool_use"}, {"id", "tu1"}, {"name", "refund"}, {"input", {{"order", 17}}}}}}},
        {{"role", "user"},
         {"content", {{{"type", "tool_result"}, {"tool_use_id", "tu1"}, {"content", "ok"}}}}}}},
      {"tools", {{{"name", "refund"}, {"input_schema", {{"type", "object"}}}}}}}
                                 .dump());
  anthropic.set_response_json(json{{"role", "assistant"},
                                   {"stop_reason", "end_turn"},
                                   {"content", {{{"type", "text"}, {"text", "Done."}}}}}
                                  .dump());
  GenAiContent a = ContentOf(anthropic, {});
  EXPECT_EQ(a.system_instructions, c.system_instructions);
  EXPECT_EQ(a.input_messages[1]["parts"][0], (json{{"type", "tool_call"},
                                                   {"id", "tu1"},
                                                   {"name", "refund"},
                                                   {"arguments", {{"order", 17}}}}));
  EXPECT_EQ(a.input_messages[2]["parts"][0]["type"], "tool_call_response");
  EXPECT_EQ(
      a.tool_definitions,
      (json{{{"type", "function"}, {"name", "refund"}, {"parameters", {{"type", "object"}}}}}));
  EXPECT_EQ(a.output_messages, c.output_messages);

  // A streamed proxy call keeps raw SSE: the output comes from what was recorded.
  proto::LlmCall sse;
  sse.set_endpoint("/v1/chat/completions");
  sse.set_request_json("{\"messages\":[]}");
  sse.set_response_json("data: {\"choices\":[]}\n\ndata: [DONE]\n\n");
  sse.set_output_text("Hi");
  sse.set_finish_reason("length");
  proto::ToolCall tc;
  tc.set_call_id("c9");
  tc.set_name("look");
  tc.set_arguments_json("not json");
  GenAiContent s = ContentOf(sse, {&tc});
  EXPECT_EQ(
      s.output_messages,
      (json{{{"role", "assistant"},
             {"parts",
              {{{"type", "text"}, {"content", "Hi"}},
               {{"type", "tool_call"}, {"id", "c9"}, {"name", "look"}, {"arguments", "not json"}}}},
             {"finish_reason", "length"}}}));
}

TEST(OtlpJsonTest, IdsAreHexAndEnumsNumbers) {
  auto r = BuildOtlpRequest(MakeRun(), {});
  ASSERT_TRUE(r.ok());
  auto text = OtlpToJson(*r);
  ASSERT_TRUE(text.ok());
  json j = json::parse(*text);
  const json& spans = j["resourceSpans"][0]["scopeSpans"][0]["spans"];
  EXPECT_EQ(spans[0]["traceId"], "01563e3ab5d3d6764c61efb99302bd5b");
  EXPECT_EQ(spans[0]["spanId"], "e5288f565f69458e");
  EXPECT_EQ(spans[1]["parentSpanId"], "e5288f565f69458e");
  EXPECT_EQ(spans[1]["kind"], 3);
  EXPECT_EQ(spans[0]["startTimeUnixNano"], std::to_string(kStart));
  EXPECT_EQ(spans[3]["links"][0]["spanId"], spans[1]["spanId"]);
}

TEST(OtlpTraceTest, SplitKeepsResourceAndScopeAndEverySpanOnce) {
  auto r = BuildOtlpRequest(MakeRun(), {});
  ASSERT_TRUE(r.ok());
  auto parts = SplitOtlpRequest(*r, 2);
  ASSERT_EQ(parts.size(), 3u);
  std::vector<std::string> names;
  for (const auto& p : parts) {
    EXPECT_EQ(p.resource_spans(0).resource().SerializeAsString(),
              r->resource_spans(0).resource().SerializeAsString());
    EXPECT_EQ(p.resource_spans(0).scope_spans(0).scope().name(), "trace");
    for (const auto& s : p.resource_spans(0).scope_spans(0).spans()) names.push_back(s.span_id());
  }
  ASSERT_EQ(names.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(names[i], r->resource_spans(0).scope_spans(0).spans(i).span_id());
}

TEST(OtlpHttpTest, HeadersAndUrls) {
  auto h = ResolveOtlpHeaders("api-key=secret%3D%3D, x-team = blue ,,", "x-team=green",
                              {"X-Team=red", "x-extra=1"});
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(*h, (HttpHeaders{{"api-key", "secret=="}, {"X-Team", "red"}, {"x-extra", "1"}}));
  auto bad = ResolveOtlpHeaders("novalue", nullptr, {});
  EXPECT_EQ(bad.status().message(), "OTEL_EXPORTER_OTLP_HEADERS: entry 'novalue' is not KEY=VALUE");
  EXPECT_FALSE(ResolveOtlpHeaders(nullptr, nullptr, {"bad name=1"}).ok());
  EXPECT_FALSE(ResolveOtlpHeaders(nullptr, nullptr, {"Content-Type=text/plain"}).ok());
  EXPECT_FALSE(ResolveOtlpHeaders("k=%zz", nullptr, {}).ok());

  auto u = OtlpTracesUrl("http://localhost:4318");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->Origin() + u->path, "http://localhost:4318/v1/traces");
  u = OtlpTracesUrl("https://collector.example.com/otlp/");
  EXPECT_EQ(u->Origin() + u->path, "https://collector.example.com:443/otlp/v1/traces");
  u = OtlpTracesUrl("http://[::1]:9999/v1/traces?tenant=a");
  EXPECT_EQ(u->Origin() + u->path, "http://[::1]:9999/v1/traces?tenant=a");
  EXPECT_EQ(OtlpTracesUrl("ftp://x").status().message(),
            "URL 'ftp://x': scheme must be http or https, not 'ftp'");
  EXPECT_FALSE(OtlpTracesUrl("http://h:99999").ok());
  EXPECT_FALSE(OtlpTracesUrl("localhost:4318").ok());
  // Hosts that could not go back into a URL or a Host header (found by
  // tests/fuzz/export_inputs_fuzz.cc: "https://[\xc8[::1]]:4318" was accepted and its
  // origin did not parse).
  for (const char* url : {"https://[\xc8[::1]]:4318", "http://[zz]:1", "http://[1.2.3.4]",
                          "http://ho st:1", "http://h%41:1", "http://a\nb:1", "http://a:b:1"}) {
    EXPECT_FALSE(OtlpTracesUrl(url).ok()) << url;
  }
  for (const char* url :
       {"http://my-host.example_1.com:1", "http://10.0.0.1:1", "http://[fe80::1]"}) {
    auto ok = OtlpTracesUrl(url);
    ASSERT_TRUE(ok.ok()) << url << ": " << ok.status().message();
    auto again = ParseHttpUrl(ok->Origin());
    EXPECT_TRUE(again.ok()) << ok->Origin();
  }
}

}  // namespace
}  // namespace trace::exporters
