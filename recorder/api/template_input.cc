#include "recorder/api/template_input.h"

#include "recorder/api/json_body.h"

namespace trace::recorder {

using nlohmann::json;

nlohmann::ordered_json MessagesForTemplateOrdered(const std::vector<ChatMessage>& messages) {
  using ojson = nlohmann::ordered_json;
  ojson out = ojson::array();
  for (const ChatMessage& m : messages) {
    ojson j = {{"role", m.role}, {"content", m.content}};
    if (!m.name.empty()) j["name"] = m.name;
    if (m.role == "tool") j["tool_call_id"] = m.tool_call_id;
    if (!m.tool_calls.empty()) {
      ojson calls = ojson::array();
      for (const ToolCall& c : m.tool_calls) {
        ojson args = ParseOrderedJsonOrDiscarded(c.arguments);
        if (args.is_discarded()) args = c.arguments;
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", args}}}});
      }
      j["tool_calls"] = calls;
    }
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::ordered_json ToolsForTemplateOrdered(const std::vector<ToolSpec>& tools) {
  using ojson = nlohmann::ordered_json;
  if (tools.empty()) return nullptr;
  ojson out = ojson::array();
  for (const ToolSpec& t : tools) {
    ojson fn = {{"name", t.name}};
    if (t.description_given || !t.description.empty()) fn["description"] = t.description;
    // parameters_ordered is set from the body; a ToolSpec built in code may set only
    // parameters.
    if (t.parameters_given) {
      fn["parameters"] = t.parameters_ordered;
    } else if (!t.parameters.empty()) {
      fn["parameters"] = ojson(t.parameters);
    }
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

json MessagesForTemplate(const std::vector<ChatMessage>& messages) {
  return json(MessagesForTemplateOrdered(messages));
}

json ToolsForTemplate(const std::vector<ToolSpec>& tools) {
  return json(ToolsForTemplateOrdered(tools));
}

}  // namespace trace::recorder
