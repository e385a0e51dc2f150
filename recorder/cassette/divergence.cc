#include "recorder/cassette/divergence.h"

#include "base/escape.h"
#include "base/line_diff.h"

namespace trace::recorder {

namespace {

// The path and role come from the agent's request (a tool's or a property's name can be in
// the path): escaped like the values.
std::string Where(const FieldChange& c) {
  std::string s = EscapeForDisplay(c.path);
  if (c.message >= 0 && !c.role.empty()) s += " (" + EscapeForDisplay(c.role, 40) + " message)";
  return s;
}

}  // namespace

Divergence RequestDivergence(int call, int expected_call, uint64_t expected_seq,
                             const RequestIdentity& expected, const RequestIdentity& now) {
  Divergence d;
  d.kind = Divergence::kRequest;
  d.call = call;
  d.expected_call = expected_call;
  d.expected_seq = expected_seq;
  d.changes = CompareIdentities(expected, now);
  d.prompt_diff = LineDiff(expected.prompt_text, now.prompt_text, 30);
  return d;
}

std::string Divergence::Summary() const {
  switch (kind) {
    case kExtraCall:
      return "call " + std::to_string(call) +
             " is beyond the recording: every recorded model call was already used";
    case kFewerCalls:
      return "the agent ended before recorded call " + std::to_string(expected_call) +
             ": it made fewer model calls than the recording";
    case kTool:
      return "tool call " + EscapeForDisplay(tool_name, 60) + "(" +
             EscapeForDisplay(tool_arguments, 80) + ") has no recorded result";
    case kRequest:
      break;
  }
  std::string s = "call " + std::to_string(call) + " differs from recorded call " +
                  std::to_string(expected_call) + " (seq " + std::to_string(expected_seq) + ")";
  if (!changes.empty()) {
    const FieldChange& c = changes.front();
    s += ": " + Where(c) + " was " + EscapeForDisplay(c.recorded, 50) + ", now " +
         EscapeForDisplay(c.now, 50);
    if (changes.size() > 1) s += " (+" + std::to_string(changes.size() - 1) + " more)";
  }
  return s;
}

std::string Divergence::Describe() const {
  std::string s = Summary() + "\n";
  for (const FieldChange& c : changes) {
    s += "  " + Where(c) + ":\n    recorded: " + EscapeForDisplay(c.recorded, 200) +
         "\n    now:      " + EscapeForDisplay(c.now, 200) + "\n";
  }
  if (!prompt_diff.empty()) {
    s += "  prompt diff (- recorded, + now):\n";
    size_t start = 0;
    while (start < prompt_diff.size()) {
      size_t end = prompt_diff.find('\n', start);
      if (end == std::string::npos) end = prompt_diff.size();
      s += "    " + EscapeForDisplay(prompt_diff.substr(start, end - start), 160) + "\n";
      start = end + 1;
    }
  }
  return s;
}

nlohmann::json Divergence::Json() const {
  static const char* kKinds[] = {"request", "extra_call", "fewer_calls", "tool"};
  nlohmann::json changes_json = nlohmann::json::array();
  for (const FieldChange& c : changes) {
    changes_json.push_back({{"path", c.path},
                            {"message", c.message},
                            {"role", c.role},
                            {"field", c.field},
                            {"recorded", c.recorded},
                            {"now", c.now}});
  }
  nlohmann::json j{{"kind", kKinds[kind]},           {"call", call},
                   {"expected_call", expected_call}, {"expected_seq", expected_seq},
                   {"summary", Summary()},           {"changes", changes_json},
                   {"prompt_diff", prompt_diff}};
  if (kind == kTool) {
    j["tool"] = tool_name;
    j["arguments"] = tool_arguments;
  }
  return j;
}

}  // namespace trace::recorder
