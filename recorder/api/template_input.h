// The chat template's view of a request: messages and tools in OpenAI's shapes, tool-call
// arguments parsed back to objects as Qwen's template expects.
//
// The Ordered forms keep the object keys of tool-call arguments and tool parameter schemas
// in the order the client sent them, as Hugging Face's apply_chat_template (Python dicts)
// does; render them with ChatTemplate::RenderOrdered. The json forms are the same with keys
// sorted (nlohmann::json), which changes what a template's `tojson` prints.
//
// Ownership: returns values. Thread safety: reentrant. Errors: none (arguments that are not
// valid JSON are passed as text).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

namespace trace::recorder {

nlohmann::ordered_json MessagesForTemplateOrdered(const std::vector<ChatMessage>& messages);
// null when `tools` is empty.
nlohmann::ordered_json ToolsForTemplateOrdered(const std::vector<ToolSpec>& tools);
nlohmann::json MessagesForTemplate(const std::vector<ChatMessage>& messages);
nlohmann::json ToolsForTemplate(const std::vector<ToolSpec>& tools);

}  // namespace trace::recorder
