// The internal model call: what every wire format the server speaks (OpenAI Chat
// Completions, legacy Completions and Responses, Anthropic Messages) maps a request onto,
// and what a finished generation gives back to be rendered in that format. Serving,
// recording, replay and diff see only these.
//
// Ownership: plain values; a parsed request owns copies of everything it holds. The
// WireFormat singletons are immutable and live for the process. Thread safety: all
// functions are reentrant; a StreamEncoder belongs to one response. Errors: a request a
// format cannot accept is an ApiError (HTTP status, error type, the offending parameter,
// a one-line message); nothing throws out of these functions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace trace::recorder {

// An error returned to an HTTP client; OpenAI's shape {"error": {message, type, param,
// code}} by Body(), a wire format's own shape by WireFormat::ErrorBody.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string param;  // the request field concerned, empty if none
  std::string code;   // machine-readable, e.g. "model_not_found"
  std::string message;

  std::string Body() const;
};

// 400 invalid_request_error naming `param`.
ApiError BadRequest(std::string param, std::string message);
// 400 with code "invalid_value": a well-typed value out of its range.
ApiError OutOfRange(const std::string& param, const std::string& message);

struct ToolCall {
  std::string id;  // "call_..." / "toolu_..." as returned to the client
  std::string name;
  std::string arguments;  // JSON text
  std::string item_id;    // Responses: the id of the function_call item ("fc_..."), if any
  // In a response: the token limit cut this call, so `arguments` is a prefix of the JSON the
  // model was writing (recorder/api/qwen_tool_calls.h).
  bool cut = false;
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::string tool_call_id;  // role tool
  std::string name;
  std::vector<ToolCall> tool_calls;  // role assistant
  bool is_error = false;             // role tool: the tool failed (Anthropic's is_error)
  // Responses: the id of the input item this message came from ("msg_..."), if it had one.
  std::string item_id;
  // Responses `item_reference`: this entry stands for the stored item with this id and is
  // replaced by it before rendering (recorder/server/response_store.h).
  std::string item_reference;
};

struct ToolSpec {
  std::string name;
  std::string description;
  // Whether the request sent a description ("" included) and a schema: the template sees
  // the tool as sent, without fields the client left out.
  bool description_given = false;
  bool parameters_given = false;
  nlohmann::json parameters = nlohmann::json::object();  // JSON schema
  // The same schema with its object keys in the order the client sent them: what the chat
  // template sees (its `tojson` prints keys in this order, as Python's dicts keep them) and
  // what the argument grammar follows (properties in schema order).
  nlohmann::ordered_json parameters_ordered = nlohmann::ordered_json::object();
  bool strict = false;  // function.strict: unsupported schema keywords are an error
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

// response_format: free text, any JSON object, or JSON following a schema.
struct ResponseFormat {
  enum Kind { kText, kJsonObject, kJsonSchema } kind = kText;
  std::string name;                                                  // json_schema.name
  nlohmann::ordered_json schema = nlohmann::ordered_json::object();  // keys as sent
  bool strict = false;
};

// One model call as every wire format describes it.
struct CompletionRequest {
  bool chat = true;   // messages through the chat template; false: a raw prompt
  std::string model;  // the name the client asked for (recorded as sent)
  // A system message rendered before `messages` (Responses `instructions`, Anthropic
  // `system`); kept apart because a stored conversation does not carry it over.
  std::optional<std::string> system;
  std::vector<ChatMessage> messages;  // chat
  // Text the answer starts with (Anthropic: a final assistant message is continued, not
  // answered); appended to the rendered prompt, not part of the response.
  std::string assistant_prefill;
  std::string prompt;                     // raw prompt text
  std::vector<int32_t> prompt_token_ids;  // raw prompt given as token ids (then `prompt` is empty)
  bool prompt_is_tokens = false;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kNamed
  bool parallel_tool_calls = true;
  // Chat Completions' deprecated `functions` / `function_call` were sent: they are the tools
  // and tool_choice, and the answer's call comes back as message.function_call.
  bool legacy_functions = false;
  ResponseFormat response_format;
  std::vector<std::string> guided_choice;  // vLLM-style extension
  engine::SamplingParams sampling;
  bool max_tokens_given = false;  // the client set a token limit (else sampling has the default)
  std::optional<int64_t> seed;    // as sent (OpenAI: a 64-bit signed integer)
  bool stream = false;
  bool include_usage_in_stream = false;
  bool logprobs = false;
  int top_logprobs = 0;
  // Conversation state the server keeps between calls (OpenAI Responses): the stored
  // conversation of this response goes before `messages`; `store` keeps this call's
  // conversation and output for later previous_response_id / item_reference.
  std::string previous_response_id;
  bool store = false;
  nlohmann::json raw;                  // the request body as received, parsed (keys sorted)
  nlohmann::ordered_json raw_ordered;  // the same, object keys in the order received
};

// Whether the answer to `req` may hold tool calls: a chat request offering tools, with a
// tool_choice other than "none" and no guided_choice. Such an answer is held back until
// the end (its text may turn out to be a call), and its calls are parsed out of it.
inline bool MayCallTools(const CompletionRequest& req) {
  return req.chat && !req.tools.empty() && req.tool_choice != ToolChoice::kNone &&
         req.guided_choice.empty();
}

struct TokenLogprob {
  std::string token;  // text of the token
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // top_logprobs
};

// Everything a finished (or cut off) generation produced, for the response builders.
struct CompletionResult {
  std::string id;               // "chatcmpl-..." / "cmpl-..." / "resp_..." / "msg_..."
  std::string message_item_id;  // Responses: the id of the output message item ("msg_...")
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;  // "trace-<numerics mode>"
  std::string text;                // generated text (stop sequence removed)
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // stop | length | tool_calls
  // The token limit cut the answer inside a tool call or its opening tag (not in its text).
  bool cut_in_tool_call = false;
  std::string stop_sequence;  // the stop sequence that ended the text, if one did
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  std::vector<TokenLogprob> logprobs;  // when requested
  // Extension "trace": what makes the response checkable bitwise.
  int64_t call_index = 0;
  int64_t seed = 0;  // the seed used, as a signed 64-bit value a client can send back
  std::vector<int32_t> token_ids;
  std::vector<uint64_t> logits_digests;
};

// The events of one streamed response, in a wire format's framing.
class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  // What is sent before any text (may be empty).
  virtual std::string Begin() = 0;
  // A piece of text known to be final, with the logprobs of the tokens it completes.
  virtual std::string Text(const std::string& delta, const std::vector<TokenLogprob>& logprobs) = 0;
  // Everything after the last Text: `rest` (text not yet sent) and its tokens' logprobs,
  // the tool calls, the finish reason, usage when asked, the terminator.
  virtual std::string End(const CompletionResult& r, const std::string& rest,
                          const std::vector<TokenLogprob>& rest_logprobs) = 0;
  // A failure after the stream started.
  virtual std::string Error(const ApiError& e) = 0;
};

// What a response body says, read back in the internal vocabulary (proxy mode records an
// upstream's answers through it): finish_reason is stop | length | tool_calls | error.
struct ResponseSummary {
  std::string id;
  std::string model;
  std::string text;
  std::string finish_reason;
  std::vector<ToolCall> tool_calls;
  bool has_usage = false;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_input_tokens = 0;
};

// A request header by (case-insensitive) name; empty when absent.
using HeaderLookup = std::function<std::string(const std::string& name)>;

// The api names recorded in LlmCall.api.
inline constexpr std::string_view kApiChatCompletions = "openai.chat_completions";
inline constexpr std::string_view kApiCompletions = "openai.completions";
inline constexpr std::string_view kApiResponses = "openai.responses";
inline constexpr std::string_view kApiAnthropicMessages = "anthropic.messages";
// POST /v1/embeddings, proxied only (recorder/api/openai_embeddings.h): no WireFormat, since
// nothing of it maps onto a CompletionRequest.
inline constexpr std::string_view kApiEmbeddings = "openai.embeddings";

// One HTTP API that maps onto CompletionRequest / CompletionResult.
class WireFormat {
 public:
  virtual ~WireFormat() = default;
  // Which API this is (kApi*), as recorded in LlmCall.api.
  virtual std::string_view api() const = 0;
  // The route, e.g. "/v1/chat/completions".
  virtual std::string endpoint() const = 0;
  // Every route served with this format (the endpoint and any aliases).
  virtual std::vector<std::string> routes() const { return {endpoint()}; }
  // The prefix of response ids ("chatcmpl-").
  virtual std::string id_prefix() const = 0;
  // The prefix of the ids of the tool calls the model makes ("call_").
  virtual std::string tool_call_id_prefix() const { return "call_"; }
  // Headers the API requires (Anthropic: anthropic-version); checked before the body.
  virtual std::optional<ApiError> CheckHeaders(const HeaderLookup& header) const {
    return std::nullopt;
  }
  virtual std::variant<CompletionRequest, ApiError> Parse(std::string_view body) const = 0;
  // The non-streamed response body.
  virtual std::string Body(const CompletionRequest& req, const CompletionResult& r) const = 0;
  // A stream for `req`; `header` holds the id, created time, model and prompt tokens.
  virtual std::unique_ptr<StreamEncoder> NewStream(const CompletionRequest& req,
                                                   const CompletionResult& header) const = 0;
  // An error reply's body in this API's shape.
  virtual std::string ErrorBody(const ApiError& e) const { return e.Body(); }
  // What a (non-streamed) response body of this API says.
  virtual ResponseSummary ReadResponse(const nlohmann::json& body) const = 0;
  // The non-streamed response body an event stream of this API amounts to (null when the
  // stream holds nothing to fold).
  virtual nlohmann::json FoldStream(std::string_view event_stream) const = 0;
};

}  // namespace trace::recorder
