// OpenAI's legacy Completions (POST /v1/completions) as a WireFormat: a raw prompt (a
// string, or token ids; one prompt per request), logprobs as a count of alternatives, the
// shared sampling fields (openai_common.h); responses as text_completion objects or
// server-sent events of them.
//
// Ownership: values; OpenAiCompletionsFormat() is a process-lifetime singleton. Thread
// safety: reentrant. Errors: a request OpenAI would reject is an ApiError naming the field.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "recorder/api/model_call.h"

namespace trace::recorder {

const WireFormat& OpenAiCompletionsFormat();

std::variant<CompletionRequest, ApiError> ParseLegacyCompletionRequest(std::string_view body);
std::string CompletionBody(const CompletionResult& result, bool with_logprobs);

}  // namespace trace::recorder
