#include "recorder/api/tool_fields.h"

#include "base/escape.h"
#include "recorder/api/request_fields.h"

namespace trace::recorder {

using nlohmann::json;
using nlohmann::ordered_json;

std::optional<ApiError> ParseFunctionTool(const ordered_json& fn, const std::string& where,
                                          const char* schema_key, bool default_strict,
                                          std::vector<ToolSpec>* tools,
                                          std::unordered_set<std::string>* names) {
  ToolSpec spec;
  auto name = fn.find("name");
  if (name == fn.end() || !name->is_string() || name->get<std::string>().empty()) {
    return BadRequest(where + ".name", "'" + where + ".name' must be a non-empty string");
  }
  spec.name = name->get<std::string>();
  if (auto d = fn.find("description"); d != fn.end() && !d->is_null()) {
    if (!d->is_string()) return WrongType(where + ".description", "a string", json(*d));
    spec.description = d->get<std::string>();
    spec.description_given = true;
  }
  if (auto params = fn.find(schema_key); params != fn.end() && !params->is_null()) {
    if (!params->is_object()) {
      return WrongType(where + "." + schema_key, "an object", json(*params));
    }
    spec.parameters = json(*params);
    spec.parameters_ordered = *params;
    spec.parameters_given = true;
  }
  spec.strict = default_strict;
  if (auto strict = fn.find("strict"); strict != fn.end() && !strict->is_null()) {
    if (!strict->is_boolean()) return WrongType(where + ".strict", "a boolean", json(*strict));
    spec.strict = strict->get<bool>();
  }
  if (!names->insert(spec.name).second) {
    return BadRequest(where + ".name",
                      "duplicate tool name \"" + EscapeForDisplay(spec.name) + "\"");
  }
  tools->push_back(std::move(spec));
  return std::nullopt;
}

std::optional<ApiError> ParseToolChoiceString(const std::string& s, const std::string& object_form,
                                              CompletionRequest* req) {
  if (s == "none") {
    req->tool_choice = ToolChoice::kNone;
  } else if (s == "auto") {
    req->tool_choice = ToolChoice::kAuto;
  } else if (s == "required") {
    req->tool_choice = ToolChoice::kRequired;
  } else {
    return BadRequest("tool_choice", "'tool_choice' must be none, auto, required or " +
                                         object_form + "; got \"" + EscapeForDisplay(s) + "\"");
  }
  return std::nullopt;
}

std::optional<ApiError> CheckToolChoice(const CompletionRequest& req,
                                        const std::string& name_param) {
  if (req.tools.empty() &&
      (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed)) {
    return OutOfRange("tool_choice", "'tool_choice' requires a non-empty 'tools' list");
  }
  if (req.tool_choice != ToolChoice::kNamed) return std::nullopt;
  for (const ToolSpec& t : req.tools) {
    if (t.name == req.tool_choice_name) return std::nullopt;
  }
  return OutOfRange(name_param, "tool_choice names \"" + EscapeForDisplay(req.tool_choice_name) +
                                    "\", which is not in 'tools'");
}

namespace {

// OpenAI's rule for a json_schema format's name: 1 to 64 of [a-zA-Z0-9_-]. A loop, not
// std::regex: with no std::regex in our code, httplib's own static regexes run only
// uninstrumented code under TSan (tests/sanitizers/tsan.supp says why that matters).
bool IsSchemaName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::optional<ApiError> ParseJsonSchemaFormat(const ordered_json& v, const std::string& where,
                                              const std::string& default_name, bool default_strict,
                                              ResponseFormat* out) {
  out->kind = ResponseFormat::kJsonSchema;
  out->name = default_name;
  auto name = v.find("name");
  if (name != v.end() || default_name.empty()) {
    if (name == v.end() || !name->is_string() || !IsSchemaName(name->get<std::string>())) {
      return BadRequest(where + ".name",
                        "'" + where + ".name' must be 1 to 64 letters, digits, '_' or '-'");
    }
    out->name = name->get<std::string>();
  }
  if (auto schema = v.find("schema"); schema != v.end() && !schema->is_null()) {
    if (!schema->is_object() && !schema->is_boolean()) {
      return WrongType(where + ".schema", "an object", json(*schema));
    }
    out->schema = *schema;
  }
  out->strict = default_strict;
  if (auto strict = v.find("strict"); strict != v.end() && !strict->is_null()) {
    if (!strict->is_boolean()) return WrongType(where + ".strict", "a boolean", json(*strict));
    out->strict = strict->get<bool>();
  }
  return std::nullopt;
}

std::optional<size_t> FindToolResultWithoutCall(const std::vector<ChatMessage>& messages,
                                                bool same_turn) {
  std::unordered_set<std::string> calls;  // the ids a tool message may answer here
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      if (calls.count(m.tool_call_id) == 0) return i;
      continue;
    }
    if (same_turn) calls.clear();
    for (const ToolCall& c : m.tool_calls) calls.insert(c.id);
  }
  return std::nullopt;
}

}  // namespace trace::recorder
