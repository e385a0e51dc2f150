// OpenAI Chat Completions (POST /v1/chat/completions) as a WireFormat: messages (system,
// developer, user, assistant with tool_calls, tool), tools and tool_choice,
// parallel_tool_calls, response_format (text, json_object, json_schema), logprobs and
// top_logprobs, plus the shared sampling fields (openai_common.h); responses as
// chat.completion objects or chat.completion.chunk server-sent events.
//
// Ownership: values; OpenAiChatFormat() is a process-lifetime singleton. Thread safety:
// reentrant. Errors: a request OpenAI would reject is an ApiError naming the field
// (e.g. messages[2].tool_call_id); unknown fields are ignored.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

const WireFormat& OpenAiChatFormat();

std::variant<CompletionRequest, ApiError> ParseChatRequest(std::string_view body);
// The chat.completion object; `legacy_functions`: the call comes back as
// message.function_call with finish_reason "function_call" (the deprecated functions API).
std::string ChatCompletionBody(const CompletionResult& result, bool with_logprobs,
                               bool legacy_functions = false);
// OpenAI tool_calls array; `with_index` adds "index" as stream deltas carry it.
nlohmann::json ChatToolCallsJson(const std::vector<ToolCall>& calls, bool with_index);
// A chat.completion read back, and the chat.completion a chunk stream amounts to.
ResponseSummary ReadChatResponse(const nlohmann::json& body);
nlohmann::json FoldChatStream(std::string_view event_stream);

}  // namespace trace::recorder
