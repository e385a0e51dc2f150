// The OpenAI-compatible wire format: request parsing and validation, OpenAI-style error
// bodies, response and server-sent-event builders, and Qwen tool-call extraction.
//
// Ownership: plain values; parsed requests own copies of everything they hold.
// Thread safety: pure functions, reentrant. Errors: a bad request yields an ApiError
// (HTTP status, OpenAI error type, the offending parameter, a one-line message); nothing
// throws out of these functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"

namespace trace::recorder {

// An error returned to an HTTP client as {"error": {message, type, param, code}}.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string param;  // the request field concerned, empty if none
  std::string code;   // machine-readable, e.g. "model_not_found"
  std::string message;

  std::string Body() const;
};

ApiError BadRequest(std::string param, std::string message);

struct ToolCall {
  std::string id;  // "call_..." as returned to the client
  std::string name;
  std::string arguments;  // JSON text
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::string tool_call_id;  // role tool
  std::string name;
  std::vector<ToolCall> tool_calls;  // role assistant
};

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters = nlohmann::json::object();  // JSON schema
  // The same schema with its object keys in the order the client sent them: what the chat
  // template sees (its `tojson` prints keys in this order, as Python's dicts keep them).
  nlohmann::ordered_json parameters_ordered = nlohmann::ordered_json::object();
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// One parsed /v1/chat/completions or /v1/completions request.
struct CompletionRequest {
  bool chat = true;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;            // kNamed
  std::vector<std::string> guided_choice;  // vLLM-style extension
  engine::SamplingParams sampling;
  std::optional<uint64_t> seed;
  bool stream = false;
  bool include_usage_in_stream = false;
  bool logprobs = false;
  int top_logprobs = 0;
  nlohmann::json raw;                  // the request body as received, parsed (keys sorted)
  nlohmann::ordered_json raw_ordered;  // the same, object keys in the order received
};

// Parses and validates a request body. `chat` selects the endpoint's schema.
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, bool chat);

// The messages and tools as the chat template wants them (OpenAI shapes, tool-call
// arguments parsed back to objects as Qwen's template expects). The Ordered forms keep
// the object keys of tool-call arguments and tool parameter schemas in the order the
// client sent them, as Hugging Face's apply_chat_template (Python dicts) does; render
// them with ChatTemplate::RenderOrdered. Tool-call arguments sent as objects are kept as
// JSON text in that order (ToolCall::arguments). The json forms are the same with keys
// sorted (nlohmann::json), which changes what a template's `tojson` prints.
nlohmann::ordered_json MessagesForTemplateOrdered(const std::vector<ChatMessage>& messages);
nlohmann::ordered_json ToolsForTemplateOrdered(const std::vector<ToolSpec>& tools);
nlohmann::json MessagesForTemplate(const std::vector<ChatMessage>& messages);
nlohmann::json ToolsForTemplate(const std::vector<ToolSpec>& tools);

// Qwen's tool-call syntax: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
// Returns the calls found (ids assigned "call_<prefix>_<n>") and the text outside them.
struct ExtractedToolCalls {
  std::vector<ToolCall> calls;
  std::string content;  // text outside the tool-call blocks, trimmed
};
ExtractedToolCalls ExtractToolCalls(std::string_view text, std::string_view id_prefix);

// Everything a finished generation produced, for the response builders.
struct TokenLogprob {
  std::string token;  // text of the token
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // top_logprobs
};

struct CompletionResult {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;  // "trace-<numerics mode>"
  std::string text;                // generated text (stop sequence removed)
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // stop | length | tool_calls
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  std::vector<TokenLogprob> logprobs;  // when requested
  // Extension "trace": what makes the response checkable bitwise.
  int64_t call_index = 0;
  uint64_t seed = 0;
  std::vector<int32_t> token_ids;
  std::vector<uint64_t> logits_digests;
};

nlohmann::json TraceExtension(const CompletionResult& result);
// OpenAI tool_calls array; `with_index` adds "index" as stream deltas carry it.
nlohmann::json ToolCallsJson(const std::vector<ToolCall>& calls, bool with_index);
std::string ChatCompletionBody(const CompletionResult& result, bool with_logprobs);
std::string CompletionBody(const CompletionResult& result, bool with_logprobs);

// Server-sent events: "data: {...}\n\n" chunks of chat.completion.chunk objects.
std::string SseData(const nlohmann::json& chunk);
nlohmann::json ChatChunk(const CompletionResult& header, const nlohmann::json& delta,
                         const nlohmann::json& finish_reason);
nlohmann::json TextChunk(const CompletionResult& header, const std::string& text,
                         const nlohmann::json& finish_reason);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace trace::recorder
