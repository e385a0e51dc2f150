// Tool calls in the model's output, in Qwen's syntax:
//   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
// (the format Qwen's chat template renders prior calls in, and that the tool-call grammar
// forces when a tool call is required).
//
// Ownership: values. Thread safety: reentrant. Errors: a block that is not a well-formed
// call stays in the content as text.
#pragma once

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
  // The text ended inside an unterminated block (the generation was cut by max_tokens):
  // when its name was complete, the last call holds it and the arguments written so far.
  bool truncated = false;
};

// The calls in `text` and the text outside them. With `allow_truncated`, a final block that
// was opened but never closed is taken as a cut-off call (OpenAI returns such a call, with
// its partial arguments, under finish_reason "length") instead of being left as content.
ExtractedToolCalls ExtractToolCalls(std::string_view text, std::string_view id_prefix,
                                    bool allow_truncated = false);

}  // namespace trace::recorder
