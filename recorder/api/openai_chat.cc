#include "recorder/api/openai_chat.h"

#include <string>
#include <unordered_set>

#include "base/escape.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/request_fields.h"
#include "recorder/api/sse.h"
#include "recorder/api/tool_fields.h"

namespace trace::recorder {
namespace {

using nlohmann::json;

// Message content: a string, null, or an array of {type: "text", text: ...} parts (and, in
// an assistant message, {type: "refusal", refusal: ...} parts), joined.
std::optional<ApiError> ParseContent(const json& v, const std::string& where, bool assistant,
                                     std::string* out) {
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
      const bool refusal = assistant && type != part.end() && *type == "refusal";
      if (!refusal && (type == part.end() || !type->is_string() || *type != "text")) {
        return BadRequest(p + ".type", "'" + p + ".type' must be \"text\"" +
                                           (assistant ? " or \"refusal\"" : "") +
                                           " (only text parts are supported)");
      }
      const char* field = refusal ? "refusal" : "text";
      auto text = part.find(field);
      if (text == part.end() || !text->is_string()) {
        return BadRequest(p + "." + field, "'" + p + "." + field + "' must be a string");
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

// The id given to a call of the deprecated functions API in message i: "call_fn_<i>".
constexpr std::string_view kLegacyCallIdPrefix = "call_fn_";

// A tool message must answer a call of the assistant message before it (OpenAI: "'tool'
// must be a response to a preceding message with 'tool_calls'").
std::optional<ApiError> CheckToolResults(const std::vector<ChatMessage>& messages) {
  std::optional<size_t> i = FindToolResultWithoutCall(messages, /*same_turn=*/true);
  if (!i) return std::nullopt;
  const std::string p = "messages[" + std::to_string(*i) + "]";
  return BadRequest(p + ".tool_call_id",
                    "'" + p + "' (role tool) answers tool call \"" +
                        EscapeForDisplay(messages[*i].tool_call_id) +
                        "\", which the assistant message before it did not make: a tool "
                        "message must follow the assistant message with that id in its "
                        "'tool_calls'");
}

// The legacy spelling of one call (OpenAI's deprecated functions API): an assistant
// message's `function_call: {name, arguments}`. It gets the id `id`, which the function
// message answering it takes as its tool_call_id.
std::optional<ApiError> ParseLegacyFunctionCall(const json& v, const std::string& where,
                                                const std::string& id, ChatMessage* msg) {
  if (!v.is_object()) return WrongType(where, "an object", v);
  json as_tool_call = {{"id", id}, {"type", "function"}, {"function", v}};
  std::vector<ToolCall> calls;
  if (auto err = ParseToolCalls(json::array({as_tool_call}), where, &calls)) {
    err->param = where;  // the path ParseToolCalls built names the array, not this field
    return err;
  }
  msg->tool_calls.push_back(std::move(calls.front()));
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
    const bool legacy_function = msg.role == "function";
    if (legacy_function) msg.role = "tool";  // the deprecated functions API's answer
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      return BadRequest(p + ".role", "'" + p +
                                         ".role' must be one of system, developer, user, "
                                         "assistant, tool, function; got \"" +
                                         EscapeForDisplay(msg.role) + "\"");
    }
    if (auto c = m.find("content"); c != m.end()) {
      if (auto err = ParseContent(*c, p + ".content", msg.role == "assistant", &msg.content)) {
        return err;
      }
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
    if (auto fc = m.find("function_call"); fc != m.end() && !fc->is_null()) {
      if (msg.role != "assistant" || !msg.tool_calls.empty()) {
        return BadRequest(p + ".function_call", "'" + p +
                                                    ".function_call' is only valid on assistant "
                                                    "messages without tool_calls");
      }
      if (auto err =
              ParseLegacyFunctionCall(*fc, p + ".function_call",
                                      std::string(kLegacyCallIdPrefix) + std::to_string(i), &msg)) {
        return err;
      }
    }
    if (legacy_function) {
      // It answers the function call of the nearest assistant message before it.
      if (msg.name.empty()) {
        return BadRequest(p + ".name", "'" + p +
                                           ".name' must name the function on function "
                                           "messages");
      }
      for (size_t k = out->size(); k-- > 0;) {
        const ChatMessage& before = (*out)[k];
        if (before.role == "assistant" && !before.tool_calls.empty()) {
          msg.tool_call_id = before.tool_calls.front().id;
          break;
        }
      }
    } else if (msg.role == "tool") {
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

// The deprecated `functions` ([{name, description, parameters}]) and `function_call`
// ("none", "auto" or {"name": ...}) as tools and tool_choice. OpenAI still serves them: at
// most one call, answered as message.function_call with finish_reason "function_call".
std::optional<ApiError> ParseLegacyFunctions(const nlohmann::ordered_json& body,
                                             CompletionRequest* req) {
  auto fns = body.find("functions");
  auto choice = body.find("function_call");
  const bool have_fns = fns != body.end() && !fns->is_null();
  const bool have_choice = choice != body.end() && !choice->is_null();
  if (!have_fns && !have_choice) return std::nullopt;
  if (body.contains("tools") && !body["tools"].is_null() && have_fns) {
    return BadRequest("functions", "'functions' and 'tools' cannot both be given; send 'tools'");
  }
  if (body.contains("tool_choice") && !body["tool_choice"].is_null() && have_choice) {
    return BadRequest("function_call",
                      "'function_call' and 'tool_choice' cannot both be given; send "
                      "'tool_choice'");
  }
  req->legacy_functions = true;
  req->parallel_tool_calls = false;
  if (have_fns) {
    if (!fns->is_array()) return WrongType("functions", "an array", json(*fns));
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < fns->size(); ++i) {
      const std::string p = "functions[" + std::to_string(i) + "]";
      if (!(*fns)[i].is_object()) return WrongType(p, "an object", json((*fns)[i]));
      if (auto err = ParseFunctionTool((*fns)[i], p, "parameters", false, &req->tools, &names))
        return err;
    }
  }
  req->tool_choice = req->tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (!have_choice) return std::nullopt;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c != "none" && c != "auto") {
      return BadRequest("function_call",
                        "'function_call' must be \"none\", \"auto\" or "
                        "{\"name\": ...}; got \"" +
                            EscapeForDisplay(c) + "\"");
    }
    req->tool_choice = c == "none" ? ToolChoice::kNone : ToolChoice::kAuto;
    return std::nullopt;
  }
  auto name = choice->is_object() ? choice->find("name") : choice->end();
  if (!choice->is_object() || name == choice->end() || !name->is_string()) {
    return BadRequest("function_call.name", "'function_call.name' must be a string");
  }
  req->tool_choice = ToolChoice::kNamed;
  req->tool_choice_name = name->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ParseChatTools(const nlohmann::ordered_json& v,
                                       std::vector<ToolSpec>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return WrongType("tools", "an array", json(v));
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const nlohmann::ordered_json& t = v[i];
    if (!t.is_object()) return WrongType(p, "an object", json(t));
    auto type = t.find("type");
    if (type != t.end() && (!type->is_string() || *type != "function")) {
      return BadRequest(p + ".type", "'" + p + ".type' must be \"function\"");
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) {
      return BadRequest(p + ".function", "'" + p + ".function' must be an object");
    }
    if (auto err = ParseFunctionTool(*fn, p + ".function", "parameters", false, out, &names))
      return err;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatToolChoice(const json& v, CompletionRequest* req) {
  if (v.is_string()) {
    if (auto err =
            ParseToolChoiceString(v.get<std::string>(), "{\"type\": \"function\", ...}", req)) {
      return err;
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
    auto js = v.find("json_schema");
    if (js == v.end() || !js->is_object()) {
      return BadRequest("response_format.json_schema",
                        "'response_format.json_schema' must be an object with 'name' and "
                        "'schema'");
    }
    if (auto e = ParseJsonSchemaFormat(*js, "response_format.json_schema", "", false, out)) {
      return e;
    }
  } else {
    return BadRequest("response_format.type",
                      "'response_format.type' must be one of text, json_object, json_schema; "
                      "got \"" +
                          EscapeForDisplay(t) + "\"");
  }
  return std::nullopt;
}

// The deprecated functions API's spelling of one call: {name, arguments}.
json LegacyFunctionCallJson(const ToolCall& c) {
  return {{"name", c.name}, {"arguments", c.arguments}};
}

// finish_reason as the request's API spells it: "function_call" for the functions API.
std::string FinishReason(const CompletionResult& r, bool legacy_functions) {
  return legacy_functions && r.finish_reason == "tool_calls" ? "function_call" : r.finish_reason;
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
      : header_(header),
        logprobs_(req.logprobs),
        usage_(req.include_usage_in_stream),
        hold_role_(MayCallTools(req)),
        legacy_functions_(req.legacy_functions) {}

  // An answer that may be a tool call is sent whole at the end, and so is its first chunk:
  // OpenAI opens a tool-call stream with content null, a text stream with content "" (an
  // SDK that sees "" before tool calls makes an empty text part of it).
  std::string Begin() override {
    if (hold_role_) return "";
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
    if (hold_role_) {
      const bool calls_only = rest.empty() && !r.tool_calls.empty();
      out += SseData(
          ChatChunk(header_, {{"role", "assistant"}, {"content", calls_only ? json() : json(rest)}},
                    Logprobs(rest_logprobs), nullptr));
    } else if (!rest.empty() || (logprobs_ && !rest_logprobs.empty())) {
      out += SseData(ChatChunk(header_, {{"content", rest}}, Logprobs(rest_logprobs), nullptr));
    }
    if (!r.tool_calls.empty()) {
      json delta = legacy_functions_
                       ? json{{"function_call", LegacyFunctionCallJson(r.tool_calls.front())}}
                       : json{{"tool_calls", ChatToolCallsJson(r.tool_calls, true)}};
      out += SseData(ChatChunk(header_, delta, nullptr, nullptr));
    }
    return out + StreamTail(ChatChunk(header_, json::object(), nullptr,
                                      FinishReason(r, legacy_functions_)),
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
  bool hold_role_;
  bool legacy_functions_;
};

}  // namespace

std::variant<CompletionRequest, ApiError> ParseChatRequest(std::string_view body_text) {
  CompletionRequest req;
  req.chat = true;
  auto parsed = ParseOpenAiBody(body_text, &req, /*legacy_functions=*/true);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  nlohmann::ordered_json ordered = std::move(std::get<nlohmann::ordered_json>(parsed));
  const json& body = req.raw;

  auto msgs = body.find("messages");
  if (msgs == body.end()) return BadRequest("messages", "'messages' is required");
  if (auto err = ParseMessages(*msgs, &req.messages)) return *err;
  KeepArgumentsOrder(ordered["messages"], &req.messages);
  if (auto err = CheckToolResults(req.messages)) return *err;
  if (auto t = ordered.find("tools"); t != ordered.end()) {
    if (auto err = ParseChatTools(*t, &req.tools)) return *err;
  }
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (auto err = ParseChatToolChoice(*tc, &req)) return *err;
  } else if (req.tools.empty()) {
    req.tool_choice = ToolChoice::kNone;
  }
  if (auto err = ParseLegacyFunctions(ordered, &req)) return *err;
  if (auto err = CheckToolChoice(
          req, req.legacy_functions ? "function_call.name" : "tool_choice.function.name")) {
    return *err;
  }
  std::optional<ApiError> err;
  if (!BoolField(body, "parallel_tool_calls", &req.parallel_tool_calls, &err)) return *err;
  if (req.legacy_functions) req.parallel_tool_calls = false;
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

std::string ChatCompletionBody(const CompletionResult& r, bool with_logprobs,
                               bool legacy_functions) {
  json message = {{"role", "assistant"}};
  message["content"] = r.text.empty() && !r.tool_calls.empty() ? json(nullptr) : json(r.text);
  if (!r.tool_calls.empty()) {
    if (legacy_functions) {
      message["function_call"] = LegacyFunctionCallJson(r.tool_calls.front());
    } else {
      message["tool_calls"] = ChatToolCallsJson(r.tool_calls, false);
    }
  }
  message["refusal"] = nullptr;
  json choice = {
      {"index", 0}, {"message", message}, {"finish_reason", FinishReason(r, legacy_functions)}};
  choice["logprobs"] =
      with_logprobs ? json{{"content", LogprobsContent(r.logprobs)}} : json(nullptr);
  return DumpJson(ResponseJson(r, "chat.completion", std::move(choice)));
}

ResponseSummary ReadChatResponse(const json& body) {
  ResponseSummary s;
  s.id = StringOr(body, "id");
  s.model = StringOr(body, "model");
  const json& choice = FirstChoice(body);
  s.finish_reason = OpenAiFinishReason(StringOr(choice, "finish_reason"));
  const json& message = MemberOrNull(choice, "message");
  s.text = StringOr(message, "content");
  const json& calls = MemberOrNull(message, "tool_calls");
  if (calls.is_array()) {
    for (const json& c : calls) {
      const json& fn = MemberOrNull(c, "function");
      s.tool_calls.push_back(
          {StringOr(c, "id"), StringOr(fn, "name"), StringOr(fn, "arguments"), ""});
    }
  }
  if (const json& fn = MemberOrNull(message, "function_call"); fn.is_object()) {
    s.tool_calls.push_back({"", StringOr(fn, "name"), StringOr(fn, "arguments"), ""});
  }
  ReadOpenAiUsage(MemberOrNull(body, "usage"), &s);
  return s;
}

json FoldChatStream(std::string_view event_stream) {
  json out;
  std::string content;
  json tool_calls = json::array();
  json function_call = nullptr;  // the deprecated functions API's one call
  json logprobs = nullptr;
  json finish_reason = nullptr;
  for (const SseEvent& e : ParseSse(event_stream)) {
    if (e.data == "[DONE]") continue;
    json chunk = ParseJsonOrDiscarded(e.data);
    if (!chunk.is_object()) continue;
    if (chunk.contains("error")) return chunk;  // the stream ended in an error
    if (out.is_null()) {
      out = {{"id", StringOr(chunk, "id")},
             {"object", "chat.completion"},
             {"created", IntOr(chunk, "created")},
             {"model", StringOr(chunk, "model")}};
      if (chunk.contains("system_fingerprint")) {
        out["system_fingerprint"] = chunk["system_fingerprint"];
      }
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) out["usage"] = chunk["usage"];
    if (chunk.contains("trace")) out["trace"] = chunk["trace"];
    const json& choice = FirstChoice(chunk);
    if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) {
      finish_reason = choice["finish_reason"];
    }
    const json& lp = MemberOrNull(choice, "logprobs");
    if (lp.is_object() && lp.contains("content") && lp["content"].is_array()) {
      if (logprobs.is_null()) logprobs = {{"content", json::array()}};
      for (const json& t : lp["content"]) logprobs["content"].push_back(t);
    }
    const json& delta = MemberOrNull(choice, "delta");
    if (delta.contains("content") && delta["content"].is_string()) {
      content += delta["content"].get<std::string>();
    }
    if (const json& fc = MemberOrNull(delta, "function_call"); fc.is_object()) {
      if (function_call.is_null()) function_call = {{"name", ""}, {"arguments", ""}};
      for (const char* key : {"name", "arguments"}) {
        if (fc.contains(key) && fc[key].is_string()) {
          function_call[key] = function_call[key].get<std::string>() + fc[key].get<std::string>();
        }
      }
    }
    const json& calls = MemberOrNull(delta, "tool_calls");
    if (!calls.is_array()) continue;
    for (const json& tc : calls) {
      size_t index = tc.contains("index") && tc["index"].is_number_unsigned()
                         ? tc["index"].get<size_t>()
                         : tool_calls.size();
      if (index > 4096) continue;  // not a real stream
      while (tool_calls.size() <= index) {
        tool_calls.push_back(
            {{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
      }
      json& call = tool_calls[index];
      if (tc.contains("id") && tc["id"].is_string()) call["id"] = tc["id"];
      const json& fn = MemberOrNull(tc, "function");
      for (const char* key : {"name", "arguments"}) {
        if (fn.contains(key) && fn[key].is_string()) {
          call["function"][key] =
              call["function"][key].get<std::string>() + fn[key].get<std::string>();
        }
      }
    }
  }
  if (out.is_null()) return out;
  json message = {{"role", "assistant"}};
  // As ChatCompletionBody writes it: null content beside tool calls.
  const bool calls = !tool_calls.empty() || !function_call.is_null();
  message["content"] = content.empty() && calls ? json(nullptr) : json(content);
  if (!tool_calls.empty()) message["tool_calls"] = tool_calls;
  if (!function_call.is_null()) message["function_call"] = function_call;
  message["refusal"] = nullptr;
  out["choices"] = json::array({{{"index", 0},
                                 {"message", message},
                                 {"logprobs", logprobs},
                                 {"finish_reason", finish_reason}}});
  return out;
}

const WireFormat& OpenAiChatFormat() {
  static const OpenAiFormat format(
      {kApiChatCompletions, "/v1/chat/completions", "chatcmpl-", &ParseChatRequest,
       [](const CompletionRequest& req, const CompletionResult& r) {
         return ChatCompletionBody(r, req.logprobs, req.legacy_functions);
       },
       [](const CompletionRequest& req, const CompletionResult& h)
           -> std::unique_ptr<StreamEncoder> { return std::make_unique<ChatStream>(req, h); },
       &ReadChatResponse, &FoldChatStream});
  return format;
}

}  // namespace trace::recorder
