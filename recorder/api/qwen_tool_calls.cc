#include "recorder/api/qwen_tool_calls.h"

#include <nlohmann/json.hpp>

#include "recorder/api/json_body.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A cut-off block: `{"name": "NAME", "arguments": PARTIAL`. False when the name is not
// complete yet.
bool ParseTruncatedCall(std::string_view inner, ToolCall* call) {
  static constexpr std::string_view kName = "{\"name\": \"";
  static constexpr std::string_view kArgs = ", \"arguments\": ";
  inner = Trim(inner);
  if (inner.substr(0, kName.size()) != kName) return false;
  size_t end = inner.find('"', kName.size());
  if (end == std::string_view::npos) return false;
  json name = ParseJsonOrDiscarded(inner.substr(kName.size() - 1, end - kName.size() + 2));
  if (!name.is_string()) return false;
  call->name = name.get<std::string>();
  std::string_view rest = inner.substr(end + 1);
  if (rest.substr(0, kArgs.size()) == kArgs)
    call->arguments = std::string(rest.substr(kArgs.size()));
  return true;
}

}  // namespace

ExtractedToolCalls ExtractToolCalls(std::string_view text, std::string_view id_prefix,
                                    bool allow_truncated) {
  ExtractedToolCalls out;
  std::string rest;
  size_t pos = 0;
  auto next_id = [&] { return std::string(id_prefix) + std::to_string(out.calls.size()); };
  while (pos < text.size()) {
    size_t open = text.find(kToolCallOpen, pos);
    if (open == std::string_view::npos) break;
    size_t close = text.find(kToolCallClose, open + kToolCallOpen.size());
    if (close == std::string_view::npos) {
      if (!allow_truncated) break;
      rest.append(text.substr(pos, open - pos));
      ToolCall tc;
      if (ParseTruncatedCall(text.substr(open + kToolCallOpen.size()), &tc)) {
        tc.id = next_id();
        out.calls.push_back(std::move(tc));
      }
      out.truncated = true;
      pos = text.size();
      break;
    }
    std::string_view inner =
        Trim(text.substr(open + kToolCallOpen.size(), close - open - kToolCallOpen.size()));
    json call = ParseJsonOrDiscarded(inner);
    bool ok = !call.is_discarded() && call.is_object() && call.contains("name") &&
              call["name"].is_string();
    if (!ok) {
      // Not a well-formed call: leave the text as content.
      rest.append(text.substr(pos, close + kToolCallClose.size() - pos));
      pos = close + kToolCallClose.size();
      continue;
    }
    rest.append(text.substr(pos, open - pos));
    ToolCall tc;
    tc.id = next_id();
    tc.name = call["name"].get<std::string>();
    // The arguments exactly as the model wrote them (key order and all), when they can be
    // cut out of the block; else re-serialized.
    json args = call.contains("arguments") ? call["arguments"] : json::object();
    if (args.is_string()) {
      tc.arguments = args.get<std::string>();
    } else {
      nlohmann::ordered_json ordered = ParseOrderedJsonOrDiscarded(inner);
      nlohmann::ordered_json a = nlohmann::ordered_json::object();
      if (ordered.is_object() && ordered.contains("arguments")) a = ordered["arguments"];
      tc.arguments = a.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out.calls.push_back(std::move(tc));
    pos = close + kToolCallClose.size();
  }
  if (pos < text.size()) rest.append(text.substr(pos));
  out.content = std::string(Trim(rest));
  return out;
}

}  // namespace trace::recorder
