#include "recorder/openai_api.h"

#include <cmath>
#include <limits>

namespace trace::recorder {
namespace {

using nlohmann::json;

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    case json::value_t::number_float:
      return "number";
    default:
      return "integer";
  }
}

ApiError WrongType(const std::string& param, const char* want, const json& got) {
  return BadRequest(param, "'" + param + "' must be " + want + ", got " + TypeName(got));
}

ApiError OutOfRange(const std::string& param, const std::string& message) {
  ApiError e = BadRequest(param, message);
  e.http_status = 422;
  e.code = "invalid_value";
  return e;
}

// Message content: a string, null, or an array of {type: "text", text: ...} parts.
std::optional<ApiError> ParseContent(const json& v, const std::string& where, std::string* out) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const json& part = v[i];
      std::string p = where + "[" + std::to_string(i) + "]";
      if (!part.is_object()) return WrongType(p, "an object", part);
      auto type = part.find("type");
      if (type == part.end() || !type->is_string() || *type != "text") {
        return BadRequest(p + ".type", "'" + p +
                                           ".type' must be \"text\" (only text parts "
                                           "are supported)");
      }
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) {
        return BadRequest(p + ".text", "'" + p + ".text' must be a string");
      }
      *out += text->get<std::string>();
    }
    return std::nullopt;
  }
  return WrongType(where, "a string, an array of text parts or null", v);
}

std::optional<ApiError> ParseToolCalls(const json& v, const std::string& where,
                                       std::vector<ToolCall>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return WrongType(where, "an array", v);
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = where + "[" + std::to_string(i) + "]";
    const json& c = v[i];
    if (!c.is_object()) return WrongType(p, "an object", c);
    ToolCall call;
    if (auto id = c.find("id"); id != c.end()) {
      if (!id->is_string()) return WrongType(p + ".id", "a string", *id);
      call.id = id->get<std::string>();
    }
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) {
      return BadRequest(p + ".function", "'" + p + ".function' must be an object");
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) {
      return BadRequest(p + ".function.name", "'" + p + ".function.name' must be a string");
    }
    call.name = name->get<std::string>();
    if (auto args = fn->find("arguments"); args != fn->end()) {
      if (args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args->is_object()) {
        call.arguments = args->dump();
      } else {
        return WrongType(p + ".function.arguments", "a string", *args);
      }
    }
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseMessages(const json& v, std::vector<ChatMessage>* out) {
  if (!v.is_array()) return WrongType("messages", "an array", v);
  if (v.empty()) return BadRequest("messages", "'messages' must not be empty");
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) return WrongType(p, "an object", m);
    ChatMessage msg;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return BadRequest(p + ".role", "'" + p + ".role' must be a string");
    }
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      return BadRequest(p + ".role", "'" + p +
                                         ".role' must be one of system, user, "
                                         "assistant, tool; got \"" +
                                         msg.role + "\"");
    }
    if (auto c = m.find("content"); c != m.end()) {
      if (auto err = ParseContent(*c, p + ".content", &msg.content)) return err;
    }
    if (auto n = m.find("name"); n != m.end() && !n->is_null()) {
      if (!n->is_string()) return WrongType(p + ".name", "a string", *n);
      msg.name = n->get<std::string>();
    }
    if (auto tc = m.find("tool_calls"); tc != m.end()) {
      if (msg.role != "assistant") {
        return BadRequest(p + ".tool_calls", "'" + p +
                                                 ".tool_calls' is only valid on "
                                                 "assistant messages");
      }
      if (auto err = ParseToolCalls(*tc, p + ".tool_calls", &msg.tool_calls)) return err;
    }
    if (msg.role == "tool") {
      auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string()) {
        return BadRequest(p + ".tool_call_id",
                          "'" + p + ".tool_call_id' must be a string on tool messages");
      }
      msg.tool_call_id = id->get<std::string>();
    }
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseTools(const json& v, std::vector<ToolSpec>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return WrongType("tools", "an array", v);
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const json& t = v[i];
    if (!t.is_object()) return WrongType(p, "an object", t);
    auto type = t.find("type");
    if (type != t.end() && (!type->is_string() || *type != "function")) {
      return BadRequest(p + ".type", "'" + p + ".type' must be \"function\"");
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) {
      return BadRequest(p + ".function", "'" + p + ".function' must be an object");
    }
    ToolSpec spec;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return BadRequest(p + ".function.name",
                        "'" + p + ".function.name' must be a non-empty string");
    }
    spec.name = name->get<std::string>();
    if (auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
      if (!d->is_string()) return WrongType(p + ".function.description", "a string", *d);
      spec.description = d->get<std::string>();
    }
    if (auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
      if (!params->is_object()) {
        return WrongType(p + ".function.parameters", "an object", *params);
      }
      spec.parameters = *params;
    }
    for (const ToolSpec& other : *out) {
      if (other.name == spec.name) {
        return BadRequest(p + ".function.name", "duplicate tool name \"" + spec.name + "\"");
      }
    }
    out->push_back(std::move(spec));
  }
  return std::nullopt;
}

std::optional<ApiError> ParseToolChoice(const json& v, CompletionRequest* req) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "none") {
      req->tool_choice = ToolChoice::kNone;
    } else if (s == "auto") {
      req->tool_choice = ToolChoice::kAuto;
    } else if (s == "required") {
      req->tool_choice = ToolChoice::kRequired;
    } else {
      return BadRequest("tool_choice",
                        "'tool_choice' must be none, auto, required or "
                        "{\"type\": \"function\", ...}; got \"" +
                            s + "\"");
    }
  } else if (v.is_object()) {
    auto fn = v.find("function");
    if (fn == v.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      return BadRequest("tool_choice.function.name",
                        "'tool_choice.function.name' must be a string");
    }
    req->tool_choice = ToolChoice::kNamed;
    req->tool_choice_name = (*fn)["name"].get<std::string>();
  } else {
    return WrongType("tool_choice", "a string or an object", v);
  }
  return std::nullopt;
}

// Reads an optional number field; false with *err set on a wrong type.
bool NumberField(const json& body, const char* key, std::optional<double>* out,
                 std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = WrongType(key, "a number", *it);
    return false;
  }
  *out = it->get<double>();
  return true;
}

bool IntField(const json& body, const char* key, std::optional<int64_t>* out,
              std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e15) {
      *out = static_cast<int64_t>(d);
      return true;
    }
  }
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    *err = WrongType(key, "an integer", *it);
    return false;
  }
  if (it->is_number_unsigned()) {
    *out = static_cast<int64_t>(it->get<uint64_t>());
  } else {
    *out = it->get<int64_t>();
  }
  return true;
}

bool BoolField(const json& body, const char* key, bool* out, std::optional<ApiError>* err) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = WrongType(key, "a boolean", *it);
    return false;
  }
  *out = it->get<bool>();
  return true;
}

// After ParseMessages succeeded on the same body: tool-call arguments sent as objects
// become JSON text with their keys in the order received (ParseToolCalls, on the sorted
// json, dumped them sorted).
void KeepArgumentsOrder(const nlohmann::ordered_json& msgs, std::vector<ChatMessage>* out) {
  if (!msgs.is_array() || msgs.size() != out->size()) return;
  for (size_t i = 0; i < out->size(); ++i) {
    const nlohmann::ordered_json& m = msgs[i];
    auto tc = m.find("tool_calls");
    if (tc == m.end() || !tc->is_array()) continue;
    std::vector<ToolCall>& calls = (*out)[i].tool_calls;
    if (tc->size() != calls.size()) continue;
    for (size_t j = 0; j < calls.size(); ++j) {
      auto fn = (*tc)[j].find("function");
      if (fn == (*tc)[j].end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args != fn->end() && args->is_object()) calls[j].arguments = args->dump();
    }
  }
}

// After ParseTools succeeded on the same body: each schema with its keys as received.
void KeepParametersOrder(const nlohmann::ordered_json& tools, std::vector<ToolSpec>* out) {
  if (!tools.is_array() || tools.size() != out->size()) return;
  for (size_t i = 0; i < out->size(); ++i) {
    auto fn = tools[i].find("function");
    if (fn == tools[i].end() || !fn->is_object()) continue;
    auto params = fn->find("parameters");
    if (params != fn->end() && params->is_object()) (*out)[i].parameters_ordered = *params;
  }
}

}  // namespace

std::string ApiError::Body() const {
  json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiError BadRequest(std::string param, std::string message) {
  ApiError e;
  e.http_status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body_text,
                                                                 bool chat) {
  CompletionRequest req;
  req.chat = chat;
  // Parsed once keeping the client's key order (for what the chat template sees) and
  // converted for validation and the rest, which do not depend on key order.
  nlohmann::ordered_json ordered =
      nlohmann::ordered_json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (ordered.is_discarded()) {
    ApiError e = BadRequest("", "request body is not valid JSON");
    e.code = "invalid_json";
    return e;
  }
  json body = ordered;
  if (!body.is_object()) return WrongType("body", "a JSON object", body);
  req.raw = body;

  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) {
    return BadRequest("model", "'model' must be a string naming a served model (GET /v1/models)");
  }
  req.model = model->get<std::string>();

  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end()) return BadRequest("messages", "'messages' is required");
    if (auto err = ParseMessages(*msgs, &req.messages)) return *err;
    KeepArgumentsOrder(ordered["messages"], &req.messages);
    if (auto t = body.find("tools"); t != body.end()) {
      if (auto err = ParseTools(*t, &req.tools)) return *err;
      KeepParametersOrder(ordered["tools"], &req.tools);
    }
    if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
      if (auto err = ParseToolChoice(*tc, &req)) return *err;
    } else if (req.tools.empty()) {
      req.tool_choice = ToolChoice::kNone;
    }
    if (req.tools.empty() &&
        (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed)) {
      return OutOfRange("tool_choice", "'tool_choice' requires a non-empty 'tools' list");
    }
    if (req.tool_choice == ToolChoice::kNamed) {
      bool found = false;
      for (const ToolSpec& t : req.tools) found |= t.name == req.tool_choice_name;
      if (!found) {
        return OutOfRange(
            "tool_choice.function.name",
            "tool_choice names \"" + req.tool_choice_name + "\", which is not in 'tools'");
      }
    }
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end()) return BadRequest("prompt", "'prompt' is required");
    if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
      req.prompt = (*prompt)[0].get<std::string>();
    } else if (prompt->is_string()) {
      req.prompt = prompt->get<std::string>();
    } else {
      return WrongType("prompt", "a string", *prompt);
    }
  }

  std::optional<ApiError> err;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k, seed, max_tokens, max_completion_tokens, n, top_logprobs;
  if (!NumberField(body, "temperature", &temperature, &err) ||
      !NumberField(body, "top_p", &top_p, &err) || !IntField(body, "top_k", &top_k, &err) ||
      !IntField(body, "seed", &seed, &err) || !IntField(body, "max_tokens", &max_tokens, &err) ||
      !IntField(body, "max_completion_tokens", &max_completion_tokens, &err) ||
      !IntField(body, "n", &n, &err) || !BoolField(body, "stream", &req.stream, &err)) {
    return *err;
  }
  if (auto lp = body.find("logprobs"); lp != body.end() && !lp->is_null()) {
    if (chat) {
      if (!BoolField(body, "logprobs", &req.logprobs, &err)) return *err;
      if (!IntField(body, "top_logprobs", &top_logprobs, &err)) return *err;
    } else {
      // Legacy completions: logprobs is the number of top alternatives.
      if (!IntField(body, "logprobs", &top_logprobs, &err)) return *err;
      req.logprobs = true;
    }
  }
  if (top_logprobs) {
    if (*top_logprobs < 0 || *top_logprobs > 20) {
      return OutOfRange(chat ? "top_logprobs" : "logprobs",
                        "top_logprobs must be between 0 and 20");
    }
    req.top_logprobs = static_cast<int>(*top_logprobs);
  }
  if (n && *n != 1) return OutOfRange("n", "only n = 1 is supported");
  if (temperature) {
    if (!std::isfinite(*temperature) || *temperature < 0) {
      return OutOfRange("temperature", "'temperature' must be >= 0");
    }
    req.sampling.temperature = static_cast<float>(*temperature);
  }
  if (top_p) {
    if (!(*top_p > 0 && *top_p <= 1)) return OutOfRange("top_p", "'top_p' must be in (0, 1]");
    req.sampling.top_p = static_cast<float>(*top_p);
  }
  if (top_k) {
    if (*top_k < 0 || *top_k > std::numeric_limits<int32_t>::max()) {
      return OutOfRange("top_k", "'top_k' must be >= 0 (0: no limit)");
    }
    req.sampling.top_k = static_cast<int32_t>(*top_k);
  }
  if (seed) req.seed = static_cast<uint64_t>(*seed);
  std::optional<int64_t> limit = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (limit) {
    if (*limit < 1 || *limit > 1 << 20) {
      return OutOfRange(max_completion_tokens ? "max_completion_tokens" : "max_tokens",
                        "the token limit must be a positive integer");
    }
    req.sampling.max_tokens = static_cast<int32_t>(*limit);
  } else {
    req.sampling.max_tokens = 128;
  }
  if (auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
    if (stop->is_string()) {
      req.sampling.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 4) {
      for (const json& s : *stop) {
        if (!s.is_string() || s.get<std::string>().empty()) {
          return BadRequest("stop", "'stop' entries must be non-empty strings");
        }
        req.sampling.stop.push_back(s.get<std::string>());
      }
    } else {
      return BadRequest("stop", "'stop' must be a string or an array of up to 4 strings");
    }
  }
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    if (!BoolField(*so, "include_usage", &req.include_usage_in_stream, &err)) return *err;
  }
  if (auto gc = body.find("guided_choice"); gc != body.end() && !gc->is_null()) {
    if (!gc->is_array() || gc->empty()) {
      return BadRequest("guided_choice", "'guided_choice' must be a non-empty array of strings");
    }
    for (const json& s : *gc) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        return BadRequest("guided_choice", "'guided_choice' entries must be non-empty strings");
      }
      req.guided_choice.push_back(s.get<std::string>());
    }
    if (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed) {
      return OutOfRange("guided_choice",
                        "'guided_choice' cannot be combined with a forced "
                        "tool_choice");
    }
  }
  req.raw_ordered = std::move(ordered);
  return req;
}

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
        ojson args = ojson::parse(c.arguments, nullptr, false);
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
    if (!t.description.empty()) fn["description"] = t.description;
    // parameters_ordered is set from the body; a ToolSpec built in code may set only
    // parameters.
    bool have_ordered = !t.parameters_ordered.empty() || t.parameters.empty();
    fn["parameters"] = have_ordered ? t.parameters_ordered : ojson(t.parameters);
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

namespace {
std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}
}  // namespace

ExtractedToolCalls ExtractToolCalls(std::string_view text, std::string_view id_prefix) {
  static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ExtractedToolCalls out;
  std::string rest;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) break;
    size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) break;
    std::string_view inner = Trim(text.substr(open + kOpen.size(), close - open - kOpen.size()));
    json call = json::parse(inner, nullptr, false);
    bool ok = !call.is_discarded() && call.is_object() && call.contains("name") &&
              call["name"].is_string();
    if (!ok) {
      // Not a well-formed call: leave the text as content.
      rest.append(text.substr(pos, close + kClose.size() - pos));
      pos = close + kClose.size();
      continue;
    }
    rest.append(text.substr(pos, open - pos));
    ToolCall tc;
    tc.id = std::string("call_") + std::string(id_prefix) + "_" + std::to_string(out.calls.size());
    tc.name = call["name"].get<std::string>();
    json args = call.contains("arguments") ? call["arguments"] : json::object();
    tc.arguments = args.is_string() ? args.get<std::string>()
                                    : args.dump(-1, ' ', false, json::error_handler_t::replace);
    out.calls.push_back(std::move(tc));
    pos = close + kClose.size();
  }
  if (pos < text.size()) rest.append(text.substr(pos));
  out.content = std::string(Trim(rest));
  return out;
}

json TraceExtension(const CompletionResult& r) {
  json digests = json::array();
  for (uint64_t d : r.logits_digests) {
    char buf[17];
    snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(d));
    digests.push_back(buf);
  }
  return {{"call_index", r.call_index},
          {"seed", r.seed},
          {"token_ids", r.token_ids},
          {"logits_digests", digests},
          {"cached_prompt_tokens", r.cached_prompt_tokens}};
}

namespace {

json Usage(const CompletionResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_prompt_tokens}}}};
}

json BytesOf(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

json ToolCallsJson(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = i;
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string ChatCompletionBody(const CompletionResult& r, bool with_logprobs) {
  json message = {{"role", "assistant"}};
  message["content"] = r.text.empty() && !r.tool_calls.empty() ? json(nullptr) : json(r.text);
  if (!r.tool_calls.empty()) message["tool_calls"] = ToolCallsJson(r.tool_calls, false);
  json choice = {{"index", 0}, {"message", message}, {"finish_reason", r.finish_reason}};
  if (with_logprobs) {
    json content = json::array();
    for (const TokenLogprob& t : r.logprobs) {
      json top = json::array();
      for (const auto& [tok, lp] : t.top) {
        top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", BytesOf(tok)}});
      }
      content.push_back({{"token", t.token},
                         {"logprob", t.logprob},
                         {"bytes", BytesOf(t.token)},
                         {"top_logprobs", top}});
    }
    choice["logprobs"] = {{"content", content}};
  } else {
    choice["logprobs"] = nullptr;
  }
  json body = {{"id", r.id},
               {"object", "chat.completion"},
               {"created", r.created},
               {"model", r.model},
               {"system_fingerprint", r.system_fingerprint},
               {"choices", json::array({choice})},
               {"usage", Usage(r)},
               {"trace", TraceExtension(r)}};
  return Dump(body);
}

std::string CompletionBody(const CompletionResult& r, bool with_logprobs) {
  json choice = {{"index", 0}, {"text", r.text}, {"finish_reason", r.finish_reason}};
  if (with_logprobs) {
    json tokens = json::array(), lps = json::array(), tops = json::array();
    for (const TokenLogprob& t : r.logprobs) {
      tokens.push_back(t.token);
      lps.push_back(t.logprob);
      json top = json::object();
      for (const auto& [tok, lp] : t.top) top[tok] = lp;
      tops.push_back(top);
    }
    choice["logprobs"] = {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}};
  } else {
    choice["logprobs"] = nullptr;
  }
  json body = {{"id", r.id},
               {"object", "text_completion"},
               {"created", r.created},
               {"model", r.model},
               {"choices", json::array({choice})},
               {"usage", Usage(r)},
               {"trace", TraceExtension(r)}};
  return Dump(body);
}

std::string SseData(const json& chunk) {
  return "data: " + Dump(chunk) + "\n\n";
}

json ChatChunk(const CompletionResult& h, const json& delta, const json& finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices",
           json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish_reason}}})}};
}

json TextChunk(const CompletionResult& h, const std::string& text, const json& finish_reason) {
  return {
      {"id", h.id},
      {"object", "text_completion"},
      {"created", h.created},
      {"model", h.model},
      {"choices", json::array({{{"index", 0}, {"text", text}, {"finish_reason", finish_reason}}})}};
}

}  // namespace trace::recorder
