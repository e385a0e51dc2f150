#include "recorder/api/qwen_tool_calls.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "recorder/api/json_body.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

constexpr std::string_view kSpace = " \t\r\n";

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

// The index just past the string literal whose opening quote is at `open`, or npos.
size_t StringEnd(std::string_view s, size_t open) {
  for (size_t i = open + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// What the tool-call grammar writes before a call's arguments: {"name": NAME, "arguments":
// (recorder/constrained.cc). Returns the name and sets *args_at to where the arguments
// start; nullopt when `inner` does not start so or the name is not complete yet.
std::optional<std::string> GrammarHead(std::string_view inner, size_t* args_at) {
  static constexpr std::string_view kName = "{\"name\": ";
  static constexpr std::string_view kArgs = ", \"arguments\": ";
  if (inner.substr(0, kName.size()) != kName || inner.size() == kName.size() ||
      inner[kName.size()] != '"') {
    return std::nullopt;
  }
  size_t end = StringEnd(inner, kName.size());
  if (end == std::string_view::npos) return std::nullopt;
  json name = ParseJsonOrDiscarded(inner.substr(kName.size(), end - kName.size()));
  if (!name.is_string()) return std::nullopt;
  std::string_view rest = inner.substr(end);
  if (rest.substr(0, kArgs.size()) == kArgs) {
    *args_at = end + kArgs.size();
  } else if (kArgs.substr(0, rest.size()) == rest) {
    *args_at = inner.size();  // cut before or inside ", \"arguments\": ": none written yet
  } else {
    return std::nullopt;
  }
  return name.get<std::string>();
}

// A block cut before its closing tag: `{"name": "NAME", "arguments": PARTIAL`. False when
// the name is not complete yet. Arguments whose JSON value was complete make a complete
// call (the limit only cut the closing tag); else the call is `cut` and holds the prefix.
bool ParseTruncatedCall(std::string_view inner, ToolCall* call) {
  inner = inner.substr(std::min(inner.size(), inner.find_first_not_of(kSpace)));
  size_t args_at = 0;
  std::optional<std::string> name = GrammarHead(inner, &args_at);
  if (!name) return false;
  call->name = std::move(*name);
  std::string_view args = inner.substr(args_at);
  size_t end = JsonValueEnd(args);
  call->cut = end == std::string_view::npos;
  call->arguments = std::string(call->cut ? args : Trim(args.substr(0, end)));
  return true;
}

// The arguments of a complete, well-formed block: as the model wrote them when the block
// has the grammar's shape, else re-serialized from the parsed call (key order kept).
std::string ArgumentsOf(std::string_view inner, const json& call) {
  const json& args = call.contains("arguments") ? call["arguments"] : json();
  if (args.is_string()) return args.get<std::string>();
  size_t args_at = 0;
  if (GrammarHead(inner, &args_at) && args_at < inner.size()) {
    std::string_view rest = inner.substr(args_at);
    size_t end = JsonValueEnd(rest);
    if (end != std::string_view::npos && Trim(rest.substr(end)) == "}") {
      return std::string(Trim(rest.substr(0, end)));
    }
  }
  nlohmann::ordered_json ordered = ParseOrderedJsonOrDiscarded(inner);
  nlohmann::ordered_json a = nlohmann::ordered_json::object();
  if (ordered.is_object() && ordered.contains("arguments")) a = ordered["arguments"];
  return JsonText(a);
}

// The length of a proper prefix of the opening tag that `text` ends with (0 when none).
size_t PartialOpenTagAtEnd(std::string_view text) {
  for (size_t n = std::min(text.size(), kToolCallOpen.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == kToolCallOpen.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

size_t JsonValueEnd(std::string_view s) {
  constexpr size_t npos = std::string_view::npos;
  size_t i = s.find_first_not_of(kSpace);
  if (i == npos) return npos;
  if (s[i] == '"') return StringEnd(s, i);
  if (s[i] != '{' && s[i] != '[') {
    // A number or literal ends at a delimiter; at the end of the text it may go on.
    size_t end = s.find_first_of(" \t\r\n,:]}", i);
    return end == npos || end == i ? npos : end;
  }
  int depth = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      i = StringEnd(s, i);
      if (i == npos) return npos;
      --i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return npos;
}

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
    tc.arguments = ArgumentsOf(inner, call);
    out.calls.push_back(std::move(tc));
    pos = close + kToolCallClose.size();
  }
  if (pos < text.size()) {
    std::string_view tail = text.substr(pos);
    if (allow_truncated) {
      if (size_t n = PartialOpenTagAtEnd(tail); n > 0) {
        tail.remove_suffix(n);
        out.truncated = true;
      }
    }
    rest.append(tail);
  }
  out.content = std::string(Trim(rest));
  return out;
}

}  // namespace trace::recorder
