// What OpenAI's Chat Completions and legacy Completions formats share: the sampling and
// output fields of a request (temperature, top_p, seed, max_tokens, stop, n, stream,
// stream_options, guided_choice), usage, the `trace` extension and server-sent-event
// framing.
//
// Ownership: values. Thread safety: reentrant. Errors: a field OpenAI would reject is a
// 400 naming it (code invalid_value for a well-typed value out of range).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// The default max_tokens when a request names none.
inline constexpr int32_t kDefaultMaxTokens = 128;

// Parses the body (keeping key order), checks it is an object, reads `model` and refuses
// the fields RejectUnsupportedFields names; req->raw gets the body. `legacy_functions`:
// the format serves the deprecated `functions` / `function_call` fields (Chat Completions
// maps them onto tools), so they are not refused here.
std::variant<nlohmann::ordered_json, ApiError> ParseOpenAiBody(std::string_view body_text,
                                                               CompletionRequest* req,
                                                               bool legacy_functions = false);
// The sampling and output fields both formats share (logprobs aside: their shapes differ).
std::optional<ApiError> ParseOpenAiSampling(const nlohmann::json& body, CompletionRequest* req);
// Fields of OpenAI's API this server does not implement and would otherwise ignore while
// the client expects an effect: a clear 400 naming the field (docs/recorder.md lists them).
std::optional<ApiError> RejectUnsupportedFields(const nlohmann::json& body,
                                                bool legacy_functions = false);

// A WireFormat of OpenAI's from its route, id prefix and functions (the formats differ in
// nothing else).
struct OpenAiFormatParts {
  std::string_view api;
  std::string endpoint;
  std::string id_prefix;
  std::variant<CompletionRequest, ApiError> (*parse)(std::string_view body);
  std::string (*body)(const CompletionRequest& req, const CompletionResult& result);
  std::unique_ptr<StreamEncoder> (*stream)(const CompletionRequest& req,
                                           const CompletionResult& header);
  ResponseSummary (*read)(const nlohmann::json& body);
  nlohmann::json (*fold)(std::string_view event_stream);
};
class OpenAiFormat : public WireFormat {
 public:
  explicit OpenAiFormat(OpenAiFormatParts parts) : parts_(std::move(parts)) {}
  std::string_view api() const override { return parts_.api; }
  std::string endpoint() const override { return parts_.endpoint; }
  std::string id_prefix() const override { return parts_.id_prefix; }
  std::variant<CompletionRequest, ApiError> Parse(std::string_view body) const override {
    return parts_.parse(body);
  }
  std::string Body(const CompletionRequest& req, const CompletionResult& r) const override {
    return parts_.body(req, r);
  }
  std::unique_ptr<StreamEncoder> NewStream(const CompletionRequest& req,
                                           const CompletionResult& header) const override {
    return parts_.stream(req, header);
  }
  ResponseSummary ReadResponse(const nlohmann::json& body) const override {
    return parts_.read(body);
  }
  nlohmann::json FoldStream(std::string_view event_stream) const override {
    return parts_.fold(event_stream);
  }

 private:
  OpenAiFormatParts parts_;
};

nlohmann::json UsageJson(const CompletionResult& r);
// A whole response: {id, object, created, model, system_fingerprint, choices: [choice],
// usage, trace}.
nlohmann::json ResponseJson(const CompletionResult& r, const char* object, nlohmann::json choice);
// One streamed chunk: {id, object, created, model, system_fingerprint, choices: [choice]}.
nlohmann::json ChunkJson(const CompletionResult& header, const char* object, nlohmann::json choice);
nlohmann::json TraceExtension(const CompletionResult& result);
// The bytes of `s` as a JSON array of integers (OpenAI's logprobs "bytes").
nlohmann::json BytesJson(const std::string& s);
// [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], as Chat Completions'
// logprobs.content and Responses' output_text.logprobs carry them.
nlohmann::json LogprobsContent(const std::vector<TokenLogprob>& logprobs);
// The end of an OpenAI stream: `last` (the chunk with finish_reason) with the trace
// extension, the usage chunk when asked (`usage_chunk` with no choices), then [DONE].
std::string StreamTail(nlohmann::json last, nlohmann::json usage_chunk, bool with_usage,
                       const CompletionResult& r);
// An error after a stream started: its body as an event, then [DONE].
std::string StreamError(const ApiError& e);
// "data: {...}\n\n".
std::string SseData(const nlohmann::json& chunk);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// JSON text with invalid UTF-8 replaced (model output may be cut mid-character).
std::string DumpJson(const nlohmann::json& j);

// Reading OpenAI answers back (proxy mode): the usage object ({prompt_tokens,
// completion_tokens, prompt_tokens_details.cached_tokens}) into `s`; and the choice 0 of a
// response body or stream chunk.
void ReadOpenAiUsage(const nlohmann::json& usage, ResponseSummary* s);
const nlohmann::json& FirstChoice(const nlohmann::json& body);
// An OpenAI finish_reason in the internal vocabulary (function_call -> tool_calls).
std::string OpenAiFinishReason(const std::string& reason);

}  // namespace trace::recorder
