#include "recorder/api/openai_chat.h"

#include <regex>

#include "base/escape.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/request_fields.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

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
                                         EscapeForDisplay(msg.role) + "\"");
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
    if (auto strict = fn->find("strict"); strict != fn->end() && !strict->is_null()) {
      if (!strict->is_boolean()) return WrongType(p + ".function.strict", "a boolean", *strict);
      spec.strict = strict->get<bool>();
    }
    for (const ToolSpec& other : *out) {
      if (other.name == spec.name) {
        return BadRequest(p + ".function.name",
                          "duplicate tool name \"" + EscapeForDisplay(spec.name) + "\"");
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
                            EscapeForDisplay(s) + "\"");
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

std::optional<ApiError> ParseResponseFormat(const nlohmann::ordered_json& v, ResponseFormat* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return WrongType("response_format", "an object", json(v));
  auto type = v.find("type");
  if (type == v.end() || !type->is_string()) {
    return BadRequest("response_format.type",
                      "'response_format.type' must be one of text, json_object, json_schema");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") {
    out->kind = ResponseFormat::kText;
  } else if (t == "json_object") {
    out->kind = ResponseFormat::kJsonObject;
  } else if (t == "json_schema") {
    out->kind = ResponseFormat::kJsonSchema;
    auto js = v.find("json_schema");
    if (js == v.end() || !js->is_object()) {
      return BadRequest("response_format.json_schema",
                        "'response_format.json_schema' must be an object with 'name' and "
                        "'schema'");
    }
    auto name = js->find("name");
    static const std::regex kName("^[a-zA-Z0-9_-]{1,64}$");
    if (name == js->end() || !name->is_string() ||
        !std::regex_match(name->get<std::string>(), kName)) {
      return BadRequest("response_format.json_schema.name",
                        "'response_format.json_schema.name' must be 1 to 64 letters, digits, "
                        "'_' or '-'");
    }
    out->name = name->get<std::string>();
    if (auto schema = js->find("schema"); schema != js->end() && !schema->is_null()) {
      if (!schema->is_object() && !schema->is_boolean()) {
        return WrongType("response_format.json_schema.schema", "an object", json(*schema));
      }
      out->schema = *schema;
    }
    if (auto strict = js->find("strict"); strict != js->end() && !strict->is_null()) {
      if (!strict->is_boolean()) {
        return WrongType("response_format.json_schema.strict", "a boolean", json(*strict));
      }
      out->strict = strict->get<bool>();
    }
  } else {
    return BadRequest("response_format.type",
                      "'response_format.type' must be one of text, json_object, json_schema; "
                      "got \"" +
                          EscapeForDisplay(t) + "\"");
  }
  return std::nullopt;
}

json LogprobsContent(const std::vector<TokenLogprob>& logprobs) {
  json content = json::array();
  for (const TokenLogprob& t : logprobs) {
    json top = json::array();
    for (const auto& [tok, lp] : t.top) {
      top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", BytesJson(tok)}});
    }
    content.push_back({{"token", t.token},
                       {"logprob", t.logprob},
                       {"bytes", BytesJson(t.token)},
                       {"top_logprobs", top}});
  }
  return content;
}

json ChatChunk(const CompletionResult& h, const json& delta, const json& logprobs,
               const json& finish_reason) {
  return ChunkJson(
      h, "chat.completion.chunk",
      {{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_reason}});
}

class ChatStream : public StreamEncoder {
 public:
  ChatStream(const CompletionRequest& req, const CompletionResult& header)
      : header_(header), logprobs_(req.logprobs), usage_(req.include_usage_in_stream) {}

  std::string Begin() override {
    return SseData(ChatChunk(header_, {{"role", "assistant"}, {"content", ""}},
                             logprobs_ ? json{{"content", json::array()}} : json(nullptr),
                             nullptr));
  }

  std::string Text(const std::string& delta, const std::vector<TokenLogprob>& lps) override {
    return SseData(ChatChunk(header_, {{"content", delta}}, Logprobs(lps), nullptr));
  }

  std::string End(const CompletionResult& r, const std::string& rest,
                  const std::vector<TokenLogprob>& rest_logprobs) override {
    std::string out;
    if (!rest.empty() || (logprobs_ && !rest_logprobs.empty())) {
      out += SseData(ChatChunk(header_, {{"content", rest}}, Logprobs(rest_logprobs), nullptr));
    }
    if (!r.tool_calls.empty()) {
      out += SseData(ChatChunk(header_, {{"tool_calls", ChatToolCallsJson(r.tool_calls, true)}},
                               nullptr, nullptr));
    }
    return out + StreamTail(ChatChunk(header_, json::object(), nullptr, r.finish_reason),
                            ChatChunk(header_, json::object(), nullptr, nullptr), usage_, r);
  }

  std::string Error(const ApiError& e) override { return StreamError(e); }

 private:
  json Logprobs(const std::vector<TokenLogprob>& lps) const {
    return logprobs_ ? json{{"content", LogprobsContent(lps)}} : json(nullptr);
  }

  CompletionResult header_;
  bool logprobs_;
  bool usage_;
};

}  // namespace

std::variant<CompletionRequest, ApiError> ParseChatRequest(std::string_view body_text) {
  CompletionRequest req;
  req.chat = true;
  auto parsed = ParseOpenAiBody(body_text, &req);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  nlohmann::ordered_json ordered = std::move(std::get<nlohmann::ordered_json>(parsed));
  const json& body = req.raw;

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
      return OutOfRange("tool_choice.function.name", "tool_choice names \"" +
                                                         EscapeForDisplay(req.tool_choice_name) +
                                                         "\", which is not in 'tools'");
    }
  }
  std::optional<ApiError> err;
  if (!BoolField(body, "parallel_tool_calls", &req.parallel_tool_calls, &err)) return *err;
  if (auto rf = ordered.find("response_format"); rf != ordered.end()) {
    if (auto e = ParseResponseFormat(*rf, &req.response_format)) return *e;
  }
  if (auto e = ParseOpenAiSampling(body, &req)) return *e;
  std::optional<int64_t> top_logprobs;
  if (!BoolField(body, "logprobs", &req.logprobs, &err) ||
      !IntField(body, "top_logprobs", &top_logprobs, &err)) {
    return *err;
  }
  if (top_logprobs) {
    if (!req.logprobs) {
      return BadRequest("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    }
    if (*top_logprobs < 0 || *top_logprobs > 20) {
      return OutOfRange("top_logprobs", "'top_logprobs' must be between 0 and 20");
    }
    req.top_logprobs = static_cast<int>(*top_logprobs);
  }
  if (!req.guided_choice.empty()) {
    if (req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed) {
      return OutOfRange("guided_choice",
                        "'guided_choice' cannot be combined with a forced tool_choice");
    }
    if (req.response_format.kind != ResponseFormat::kText) {
      return OutOfRange("guided_choice",
                        "'guided_choice' cannot be combined with 'response_format'");
    }
  }
  req.raw_ordered = std::move(ordered);
  return req;
}

json ChatToolCallsJson(const std::vector<ToolCall>& calls, bool with_index) {
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

std::string ChatCompletionBody(const CompletionResult& r, bool with_logprobs) {
  json message = {{"role", "assistant"}};
  message["content"] = r.text.empty() && !r.tool_calls.empty() ? json(nullptr) : json(r.text);
  if (!r.tool_calls.empty()) message["tool_calls"] = ChatToolCallsJson(r.tool_calls, false);
  message["refusal"] = nullptr;
  json choice = {{"index", 0}, {"message", message}, {"finish_reason", r.finish_reason}};
  choice["logprobs"] =
      with_logprobs ? json{{"content", LogprobsContent(r.logprobs)}} : json(nullptr);
  return DumpJson(ResponseJson(r, "chat.completion", std::move(choice)));
}

const WireFormat& OpenAiChatFormat() {
  static const OpenAiFormat format(
      {"/v1/chat/completions", "chatcmpl-", &ParseChatRequest, &ChatCompletionBody,
       [](const CompletionRequest& req, const CompletionResult& h)
           -> std::unique_ptr<StreamEncoder> { return std::make_unique<ChatStream>(req, h); }});
  return format;
}

}  // namespace trace::recorder
