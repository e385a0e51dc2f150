// A recorded model call's content in the shapes of the OpenTelemetry GenAI semantic
// conventions (docs/export.md pins the version): input messages, system instructions,
// tool definitions and output messages, from the request and response JSON of any of the
// wire formats the recorder serves (OpenAI Chat Completions, Completions, Responses,
// Anthropic Messages).
//
// Ownership: returns new JSON values. Thread safety: reentrant. Errors: none; a request or
// response that does not parse (or a streamed proxy response kept as raw SSE) gives what
// can be rebuilt from the recorded output text and tool calls, never a failure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"

namespace trace::exporters {

enum class WireFormat {
  kChatCompletions,
  kCompletions,
  kResponses,
  kAnthropicMessages,
  kEmbeddings,
  kOther
};

// By the endpoint's path ("/v1/chat/completions", ...).
WireFormat WireFormatOf(std::string_view endpoint);
// gen_ai.operation.name: "text_completion" for Completions, "embeddings" for Embeddings,
// else "chat".
const char* OperationName(WireFormat format);
// The conventions' finish reasons: stop, length, content_filter, tool_call, error;
// provider values (tool_calls, end_turn, max_tokens, ...) mapped onto them.
std::string SemconvFinishReason(std::string_view provider_reason);

struct GenAiContent {
  nlohmann::json input_messages = nlohmann::json::array();  // gen_ai.input.messages
  nlohmann::json system_instructions;  // gen_ai.system_instructions; null when none
  nlohmann::json tool_definitions;     // gen_ai.tool.definitions; null when none
  nlohmann::json output_messages = nlohmann::json::array();  // gen_ai.output.messages
};

// `model_tool_calls`: the ToolCall events this call produced (used when the response
// cannot be parsed). An embeddings call has no messages: its content is empty (the
// conventions define none for it, and its vectors are no message).
GenAiContent ContentOf(const proto::LlmCall& call,
                       const std::vector<const proto::ToolCall*>& model_tool_calls);

// A tool call's arguments as the conventions want them: the parsed JSON value when the
// text parses, else the text itself.
nlohmann::json ArgumentsValue(const std::string& text);

}  // namespace trace::exporters
