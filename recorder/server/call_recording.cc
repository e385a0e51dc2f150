#include "recorder/server/call_recording.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>

namespace trace::recorder {
namespace {

// Appends every step's `field` (a per-token vector) to `out`, token-major, and reports the
// per-token count through `set_width`; only when every token has the same, non-zero count.
template <class T, class SetWidth>
void StoreUniform(const std::vector<TokenStep>& steps, std::vector<T> TokenStep::*field,
                  SetWidth set_width, google::protobuf::RepeatedField<T>* out) {
  if (steps.empty() || (steps[0].*field).empty()) return;
  const size_t width = (steps[0].*field).size();
  for (const TokenStep& s : steps) {
    if ((s.*field).size() != width) return;
  }
  set_width(width);
  for (const TokenStep& s : steps) out->Add((s.*field).begin(), (s.*field).end());
}

}  // namespace

void SamplingParamsToProto(const CompletionRequest& req, bool max_tokens_as_run,
                           proto::SamplingParams* out) {
  const engine::SamplingParams& s = req.sampling;
  out->set_temperature(s.temperature);
  out->set_top_p(s.top_p);
  out->set_top_k(s.top_k);
  if (max_tokens_as_run || req.max_tokens_given) out->set_max_tokens(s.max_tokens);
  for (const std::string& stop : s.stop) out->add_stop(stop);
  out->set_frequency_penalty(s.frequency_penalty);
  out->set_presence_penalty(s.presence_penalty);
  for (const auto& [id, bias] : s.logit_bias) {
    proto::LogitBias* b = out->add_logit_bias();
    b->set_id(id);
    b->set_bias(bias);
  }
  if (req.seed) out->set_seed(static_cast<uint64_t>(*req.seed));
  out->set_logprobs(req.logprobs);
  out->set_top_logprobs(req.top_logprobs);
  out->set_n(1);
}

Result<uint64_t> RecordLocalCall(RunLog* log, Call& call, const GenerationResult& g,
                                 const CompletionResult& r, int status, const std::string& body,
                                 const std::string& error, const std::string& numerics) {
  const CompletionRequest& req = call.req;
  proto::LlmCall c;
  c.set_api(std::string(call.format->api()));
  c.set_endpoint(call.endpoint);
  c.set_request_json(call.body);
  c.set_rendered_prompt(call.rendered_prompt);
  for (int32_t id : call.prompt_ids) c.add_prompt_token_ids(id);
  SamplingParamsToProto(req, /*max_tokens_as_run=*/true, c.mutable_params());
  c.set_seed_used(call.seed);
  c.set_numerics(numerics);
  c.set_batch_size(g.max_batch_size);
  c.set_constraint_json(call.constraint_json);
  for (const TokenStep& s : g.steps) {
    c.add_token_ids(s.token);
    c.add_logits_digests(s.logits_digest);
    c.add_logits(s.logit);
    c.add_logprobs(s.logprob);
    c.add_runner_up_ids(s.runner_up);
    c.add_runner_up_logits(s.runner_up_logit);
  }
  // Layer digests and, on MoE models, routes (--layer-digests): token-major, num_layers
  // digests / route_width expert ids per sampled token.
  StoreUniform(
      g.steps, &TokenStep::layer_digests,
      [&](size_t layers) { c.set_num_layers(static_cast<int32_t>(layers)); },
      c.mutable_layer_digests());
  StoreUniform(
      g.steps, &TokenStep::route,
      [&](size_t width) { c.set_route_width(static_cast<int32_t>(width)); }, c.mutable_route_ids());
  c.set_finish_reason(status == 200 ? r.finish_reason : "error");
  c.set_output_text(call.FinalText());
  c.set_response_json(body);
  if (req.stream) c.set_response_stream(call.sent_stream);
  proto::Usage* u = c.mutable_usage();
  u->set_input_tokens(static_cast<int64_t>(call.prompt_ids.size()));
  u->set_output_tokens(static_cast<int64_t>(g.steps.size()));
  u->set_cached_input_tokens(g.reused_prompt_tokens);
  proto::Timings* t = c.mutable_timings();
  t->set_queue_ms(g.queue_ms);
  t->set_prefill_ms(g.prefill_ms);
  t->set_decode_ms(g.decode_ms);
  t->set_total_ms(
      std::chrono::duration<double, std::milli>(SteadyClock::now() - call.start).count());
  t->set_start_ns(call.start_ns);
  t->set_end_ns(WallClockNs());
  c.set_model(req.model);
  c.set_request_id(call.request_id);
  c.set_http_status(status);
  c.set_error(error);
  c.set_stream(req.stream);
  c.set_prompt_tokens_reused(static_cast<int32_t>(g.reused_prompt_tokens));
  TRACE_ASSIGN_OR_RETURN(uint64_t seq, log->RecordLlmCall(std::move(c)));
  return RecordModelToolCalls(log, seq, r.tool_calls);
}

Result<uint64_t> RecordModelToolCalls(RunLog* log, uint64_t llm_call_seq,
                                      const std::vector<ToolCall>& calls) {
  uint64_t last = llm_call_seq;
  for (const ToolCall& tc : calls) {
    proto::ToolCall e;
    e.set_call_id(tc.id);
    e.set_name(tc.name);
    e.set_arguments_json(tc.arguments);
    e.set_source("model");
    e.set_llm_call_seq(llm_call_seq);
    // 0: a call id recorded before (the duplicate is skipped).
    TRACE_ASSIGN_OR_RETURN(uint64_t seq, log->RecordToolCall(std::move(e)));
    last = std::max(last, seq);
  }
  return last;
}

void RecordToolResultsFromMessages(RunLog* log, const CompletionRequest& req) {
  // Most requests carry no tool message: they pay for nothing more than this scan.
  if (std::none_of(req.messages.begin(), req.messages.end(),
                   [](const ChatMessage& m) { return m.role == "tool"; })) {
    return;
  }
  // Each call id's name, the last call with the id winning: a map, where scanning every
  // message for each tool message was quadratic in a long conversation.
  std::unordered_map<std::string_view, std::string_view> call_names;
  for (const ChatMessage& a : req.messages) {
    for (const ToolCall& tc : a.tool_calls) call_names[tc.id] = tc.name;
  }
  for (const ChatMessage& m : req.messages) {
    if (m.role != "tool") continue;
    proto::ToolResult r;
    r.set_call_id(m.tool_call_id);
    const auto called = call_names.find(m.tool_call_id);
    r.set_name(called != call_names.end() ? std::string(called->second) : m.name);
    r.set_content(m.content);
    r.set_is_error(m.is_error);
    (void)log->RecordToolResult(std::move(r));
  }
}

}  // namespace trace::recorder
