// OpenAI Responses (POST /v1/responses) as a WireFormat: `input` as a string or a list of
// items (messages with input_text / output_text parts, function_call and
// function_call_output items, item_reference), `instructions`, function `tools`,
// `tool_choice`, `parallel_tool_calls`, `text.format` (text, json_object, json_schema),
// `temperature`, `top_p`, `max_output_tokens`, logprobs (`include` /
// `top_logprobs`), `store` and `previous_response_id`; responses as `response` objects or
// the Responses event stream (response.created ... response.completed).
//
// Input items become ChatMessages one per item, so that item references can be resolved
// (recorder/server/response_store.h) before MergeResponsesItems folds function calls into
// the assistant message they belong to.
//
// Ownership: values; OpenAiResponsesFormat() is a process-lifetime singleton. Thread
// safety: reentrant. Errors: a request OpenAI would reject is an ApiError naming the field
// (e.g. input[2].call_id); tools other than functions, background mode, stored prompts and
// conversations are a 400 naming the field.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

const WireFormat& OpenAiResponsesFormat();

std::variant<CompletionRequest, ApiError> ParseResponsesRequest(std::string_view body);
// The `response` object for a finished call (also the payload of response.completed).
nlohmann::json ResponsesBodyJson(const CompletionRequest& req, const CompletionResult& r);
// A response object read back, and the response object an event stream amounts to (its
// response.completed / .incomplete / .failed payload).
ResponseSummary ReadResponsesResponse(const nlohmann::json& body);
nlohmann::json FoldResponsesStream(std::string_view event_stream);

// One message per conversation turn from one message per item: a function_call item joins
// the assistant message before it (or starts one), so the chat template sees an assistant
// turn with its text and its tool calls, as Chat Completions would send it.
std::vector<ChatMessage> MergeResponsesItems(std::vector<ChatMessage> items);

}  // namespace trace::recorder
