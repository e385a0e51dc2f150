// The one way to parse JSON that comes from outside the process: request bodies (every
// wire format's Parse, the trace event API, the upstream proxy), JSON carried inside their
// string fields (tool-call arguments) and an upstream's responses. Use these instead of
// nlohmann's parse.
//
// Why: nlohmann parses any depth iteratively, but copying, converting (ordered_json ->
// json) and dump() recurse once per level, so 40,000 nested brackets overflow the stack
// (SIGSEGV) wherever a parsed value is touched later. These functions refuse text nested
// deeper than kMaxJsonDepth before anything is built from it; no legitimate request comes
// near (a tool schema nested 20 levels is unusual). The HTTP frontend also checks every
// request body with FindJsonDepthExcess before any route sees it (frontend.h), so a route
// added later is covered even before it parses.
//
// Ownership: values. Thread safety: reentrant. Errors: ApiError 400 with code
// "invalid_json" (not JSON) or "json_too_deep" (naming the byte offset and the limit);
// the *OrDiscarded variants return a discarded value instead. Nothing throws.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

// Most arrays/objects one JSON text may nest (the outermost counts as 1).
inline constexpr int kMaxJsonDepth = 256;

// The byte offset of the bracket at which `text` first nests deeper than `max_depth`, or
// nullopt. A linear scan that skips string contents (escapes included); it does not
// validate the rest of the syntax, so it is meant to run before a parser.
std::optional<size_t> FindJsonDepthExcess(std::string_view text, int max_depth = kMaxJsonDepth);

// The 400 for text nested too deep at `offset`; `what` names it ("request body").
ApiError JsonTooDeep(std::string_view what, size_t offset);

// A request body, object keys in the order received (ordered_json) or sorted (json).
std::variant<nlohmann::ordered_json, ApiError> ParseJsonBodyOrdered(std::string_view body);
std::variant<nlohmann::json, ApiError> ParseJsonBody(std::string_view body);

// JSON inside a value (tool-call arguments, a model's tool call, an upstream response):
// is_discarded() when it is not JSON or nests too deep.
nlohmann::json ParseJsonOrDiscarded(std::string_view text);
nlohmann::ordered_json ParseOrderedJsonOrDiscarded(std::string_view text);

}  // namespace trace::recorder
