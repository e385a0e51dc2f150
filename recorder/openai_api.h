// The wire formats in one include: the internal model call (api/model_call.h), OpenAI Chat
// Completions (api/openai_chat.h), legacy Completions (api/openai_completions.h) and
// Responses (api/openai_responses.h), Anthropic Messages (api/anthropic_messages.h), the
// chat template's view of a request (api/template_input.h) and Qwen tool-call extraction
// (api/qwen_tool_calls.h).
//
// Ownership, thread safety and errors: as in those headers (values; reentrant; a bad
// request is an ApiError, nothing throws).
#pragma once

#include <string_view>
#include <variant>

#include "recorder/api/anthropic_messages.h"
#include "recorder/api/model_call.h"
#include "recorder/api/openai_chat.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/openai_completions.h"
#include "recorder/api/openai_responses.h"
#include "recorder/api/qwen_tool_calls.h"
#include "recorder/api/template_input.h"

namespace trace::recorder {

// Parses a /v1/chat/completions (`chat`) or /v1/completions body.
inline std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body,
                                                                        bool chat) {
  return chat ? ParseChatRequest(body) : ParseLegacyCompletionRequest(body);
}

}  // namespace trace::recorder
