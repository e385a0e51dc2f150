// The one way to parse JSON that comes from outside the process: request bodies (every
// wire format's Parse, the trace event API, the upstream proxy), JSON carried inside their
// string fields (tool-call arguments) and an upstream's responses. Use these instead of
// nlohmann's parse.
//
// Why: nlohmann parses any depth iteratively, but copying, converting (ordered_json ->
// json) and dump() recurse once per level, so 40,000 nested brackets overflow the stack
// (SIGSEGV) wherever a parsed value is touched later. These functions refuse text nested
// deeper than kMaxJsonDepth before anything is built from it; no legitimate request comes
// near (a tool schema nested 20 levels is unusual). A request body is also refused when it
// holds more than kMaxJsonValues values and keys: each becomes a node in every copy a
// request is converted through (two parsed trees, the chat messages, the template's
// input and values), several hundred bytes in all, so a body of tiny values multiplied
// its size 60 times in memory (docs/recorder.md, "Limits"). The HTTP frontend checks every
// request body with ScanJson before any route sees it (frontend.h), so a route added
// later is covered even before it parses. A NUL byte anywhere makes text invalid JSON
// (nlohmann's lexer takes it for the end of the input and would accept `{...}\0junk`).
//
// Ownership: values. Thread safety: reentrant. Errors: ApiError 400 with code
// "invalid_json" (not JSON) or "json_too_deep" (naming the byte offset and the limit), 413
// "too_many_json_values" (naming the limit, the byte offset and the top-level field); the
// *OrDiscarded variants return a discarded value instead. Nothing throws.
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
// Most values (objects, arrays, strings, numbers, literals) and object keys one request
// body may hold. A long agent conversation is far below it: 5,000 messages with tool
// calls and 100 tool schemas come to about 60,000 (docs/recorder.md, "Limits").
inline constexpr size_t kMaxJsonValues = 250'000;
// The same for an embeddings request (POST /v1/embeddings, relayed in proxy mode): its
// input may be token ids, one value each (LangChain's OpenAIEmbeddings sends token ids,
// up to 1,000 texts a request; OpenAI takes up to 300,000 tokens a request), and a number
// costs a few dozen bytes in the one tree the relay parses.
inline constexpr size_t kMaxEmbeddingsJsonValues = 1'000'000;

// What one linear pass over a JSON text finds, without building anything. It skips string
// contents with memchr (escapes included) and does not validate the syntax, so it is meant
// to run before a parser; on text that is not JSON its counts are approximate.
struct JsonScan {
  enum class Excess { kNone, kDepth, kValues };
  // The first limit the text passes, and the byte offset where it does (the bracket that
  // nests too deep, the value or key one over the count); the scan stops there.
  Excess excess = Excess::kNone;
  size_t offset = 0;
  size_t max_values = 0;  // the count limit the text was scanned against
  // Values and object keys (each key counts once, as its string does). A string that is
  // the value of an "arguments" key (tool-call arguments sent as JSON text, which the chat
  // template and the event API parse) counts the values and keys of the JSON it holds as
  // well, unless that nests too deep to be parsed.
  size_t values = 0;
  // A lower bound of the bytes of every string, keys included, once unescaped (an escape
  // counts as one byte), so that a limit on it never refuses text shorter than the limit.
  size_t string_bytes = 0;
  // The top-level object's key whose value was being read at `offset` (raw, as in the
  // text); empty when the excess is not inside such a member or nothing was exceeded.
  std::string_view field;
};

// Scans `text` with these limits (SIZE_MAX values: no count limit). Allocates only to
// unescape "arguments" strings (one at a time).
JsonScan ScanJson(std::string_view text, int max_depth = kMaxJsonDepth,
                  size_t max_values = kMaxJsonValues);

// The byte offset of the bracket at which `text` first nests deeper than `max_depth`, or
// nullopt (ScanJson without a count limit).
std::optional<size_t> FindJsonDepthExcess(std::string_view text, int max_depth = kMaxJsonDepth);

// The 400 for text nested too deep at `offset`; `what` names it ("request body").
ApiError JsonTooDeep(std::string_view what, size_t offset);
// The 413 for a scan whose excess is kValues; `what` names the text ("request body").
ApiError JsonTooManyValues(std::string_view what, const JsonScan& scan);
// The error for a scan that found an excess (JsonTooDeep or JsonTooManyValues), or nullopt.
std::optional<ApiError> JsonScanError(std::string_view what, const JsonScan& scan);

// A request body, object keys in the order received (ordered_json) or sorted (json).
std::variant<nlohmann::ordered_json, ApiError> ParseJsonBodyOrdered(std::string_view body);
std::variant<nlohmann::json, ApiError> ParseJsonBody(std::string_view body);

// JSON inside a value (tool-call arguments, a model's tool call, an upstream response):
// is_discarded() when it is not JSON or nests too deep. No count limit: the request body's
// scan counted the values of its tool-call arguments already, and an upstream's answer
// (logprobs of thousands of tokens) may hold more values than a request may.
nlohmann::json ParseJsonOrDiscarded(std::string_view text);
nlohmann::ordered_json ParseOrderedJsonOrDiscarded(std::string_view text);

}  // namespace trace::recorder
