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

// Parses the body (keeping key order), checks it is an object and reads `model`.
std::variant<nlohmann::ordered_json, ApiError> ParseOpenAiBody(std::string_view body_text,
                                                               CompletionRequest* req);
// The sampling and output fields both formats share (logprobs aside: their shapes differ).
std::optional<ApiError> ParseOpenAiSampling(const nlohmann::json& body, CompletionRequest* req);
// Fields of OpenAI's API this server does not implement and would otherwise ignore while
// the client expects an effect: a clear 400 naming the field (docs/recorder.md lists them).
std::optional<ApiError> RejectUnsupportedFields(const nlohmann::json& body);

nlohmann::json UsageJson(const CompletionResult& r);
nlohmann::json TraceExtension(const CompletionResult& result);
// The bytes of `s` as a JSON array of integers (OpenAI's logprobs "bytes").
nlohmann::json BytesJson(const std::string& s);
// "data: {...}\n\n".
std::string SseData(const nlohmann::json& chunk);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// JSON text with invalid UTF-8 replaced (model output may be cut mid-character).
std::string DumpJson(const nlohmann::json& j);

}  // namespace trace::recorder
