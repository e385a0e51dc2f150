// The parts of a request every chat-style format describes in its own shape but means the
// same by: a function tool (name, description, JSON schema, strict), the checks on
// tool_choice against the tools offered, and a JSON-schema output format (name, schema,
// strict). Chat Completions, Responses and Anthropic Messages read them through here.
//
// Ownership: values. Thread safety: reentrant. Errors: a 400 ApiError naming the field by
// its path in the request (e.g. "tools[2].function.name"); nothing throws.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// The function tool described by the object `fn` at `where` (e.g. "tools[2].function"):
// `name` (a non-empty string, unique among `tools`), `description`, the JSON schema under
// `schema_key` ("parameters" or "input_schema"; an object, keys kept as received) and
// `strict` (default `default_strict`). Appended to `tools`; its name added to `names`, the
// names of `tools` so far (a set: comparing each name with every earlier one was quadratic
// in a request of a million tools).
std::optional<ApiError> ParseFunctionTool(const nlohmann::ordered_json& fn,
                                          const std::string& where, const char* schema_key,
                                          bool default_strict, std::vector<ToolSpec>* tools,
                                          std::unordered_set<std::string>* names);

// tool_choice given as a string (OpenAI's formats): none, auto or required into `req`;
// anything else a 400 that names `object_form`, the object spelling of the format (e.g.
// "{\"type\": \"function\", \"name\": ...}").
std::optional<ApiError> ParseToolChoiceString(const std::string& s, const std::string& object_form,
                                              CompletionRequest* req);

// A forced tool_choice needs tools; a named one must name an offered tool (`name_param`: the
// field that names it, e.g. "tool_choice.function.name").
std::optional<ApiError> CheckToolChoice(const CompletionRequest& req,
                                        const std::string& name_param);

// The index of the first tool message in `messages` whose tool_call_id names no call made
// before it, or nullopt. With `same_turn` (Chat Completions, Anthropic) the call must be in
// the nearest assistant message before it with only tool messages between them, as those
// APIs require; else (Responses) any earlier call counts.
std::optional<size_t> FindToolResultWithoutCall(const std::vector<ChatMessage>& messages,
                                                bool same_turn);

// A JSON-schema output format at `where`: `name` (1 to 64 of [a-zA-Z0-9_-]; required unless
// `default_name` is given), `schema` (an object or a boolean) and `strict`.
std::optional<ApiError> ParseJsonSchemaFormat(const nlohmann::ordered_json& v,
                                              const std::string& where,
                                              const std::string& default_name, bool default_strict,
                                              ResponseFormat* out);

}  // namespace trace::recorder
