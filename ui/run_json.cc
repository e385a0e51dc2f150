#include "ui/run_json.h"

#include <algorithm>
#include <map>

#include "base/wall_clock.h"
#include "store/export.h"

namespace trace::ui {

int64_t RunDurationNs(const store::RunSummary& r) {
  const int64_t end = r.end_time_ns ? r.end_time_ns : r.last_event_ns;
  return std::max<int64_t>(0, end - r.start_time_ns);
}

nlohmann::json RunSummaryJson(const store::RunSummary& r) {
  return {{"run_id", r.run_id},
          {"started_ns", r.start_time_ns},
          {"started", UtcTimeText(r.start_time_ns)},
          {"duration_ns", RunDurationNs(r)},
          {"command", r.command},
          {"label", r.label},
          {"model", r.model},
          {"events", r.events},
          {"model_calls", r.model_calls},
          {"sampled_tokens", r.sampled_tokens},
          {"status", std::string(store::RunStatusName(r.status))},
          {"exit_code", r.exit_code},
          {"signal", r.signal},
          {"stored_bytes", r.stored_bytes},
          {"recorder_pid", r.recorder_pid},
          {"recorder_host", r.recorder_host},
          {"problem", r.problem},
          {"parent_run", r.parent_run_id},
          {"rerun_mode", r.rerun_mode},
          {"diverged_at_call", r.diverged_at_call}};
}

nlohmann::json RunJson(const std::string& run_id, const store::RunSummary& summary,
                       const proto::RunHeader& header) {
  return {{"run_id", run_id},
          {"status", std::string(store::RunStatusName(summary.status))},
          {"start_time_ns", header.start_time_ns()},
          {"argv", std::vector<std::string>(header.argv().begin(), header.argv().end())},
          {"cwd", header.cwd()},
          {"label", header.label()},
          {"parent_run", summary.parent_run_id},
          {"rerun", header.has_rerun()
                        ? nlohmann::json{{"parent_run", header.rerun().parent_run_id()},
                                         {"mode", header.rerun().mode()},
                                         {"live_from_call", header.rerun().live_from_call()},
                                         {"strict", header.rerun().strict()},
                                         {"tools", header.rerun().tools()},
                                         {"edit_call", header.rerun().edit_call()},
                                         {"diverged_at_call", header.rerun().diverged_at_call()},
                                         {"divergence", header.rerun().divergence()}}
                        : nlohmann::json()},
          {"recorder_pid", summary.recorder_pid},
          {"recorder_host", summary.recorder_host},
          {"model_calls", summary.model_calls},
          {"sampled_tokens", summary.sampled_tokens}};
}

nlohmann::json EventSummaryJson(const proto::Event& e, int64_t start_ns) {
  nlohmann::json j = {{"seq", e.seq()},
                      {"kind", store::EventKindName(e)},
                      {"wall_time_ns", e.wall_time_ns()},
                      {"offset_ms", (e.wall_time_ns() - start_ns) / 1e6}};
  switch (e.kind_case()) {
    case proto::Event::kLlmCall: {
      const auto& c = e.llm_call();
      j["endpoint"] = c.endpoint();
      j["api"] = c.api();
      j["upstream"] = c.upstream();
      j["usage"] = {{"input_tokens", c.usage().input_tokens()},
                    {"output_tokens", c.usage().output_tokens()},
                    {"cached_input_tokens", c.usage().cached_input_tokens()}};
      // What the model saw, whole: the text the prompt tokens encode.
      j["rendered_prompt"] = c.rendered_prompt();
      j["prompt_tokens"] = c.prompt_token_ids_size();
      j["sampled_tokens"] = c.token_ids_size();
      j["finish_reason"] = c.finish_reason();
      j["seed_used"] = c.seed_used();
      j["temperature"] = c.params().temperature();
      // Only when set, so the output of a call without them is unchanged.
      if (c.params().frequency_penalty() != 0) {
        j["frequency_penalty"] = c.params().frequency_penalty();
      }
      if (c.params().presence_penalty() != 0) {
        j["presence_penalty"] = c.params().presence_penalty();
      }
      if (c.params().logit_bias_size() > 0) {
        nlohmann::json bias = nlohmann::json::object();
        for (const auto& b : c.params().logit_bias()) bias[std::to_string(b.id())] = b.bias();
        j["logit_bias"] = std::move(bias);
      }
      j["numerics"] = c.numerics();
      j["batch_size"] = c.batch_size();
      j["output_text"] = c.output_text();
      j["http_status"] = c.http_status();
      j["cassette_seq"] = c.cassette_seq();
      break;
    }
    case proto::Event::kToolCall:
      j["name"] = e.tool_call().name();
      j["call_id"] = e.tool_call().call_id();
      j["arguments_json"] = e.tool_call().arguments_json();
      break;
    case proto::Event::kToolResult:
      j["name"] = e.tool_result().name();
      j["call_id"] = e.tool_result().call_id();
      j["content"] = e.tool_result().content();
      j["is_error"] = e.tool_result().is_error();
      break;
    case proto::Event::kContextChunk:
      j["source"] = e.context_chunk().source();
      j["chunk_id"] = e.context_chunk().chunk_id();
      j["content"] = e.context_chunk().content();
      break;
    case proto::Event::kTemplateVar:
      j["name"] = e.template_var().name();
      j["value"] = e.template_var().value();
      break;
    case proto::Event::kClockRead:
      j["clock"] = e.clock_read().clock();
      j["value_ns"] = e.clock_read().value_ns();
      j["text"] = e.clock_read().text();
      break;
    case proto::Event::kOutput:
      j["stream"] = e.output().stream() == proto::Output::STDERR ? "stderr" : "stdout";
      j["bytes"] = e.output().data().size();
      break;
    case proto::Event::kNote:
      j["topic"] = e.note().topic();
      j["text"] = e.note().text();
      break;
    case proto::Event::kRunEnd:
      j["how"] = proto::RunEnd::How_Name(e.run_end().how());
      j["exit_code"] = e.run_end().exit_code();
      j["signal"] = e.run_end().signal();
      j["reason"] = e.run_end().reason();
      break;
    default:
      break;
  }
  return j;
}

nlohmann::json VerificationJson(const store::Verification& v) {
  return {{"verification_id", v.id},
          {"run_id", v.run_id},
          {"batch", v.batch_id},
          {"verdict", v.verdict},
          {"first_divergence", v.first_divergence},
          {"machine", v.machine},
          {"build", v.build},
          {"worker", v.worker},
          {"time_ns", v.time_ns},
          {"seconds", v.seconds}};
}

std::vector<store::Verification> NewestPerMachine(const std::vector<store::Verification>& rows) {
  std::map<std::string, store::Verification> newest;
  for (const store::Verification& v : rows) {
    auto it = newest.find(v.machine);
    if (it == newest.end() || v.id > it->second.id) newest[v.machine] = v;
  }
  std::vector<store::Verification> out;
  for (auto& [machine, v] : newest) out.push_back(std::move(v));
  return out;
}

}  // namespace trace::ui
