// Anthropic Messages (POST /v1/messages, and /messages for clients whose base URL already
// ends in /v1) as a WireFormat: `system`, `messages` with text / tool_use / tool_result
// blocks (a final assistant message is continued, as Anthropic does), `tools` with
// `input_schema`, `tool_choice` (auto, any, tool, none; disable_parallel_tool_use),
// `max_tokens` (required), `temperature` (0 to 1), `top_p`, `top_k`, `stop_sequences`,
// `output_config.format` (JSON schema, through the structured-output grammar) and `stream`
// with Anthropic's events (message_start, content_block_start / _delta / _stop,
// message_delta with stop_reason and usage, message_stop). Requests need the
// `anthropic-version` header; errors have Anthropic's shape
// {"type": "error", "error": {"type", "message"}}.
//
// Ownership: values; AnthropicMessagesFormat() is a process-lifetime singleton. Thread
// safety: reentrant. Errors: a request Anthropic would reject is an ApiError naming the
// field (e.g. messages[1].content[0].tool_use_id); images, documents, extended thinking
// and server tools are a 400 naming the field.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

const WireFormat& AnthropicMessagesFormat();

std::variant<CompletionRequest, ApiError> ParseAnthropicRequest(std::string_view body);
// The message object, keys in Anthropic's order.
nlohmann::ordered_json AnthropicBodyJson(const CompletionResult& r);
ResponseSummary ReadAnthropicResponse(const nlohmann::json& body);
nlohmann::json FoldAnthropicStream(std::string_view event_stream);

// {"type": "error", "error": {"type": <by HTTP status>, "message"}}.
std::string AnthropicErrorBody(const ApiError& e);
// The same error when `body` is an OpenAI-shaped error body ({"error": {"message", ...}});
// empty when it is not one (e.g. already Anthropic's shape).
std::string AnthropicErrorFromOpenAi(int http_status, const std::string& body);
// Whether `path` is served with the Anthropic API (so its errors take Anthropic's shape).
bool IsAnthropicRoute(std::string_view path);

}  // namespace trace::recorder
