#include "recorder/cassette/recorded_answer.h"

#include "recorder/api/json_body.h"

namespace trace::recorder {

RecordedReply RenderRecordedAnswer(const RecordedCall& recorded, const WireFormat& asked,
                                   const CompletionRequest& request) {
  const proto::LlmCall& c = recorded.call;
  const WireFormat* format = FormatOfRecordedCall(c);
  RecordedReply reply;
  reply.output_text = c.output_text();
  reply.finish_reason = c.finish_reason();
  if (c.http_status() != 0 && c.http_status() != 200) {
    reply.status = c.http_status();
    reply.body = c.response_json();
    reply.response_json = c.response_json();
    return reply;
  }
  nlohmann::json recorded_body = ParseJsonOrDiscarded(c.response_json());
  ResponseSummary summary;
  if (format != nullptr && recorded_body.is_object()) summary = format->ReadResponse(recorded_body);
  reply.tool_calls = summary.tool_calls;
  const bool same_api = format != nullptr && format->api() == asked.api();
  if (same_api && !request.stream && recorded_body.is_object()) {
    reply.body = c.response_json();
    reply.response_json = c.response_json();
    return reply;
  }
  if (same_api && request.stream && c.stream() && !c.response_stream().empty()) {
    reply.stream = true;
    reply.body = c.response_stream();
    reply.response_json = c.response_json();
    return reply;
  }
  CompletionResult r;
  r.id = summary.id.empty() ? asked.id_prefix() + "cassette" + std::to_string(recorded.seq)
                            : summary.id;
  r.model = summary.model.empty() ? request.model : summary.model;
  r.created = c.timings().start_ns() / 1000000000;
  r.system_fingerprint = "trace-cassette";
  // The text the agent got (without a tool call's markup); the decoded output only when
  // the recorded body cannot be read back.
  r.text = recorded_body.is_object() && format != nullptr ? summary.text : c.output_text();
  r.tool_calls = summary.tool_calls;
  r.finish_reason = summary.finish_reason.empty() || summary.finish_reason == "error"
                        ? (r.tool_calls.empty() ? "stop" : "tool_calls")
                        : summary.finish_reason;
  r.prompt_tokens = summary.has_usage ? summary.input_tokens : c.prompt_token_ids_size();
  r.completion_tokens = summary.has_usage ? summary.output_tokens : c.token_ids_size();
  r.cached_prompt_tokens = summary.cached_input_tokens;
  r.seed = static_cast<int64_t>(c.seed_used());
  r.token_ids.assign(c.token_ids().begin(), c.token_ids().end());
  r.logits_digests.assign(c.logits_digests().begin(), c.logits_digests().end());
  reply.output_text = r.text;
  reply.finish_reason = r.finish_reason;
  reply.response_json = asked.Body(request, r);
  if (!request.stream) {
    reply.body = reply.response_json;
    return reply;
  }
  std::unique_ptr<StreamEncoder> encoder = asked.NewStream(request, r);
  reply.stream = true;
  reply.body = encoder->Begin() + encoder->End(r, r.text, {});
  return reply;
}

}  // namespace trace::recorder
