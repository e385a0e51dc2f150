// Fuzz target: ChatTemplate::Parse + Render on arbitrary template text. The input's first
// line (up to '\n') is used as the template's variables when it parses as a JSON object;
// the rest is the template. Must never crash, hang or throw; errors are fine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  std::string_view source = input;
  size_t nl = input.find('\n');
  if (nl != std::string_view::npos) {
    auto parsed = nlohmann::ordered_json::parse(input.substr(0, nl), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) {
      kwargs = parsed;
      source = input.substr(nl + 1);
    }
  }
  auto tmpl = trace::engine::ChatTemplate::Parse(source, "fuzz");
  if (!tmpl.ok()) return 0;
  nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"héllo"},)"
      R"({"role":"assistant","content":"<think>x</think>y","tool_calls":[{"function":)"
      R"({"name":"f","arguments":{"a":1.5,"b":[true,null]}}}]},{"role":"tool","content":"r"}])");
  nlohmann::ordered_json tools =
      nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  auto out = (*tmpl)->RenderOrdered(messages, tools, true, kwargs);
  (void)out;
  return 0;
}
