// Tool calls in the model's output, in Qwen's syntax:
//   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
// (the format Qwen's chat template renders prior calls in, and that the tool-call grammar
// forces when a tool call is required).
//
// Ownership: values. Thread safety: reentrant. Errors: a block that is not a well-formed
// call stays in the content as text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recorder/api/model_call.h"

namespace trace::recorder {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

struct ExtractedToolCalls {
  std::vector<ToolCall> calls;  // ids "<id_prefix><n>", n from 0
  std::string content;          // text outside the tool-call blocks, trimmed
  // The text ended inside an unterminated block or inside its opening tag (the generation
  // was cut by max_tokens). When the cut block's name was complete, the last call is that
  // block: complete when its arguments were (only the closing tag was missing), else
  // marked `cut` with the arguments written so far.
  bool truncated = false;
};

// The calls in `text` and the text outside them. A call's arguments are the JSON text the
// model wrote (its spacing and key order), or, for a block not in the grammar's shape
// {"name": ..., "arguments": ...}, the arguments re-serialized. With `allow_truncated`, a
// final block that was opened but never closed is taken as a cut-off call (OpenAI returns
// such a call, with its partial arguments, under finish_reason "length") instead of being
// left as content, and a final partial "<tool_call>" tag is dropped from the content: it
// is the start of a call the limit cut, never text for the user.
ExtractedToolCalls ExtractToolCalls(std::string_view text, std::string_view id_prefix,
                                    bool allow_truncated = false);

// The length of the JSON value at the start of `text` (after leading whitespace, which
// counts), or npos when the text ends before the value does. A scan of brackets, strings
// and escapes, not a validator: meant for text a grammar or a parser checks as well.
size_t JsonValueEnd(std::string_view text);

}  // namespace trace::recorder
