// export_bench: what `trace export` spends its time on, for a synthetic agent run of
// TURNS turns (default 50): redaction, the trace-run JSON, the OTLP mapping (with and
// without content), protobuf and OTLP/JSON encoding. Each phase runs ITERS times (default
// 5); CPU seconds per run are reported with ratios against the JSON export measured in the
// same process (the machine is shared: ratios, not absolute times, are the figures).
//
//   build/bench/exporters/export_bench [TURNS] [ITERS]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "exporters/otlp_json.h"
#include "exporters/otlp_trace.h"
#include "exporters/run_json.h"
#include "redact/redactor.h"

namespace trace::exporters {
namespace {

using nlohmann::json;

std::string Words(std::mt19937_64& rng, int n) {
  static const char* kWords[] = {"order", "refund", "customer", "shipping", "policy",  "the",
                                 "a",     "within", "days",     "email",    "account", "update"};
  std::string out;
  for (int i = 0; i < n; ++i) out += std::string(i ? " " : "") + kWords[rng() % 12];
  return out;
}

// A support-agent-like run: each turn a model call over the whole conversation so far
// (request JSON, rendered prompt, prompt and sampled tokens with digests), a tool call and
// a ~2 KB tool result; every 10th result carries an API key for redaction to find.
RunData MakeRun(int turns) {
  std::mt19937_64 rng(7);
  RunData run;
  run.header.set_run_id("01ARZ3NDEKTSV4RRFFQ69G5FAV");
  run.header.set_start_time_ns(1'800'000'000'000'000'000);
  run.header.add_argv("python3");
  run.header.add_argv("agent.py");
  run.header.set_endpoint("http://127.0.0.1:8000");
  run.summary.run_id = run.header.run_id();
  json messages = json::array({{{"role", "system"}, {"content", Words(rng, 300)}}});
  json tools = json::array({{{"type", "function"},
                             {"function",
                              {{"name", "lookup"},
                               {"description", Words(rng, 20)},
                               {"parameters", {{"type", "object"}}}}}}});
  int64_t t = run.header.start_time_ns();
  std::vector<int32_t> prompt;
  for (int turn = 0; turn < turns; ++turn) {
    messages.push_back({{"role", "user"}, {"content", Words(rng, 40)}});
    for (int i = 0; i < 60; ++i) prompt.push_back(static_cast<int32_t>(rng() % 150000));
    proto::Event& call = run.events.emplace_back();
    call.set_seq(run.events.size());
    call.set_wall_time_ns(t += 500'000'000);
    proto::LlmCall* c = call.mutable_llm_call();
    c->set_endpoint("/v1/chat/completions");
    c->set_model("demo");
    c->set_request_json(json{{"model", "demo"}, {"messages", messages}, {"tools", tools}}.dump());
    c->set_rendered_prompt(messages.dump());
    for (int32_t id : prompt) c->add_prompt_token_ids(id);
    std::string text = Words(rng, 90);
    for (int i = 0; i < 120; ++i) {
      c->add_token_ids(static_cast<int32_t>(rng() % 150000));
      c->add_logits_digests(rng());
      c->add_logits(20.0f);
      c->add_logprobs(-0.5f);
      c->add_runner_up_ids(5);
      c->add_runner_up_logits(18.0f);
    }
    c->set_output_text(text);
    c->set_response_json(json{
        {"id", "chatcmpl-" + std::to_string(turn)},
        {"model", "demo"},
        {"choices",
         {{{"finish_reason", "stop"}, {"message", {{"role", "assistant"}, {"content", text}}}}}}}
                             .dump());
    c->set_request_id("chatcmpl-" + std::to_string(turn));
    c->set_http_status(200);
    c->mutable_timings()->set_start_ns(t - 400'000'000);
    c->mutable_timings()->set_end_ns(t);
    messages.push_back({{"role", "assistant"}, {"content", text}});
    proto::Event& tc = run.events.emplace_back();
    tc.set_seq(run.events.size());
    tc.set_wall_time_ns(t += 1'000'000);
    tc.mutable_tool_call()->set_call_id("call_" + std::to_string(turn));
    tc.mutable_tool_call()->set_name("lookup");
    tc.mutable_tool_call()->set_arguments_json("{\"id\":" + std::to_string(turn) + "}");
    tc.mutable_tool_call()->set_llm_call_seq(call.seq());
    std::string result = Words(rng, 300);
    if (turn % 10 == 0) result += " key=sk-proj-4fT9kLm2Qx8Rv1Zp6Wn3Yb7Hc0Jd5Gs2";
    proto::Event& tr = run.events.emplace_back();
    tr.set_seq(run.events.size());
    tr.set_wall_time_ns(t += 50'000'000);
    tr.mutable_tool_result()->set_call_id("call_" + std::to_string(turn));
    tr.mutable_tool_result()->set_content(result);
    messages.push_back(
        {{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(turn)}, {"content", result}});
  }
  return run;
}

double CpuSeconds(const std::function<void()>& fn, int iters) {
  std::clock_t start = std::clock();
  for (int i = 0; i < iters; ++i) fn();
  return static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC / iters;
}

}  // namespace
}  // namespace trace::exporters

int main(int argc, char** argv) {
  using namespace trace::exporters;
  const int turns = argc > 1 ? std::atoi(argv[1]) : 50;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 5;
  RunData run = MakeRun(turns);
  size_t text_bytes = 0;
  for (const auto& e : run.events) text_bytes += e.ByteSizeLong();
  auto redactor = trace::redact::Redactor::Create(trace::redact::RuleSet::Defaults());
  if (!redactor.ok()) return 2;

  size_t json_bytes = 0, pb_bytes = 0, otlp_json_bytes = 0;
  double t_json = CpuSeconds(
      [&] {
        std::ostringstream out;
        (void)WriteRunJson(run, out);
        json_bytes = out.str().size();
      },
      iters);
  RunData redacted;
  double t_redact = CpuSeconds(
      [&] {
        redacted = run;
        redacted.redaction = {};
        trace::redact::RedactRun(*redactor, &redacted.header, &redacted.events,
                                 &redacted.redaction);
      },
      iters);
  OtlpOptions plain, content;
  content.content = true;
  OtlpRequest request;
  double t_otlp = CpuSeconds([&] { request = *BuildOtlpRequest(run, plain); }, iters);
  double t_otlp_content = CpuSeconds([&] { request = *BuildOtlpRequest(run, content); }, iters);
  double t_pb = CpuSeconds([&] { pb_bytes = request.SerializeAsString().size(); }, iters);
  double t_otlp_json = CpuSeconds([&] { otlp_json_bytes = OtlpToJson(request)->size(); }, iters);

  std::printf("run: %d turns, %zu events, %.1f MB of events (protobuf), %lld redactions\n", turns,
              run.events.size(), text_bytes / 1e6,
              static_cast<long long>(redacted.redaction.replacements()));
  std::printf("%-34s %10s %10s %8s\n", "phase (CPU s per run)", "seconds", "MB/s in", "x json");
  auto row = [&](const char* name, double s) {
    std::printf("%-34s %10.4f %10.1f %8.2f\n", name, s, text_bytes / 1e6 / s, s / t_json);
  };
  row("trace-run JSON (baseline)", t_json);
  row("redaction (default rules)", t_redact);
  row("OTLP mapping, no content", t_otlp);
  row("OTLP mapping, --content", t_otlp_content);
  row("OTLP protobuf encoding (content)", t_pb);
  row("OTLP/JSON encoding (content)", t_otlp_json);
  std::printf("sizes: trace-run JSON %.2f MB, OTLP protobuf %.2f MB, OTLP/JSON %.2f MB\n",
              json_bytes / 1e6, pb_bytes / 1e6, otlp_json_bytes / 1e6);
  return 0;
}
