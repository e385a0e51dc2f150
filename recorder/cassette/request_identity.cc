#include "recorder/cassette/request_identity.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "recorder/api/openai_embeddings.h"
#include "recorder/openai_api.h"

namespace trace::recorder {

using ojson = nlohmann::ordered_json;

namespace {

const char* ToolChoiceName(ToolChoice c) {
  switch (c) {
    case ToolChoice::kNone:
      return "none";
    case ToolChoice::kRequired:
      return "required";
    case ToolChoice::kNamed:
      return "named";
    default:
      return "auto";
  }
}

ojson MessageFields(const ChatMessage& m) {
  ojson j;
  j["role"] = m.role;
  j["content"] = m.content;
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (m.is_error) j["is_error"] = true;
  if (!m.item_reference.empty()) j["item_reference"] = m.item_reference;
  if (!m.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const ToolCall& c : m.tool_calls) {
      calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

void AddPromptLine(std::string* text, const std::string& role, const std::string& content) {
  *text += "[" + role + "]\n" + content + "\n";
}

// Appends the leaf differences of a and b under `path` to *out.
void Walk(const std::string& path, const ojson& a, const ojson& b, size_t max,
          std::vector<std::pair<std::string, std::pair<std::string, std::string>>>* out) {
  if (out->size() >= max || a == b) return;
  if (a.is_object() && b.is_object()) {
    // Members by key: an ordered_json finds a key by scanning, so a lookup per member of
    // the other object was quadratic in two large objects.
    std::unordered_set<std::string_view> in_a;
    std::unordered_map<std::string_view, const ojson*> in_b;
    in_a.reserve(a.size());
    in_b.reserve(b.size());
    for (auto it = a.begin(); it != a.end(); ++it) in_a.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) in_b.emplace(it.key(), &it.value());
    for (auto it = a.begin(); it != a.end() && out->size() < max; ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (auto vb = in_b.find(it.key()); vb != in_b.end()) {
        Walk(p, it.value(), *vb->second, max, out);
      } else {
        out->push_back({p, {it.value().dump(), "(absent)"}});
      }
    }
    for (auto it = b.begin(); it != b.end() && out->size() < max; ++it) {
      if (!in_a.count(it.key())) {
        out->push_back(
            {path.empty() ? it.key() : path + "." + it.key(), {"(absent)", it.value().dump()}});
      }
    }
    return;
  }
  if (a.is_array() && b.is_array()) {
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n && out->size() < max; ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (i >= a.size()) {
        out->push_back({p, {"(absent)", b[i].dump()}});
      } else if (i >= b.size()) {
        out->push_back({p, {a[i].dump(), "(absent)"}});
      } else {
        Walk(p, a[i], b[i], max, out);
      }
    }
    return;
  }
  out->push_back({path, {a.dump(), b.dump()}});
}

}  // namespace

RequestIdentity IdentityOf(const CompletionRequest& req) {
  RequestIdentity id;
  ojson& j = id.fields;
  j["model"] = req.model;
  if (req.chat) {
    if (req.system) {
      j["system"] = *req.system;
      AddPromptLine(&id.prompt_text, "system", *req.system);
    }
    ojson messages = ojson::array();
    for (const ChatMessage& m : req.messages) {
      messages.push_back(MessageFields(m));
      std::string content = m.content;
      for (const ToolCall& c : m.tool_calls) content += "\n-> " + c.name + "(" + c.arguments + ")";
      AddPromptLine(&id.prompt_text, m.role, content);
    }
    j["messages"] = std::move(messages);
    if (!req.assistant_prefill.empty()) {
      j["assistant_prefill"] = req.assistant_prefill;
      AddPromptLine(&id.prompt_text, "assistant (prefill)", req.assistant_prefill);
    }
  } else if (req.prompt_is_tokens) {
    j["prompt_token_ids"] = req.prompt_token_ids;
    id.prompt_text = ojson(req.prompt_token_ids).dump() + "\n";
  } else {
    j["prompt"] = req.prompt;
    id.prompt_text = req.prompt + "\n";
  }
  ojson tools = ojson::array();
  for (const ToolSpec& t : req.tools) {
    tools.push_back({{"name", t.name},
                     {"description", t.description},
                     {"parameters", t.parameters_ordered},
                     {"strict", t.strict}});
  }
  j["tools"] = std::move(tools);
  j["tool_choice"] = req.tool_choice == ToolChoice::kNamed
                         ? "named:" + req.tool_choice_name
                         : std::string(ToolChoiceName(req.tool_choice));
  j["parallel_tool_calls"] = req.parallel_tool_calls;
  static const char* kFormats[] = {"text", "json_object", "json_schema"};
  j["response_format"] = {{"type", kFormats[req.response_format.kind]},
                          {"schema", req.response_format.schema}};
  j["guided_choice"] = req.guided_choice;
  if (!req.previous_response_id.empty()) j["previous_response_id"] = req.previous_response_id;
  ojson sampling;
  sampling["temperature"] = req.sampling.temperature;
  sampling["top_p"] = req.sampling.top_p;
  sampling["top_k"] = req.sampling.top_k;
  sampling["max_tokens"] = req.sampling.max_tokens;
  sampling["stop"] = req.sampling.stop;
  sampling["seed"] = req.seed ? ojson(*req.seed) : ojson(nullptr);
  // Penalties and logit_bias change the answer; written only when set, so the key of a
  // request without them is what it was before they were honoured.
  if (req.sampling.frequency_penalty != 0.0f) {
    sampling["frequency_penalty"] = req.sampling.frequency_penalty;
  }
  if (req.sampling.presence_penalty != 0.0f) {
    sampling["presence_penalty"] = req.sampling.presence_penalty;
  }
  if (!req.sampling.logit_bias.empty()) {
    ojson bias = ojson::array();
    for (const auto& [token, value] : req.sampling.logit_bias) bias.push_back({token, value});
    sampling["logit_bias"] = std::move(bias);
  }
  j["sampling"] = std::move(sampling);
  id.key = j.dump();
  return id;
}

std::optional<RequestIdentity> EmbeddingsIdentityOf(std::string_view body) {
  EmbeddingsRequest r = ReadEmbeddingsRequest(body);
  if (r.identity.is_null()) return std::nullopt;
  RequestIdentity id;
  id.fields = std::move(r.identity);
  id.key = id.fields.dump();
  id.prompt_text = std::move(r.input_text);
  return id;
}

const WireFormat* FormatOfRecordedCall(const proto::LlmCall& call) {
  static const WireFormat* const kFormats[] = {&OpenAiChatFormat(), &OpenAiCompletionsFormat(),
                                               &OpenAiResponsesFormat(),
                                               &AnthropicMessagesFormat()};
  for (const WireFormat* f : kFormats) {
    if (!call.api().empty() && f->api() == call.api()) return f;
  }
  for (const WireFormat* f : kFormats) {
    for (const std::string& route : f->routes()) {
      if (call.api().empty() && route == call.endpoint()) return f;
    }
  }
  return nullptr;
}

Result<RequestIdentity> IdentityOfRecorded(const proto::LlmCall& call, uint64_t seq) {
  if (call.api() == kApiEmbeddings) {
    std::optional<RequestIdentity> id = EmbeddingsIdentityOf(call.request_json());
    if (!id) {
      return InvalidArgument("embeddings call at seq " + std::to_string(seq) +
                             ": its recorded request is not a JSON object");
    }
    return std::move(*id);
  }
  const WireFormat* format = FormatOfRecordedCall(call);
  if (format == nullptr) {
    return InvalidArgument("model call at seq " + std::to_string(seq) + " came through '" +
                           call.endpoint() + "', which trace rerun cannot answer");
  }
  auto parsed = format->Parse(call.request_json());
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    return InvalidArgument("model call at seq " + std::to_string(seq) +
                           ": its recorded request does not parse: " + err->message);
  }
  return IdentityOf(std::get<CompletionRequest>(parsed));
}

std::vector<FieldChange> CompareIdentities(const RequestIdentity& recorded,
                                           const RequestIdentity& now, size_t max) {
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> leaves;
  Walk("", recorded.fields, now.fields, max, &leaves);
  std::vector<FieldChange> out;
  for (auto& [path, values] : leaves) {
    FieldChange c;
    c.path = path;
    c.recorded = values.first;
    c.now = values.second;
    const size_t dot = path.find_last_of('.');
    c.field = dot == std::string::npos ? path : path.substr(dot + 1);
    if (path.rfind("messages[", 0) == 0) {
      c.message = std::stoi(path.substr(9));
      static const ojson kNone = ojson::array();
      const ojson& a = recorded.fields.contains("messages") ? recorded.fields["messages"] : kNone;
      const ojson& b = now.fields.contains("messages") ? now.fields["messages"] : kNone;
      const size_t i = static_cast<size_t>(c.message);
      if (i < a.size()) {
        c.role = a[i].value("role", "");
      } else if (i < b.size()) {
        c.role = b[i].value("role", "");
      }
      if (c.field.rfind("messages[", 0) == 0) c.field = "(whole message)";
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace trace::recorder
