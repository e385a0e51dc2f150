#include "recorder/api/openai_responses.h"

#include <map>
#include <unordered_set>

#include "base/json_print.h"
#include "recorder/api/json_body.h"
#include "recorder/api/openai_common.h"
#include "recorder/api/request_fields.h"
#include "recorder/api/sse.h"
#include "recorder/api/tool_fields.h"

namespace trace::recorder {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

// A message's content: a string or parts of type input_text / output_text (text) or
// refusal; other parts (images, files, audio) are refused.
std::optional<ApiError> ParseMessageContent(const ojson& v, const std::string& where,
                                            std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return WrongType(where, "a string or an array of content parts", json(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& part = v[i];
    std::string p = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return WrongType(p, "an object", json(part));
    auto type = part.find("type");
    std::string t = type != part.end() && type->is_string() ? type->get<std::string>() : "";
    const char* field = t == "input_text" || t == "output_text" ? "text"
                        : t == "refusal"                        ? "refusal"
                                                                : nullptr;
    if (field == nullptr) {
      return BadRequest(FieldPath(p, "type"), "'" + FieldPath(p, "type") +
                                                  "' must be input_text or output_text (only text "
                                                  "content is supported); got \"" +
                                                  t + "\"");
    }
    std::string text;
    if (auto err = RequiredStringField(part, p, field, &text)) return err;
    *out += text;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseInputItem(const ojson& item, const std::string& where,
                                       std::vector<ChatMessage>* out) {
  if (!item.is_object()) return WrongType(where, "an object", json(item));
  auto type_it = item.find("type");
  std::string type;
  if (type_it != item.end()) {
    if (!type_it->is_string())
      return WrongType(FieldPath(where, "type"), "a string", json(*type_it));
    type = type_it->get<std::string>();
  } else if (item.contains("role")) {
    type = "message";  // an easy input message: {role, content}
  }
  ChatMessage m;
  if (auto id = item.find("id"); id != item.end() && !id->is_null()) {
    if (!id->is_string()) return WrongType(FieldPath(where, "id"), "a string", json(*id));
    m.item_id = id->get<std::string>();
  }
  if (type == "message") {
    if (auto err = RequiredStringField(item, where, "role", &m.role)) return err;
    if (m.role == "developer") m.role = "system";
    if (m.role != "user" && m.role != "assistant" && m.role != "system") {
      return BadRequest(FieldPath(where, "role"), "'" + FieldPath(where, "role") +
                                                      "' must be one of user, assistant, system, "
                                                      "developer; got \"" +
                                                      m.role + "\"");
    }
    auto content = item.find("content");
    if (content == item.end()) {
      return BadRequest(FieldPath(where, "content"),
                        "'" + FieldPath(where, "content") + "' is required");
    }
    if (auto err = ParseMessageContent(*content, FieldPath(where, "content"), &m.content))
      return err;
  } else if (type == "function_call") {
    ToolCall call;
    call.item_id = m.item_id;
    m.item_id.clear();
    if (auto err = RequiredStringField(item, where, "call_id", &call.id)) return err;
    if (auto err = RequiredStringField(item, where, "name", &call.name)) return err;
    if (auto err = RequiredStringField(item, where, "arguments", &call.arguments)) return err;
    m.role = "assistant";
    m.tool_calls.push_back(std::move(call));
  } else if (type == "function_call_output") {
    m.role = "tool";
    if (auto err = RequiredStringField(item, where, "call_id", &m.tool_call_id)) return err;
    auto output = item.find("output");
    if (output == item.end()) {
      return BadRequest(FieldPath(where, "output"),
                        "'" + FieldPath(where, "output") + "' is required");
    }
    // A string, or input_text parts.
    if (auto err = ParseMessageContent(*output, FieldPath(where, "output"), &m.content)) return err;
  } else if (type == "item_reference") {
    if (m.item_id.empty()) {
      return BadRequest(FieldPath(where, "id"),
                        "'" + FieldPath(where, "id") + "' must be a string");
    }
    m.item_reference = std::move(m.item_id);
    m.item_id.clear();
  } else if (type == "reasoning") {
    return std::nullopt;  // reasoning this model never produced: nothing to render
  } else {
    return BadRequest(FieldPath(where, "type"),
                      "'" + FieldPath(where, "type") +
                          "' must be message, function_call, function_call_output, "
                          "item_reference or reasoning; got \"" +
                          type + "\" (built-in tools are not supported)");
  }
  out->push_back(std::move(m));
  return std::nullopt;
}

std::optional<ApiError> ParseInput(const ojson& v, std::vector<ChatMessage>* out) {
  if (v.is_string()) {
    ChatMessage m;
    m.role = "user";
    m.content = v.get<std::string>();
    out->push_back(std::move(m));
    return std::nullopt;
  }
  if (!v.is_array()) return WrongType("input", "a string or an array of items", json(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (auto err = ParseInputItem(v[i], "input[" + std::to_string(i) + "]", out)) return err;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseResponsesTools(const ojson& v, std::vector<ToolSpec>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return WrongType("tools", "an array", json(v));
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const ojson& t = v[i];
    if (!t.is_object()) return WrongType(p, "an object", json(t));
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || *type != "function") {
      std::string got = type != t.end() && type->is_string() ? type->get<std::string>() : "";
      return BadRequest(FieldPath(p, "type"), "'" + FieldPath(p, "type") +
                                                  "' must be \"function\" (built-in tools are not "
                                                  "supported); got \"" +
                                                  got + "\"");
    }
    // Responses function tools are strict unless they say otherwise.
    if (auto err = ParseFunctionTool(t, p, "parameters", /*default_strict=*/true, out, &names))
      return err;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseResponsesToolChoice(const ojson& v, CompletionRequest* req) {
  if (v.is_string()) {
    return ParseToolChoiceString(v.get<std::string>(), "{\"type\": \"function\", \"name\": ...}",
                                 req);
  }
  if (!v.is_object()) return WrongType("tool_choice", "a string or an object", json(v));
  auto type = v.find("type");
  auto name = v.find("name");
  if (type == v.end() || !type->is_string() || *type != "function") {
    return BadRequest("tool_choice.type",
                      "'tool_choice.type' must be \"function\" (allowed_tools and built-in tools "
                      "are not supported)");
  }
  if (name == v.end() || !name->is_string()) {
    return BadRequest("tool_choice.name", "'tool_choice.name' must be a string");
  }
  req->tool_choice = ToolChoice::kNamed;
  req->tool_choice_name = name->get<std::string>();
  return std::nullopt;
}

// text: {format: {type: text | json_object | json_schema, ...}, verbosity}.
std::optional<ApiError> ParseTextFormat(const ojson& text, ResponseFormat* out) {
  if (text.is_null()) return std::nullopt;
  if (!text.is_object()) return WrongType("text", "an object", json(text));
  auto format = text.find("format");
  if (format == text.end() || format->is_null()) return std::nullopt;
  if (!format->is_object()) return WrongType("text.format", "an object", json(*format));
  auto type = format->find("type");
  std::string t = type != format->end() && type->is_string() ? type->get<std::string>() : "";
  if (t == "text") {
    out->kind = ResponseFormat::kText;
  } else if (t == "json_object") {
    out->kind = ResponseFormat::kJsonObject;
  } else if (t == "json_schema") {
    return ParseJsonSchemaFormat(*format, "text.format", "", false, out);
  } else {
    return BadRequest(
        "text.format.type",
        "'text.format.type' must be one of text, json_object, json_schema; got \"" + t + "\"");
  }
  return std::nullopt;
}

// Fields that change what the API does and that this server does not implement: a clear
// 400 rather than an answer that ignores them.
std::optional<ApiError> RejectUnsupported(const json& body) {
  if (auto b = body.find("background"); b != body.end() && b->is_boolean() && b->get<bool>()) {
    return OutOfRange("background", "'background' mode is not supported");
  }
  for (const char* field : {"conversation", "prompt"}) {
    if (auto f = body.find(field); f != body.end() && !f->is_null()) {
      return BadRequest(field, std::string("'") + field + "' is not supported; send 'input'" +
                                   (std::string(field) == "conversation"
                                        ? " (and previous_response_id to continue)"
                                        : ""));
    }
  }
  return std::nullopt;
}

// The echo of a request field in the response object: as sent, or `fallback`.
json Echo(const CompletionRequest& req, const char* field, json fallback) {
  auto it = req.raw_ordered.find(field);
  if (it == req.raw_ordered.end() || it->is_null()) return fallback;
  return json(*it);
}

json MessageItem(const CompletionResult& r, const std::string& status, bool with_logprobs) {
  json part = {{"type", "output_text"}, {"text", r.text}, {"annotations", json::array()}};
  part["logprobs"] = with_logprobs ? LogprobsContent(r.logprobs) : json::array();
  return {{"id", r.message_item_id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({part})}};
}

json FunctionCallItem(const ToolCall& c, const std::string& status) {
  return {{"id", c.item_id},          {"type", "function_call"}, {"status", status},
          {"arguments", c.arguments}, {"call_id", c.id},         {"name", c.name}};
}

bool HasMessageItem(const CompletionResult& r) {
  return !r.text.empty() || r.tool_calls.empty();
}

// Each output item says whether it was finished: the message is incomplete when the token
// limit cut its text, a function call when the limit cut its arguments; the items before
// the cut are completed, as OpenAI reports them.
std::string MessageStatus(const CompletionResult& r) {
  return r.finish_reason == "length" && !r.cut_in_tool_call ? "incomplete" : "completed";
}

std::string CallStatus(const ToolCall& c) {
  return c.cut ? "incomplete" : "completed";
}

// The response object: `status` in_progress (r holds only the header), completed or
// incomplete (cut by max_output_tokens), with its output items.
json ResponseObject(const CompletionRequest& req, const CompletionResult& r,
                    const std::string& status, bool with_output) {
  json o = {{"id", r.id},       {"object", "response"}, {"created_at", r.created},
            {"status", status}, {"background", false},  {"error", nullptr}};
  o["incomplete_details"] =
      status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  o["instructions"] = Echo(req, "instructions", nullptr);
  o["max_output_tokens"] = Echo(req, "max_output_tokens", nullptr);
  o["model"] = r.model;
  json output = json::array();
  if (with_output) {
    if (HasMessageItem(r)) output.push_back(MessageItem(r, MessageStatus(r), req.logprobs));
    for (const ToolCall& c : r.tool_calls) output.push_back(FunctionCallItem(c, CallStatus(c)));
  }
  o["output"] = std::move(output);
  o["parallel_tool_calls"] = req.parallel_tool_calls;
  o["previous_response_id"] =
      req.previous_response_id.empty() ? json(nullptr) : json(req.previous_response_id);
  o["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  o["service_tier"] = "default";
  o["store"] = req.store;
  o["temperature"] = req.sampling.temperature;
  o["text"] = Echo(req, "text", json{{"format", {{"type", "text"}}}});
  o["tool_choice"] = Echo(req, "tool_choice", "auto");
  o["tools"] = Echo(req, "tools", json::array());
  o["top_logprobs"] = req.top_logprobs;
  o["top_p"] = req.sampling.top_p;
  o["truncation"] = Echo(req, "truncation", "disabled");
  if (with_output) {
    o["usage"] = {{"input_tokens", r.prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", r.cached_prompt_tokens}}},
                  {"output_tokens", r.completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", r.prompt_tokens + r.completion_tokens}};
  } else {
    o["usage"] = nullptr;
  }
  o["user"] = Echo(req, "user", nullptr);
  o["metadata"] = Echo(req, "metadata", json::object());
  if (with_output) o["trace"] = TraceExtension(r);
  return o;
}

std::string ResponseStatus(const CompletionResult& r) {
  return r.finish_reason == "length" ? "incomplete" : "completed";
}

// The Responses event stream. Every event carries its type and a sequence_number; text
// goes out as output_text deltas of one message item, tool calls as function_call items
// after it (whole, at the end, as the other formats send them), then response.completed
// (or .incomplete) with the whole response object.
class ResponsesStream : public StreamEncoder {
 public:
  ResponsesStream(const CompletionRequest& req, const CompletionResult& header)
      : req_(req), header_(header) {}

  std::string Begin() override {
    json skeleton = ResponseObject(req_, header_, "in_progress", false);
    std::string out = Event("response.created", {{"response", skeleton}});
    return out + Event("response.in_progress", {{"response", skeleton}});
  }

  std::string Text(const std::string& delta, const std::vector<TokenLogprob>& lps) override {
    if (delta.empty() && lps.empty()) return "";
    std::string out = OpenMessage();
    out += Event("response.output_text.delta",
                 {{"item_id", header_.message_item_id},
                  {"output_index", 0},
                  {"content_index", 0},
                  {"delta", delta},
                  {"logprobs", req_.logprobs ? LogprobsContent(lps) : json::array()}});
    return out;
  }

  std::string End(const CompletionResult& r, const std::string& rest,
                  const std::vector<TokenLogprob>& rest_logprobs) override {
    const std::string status = ResponseStatus(r);
    std::string out;
    int output_index = 0;
    if (HasMessageItem(r)) {
      out += Text(rest, rest_logprobs);
      out += OpenMessage();
      json item = MessageItem(r, MessageStatus(r), req_.logprobs);
      const json& part = item["content"][0];
      out += Event("response.output_text.done", {{"item_id", r.message_item_id},
                                                 {"output_index", 0},
                                                 {"content_index", 0},
                                                 {"text", r.text},
                                                 {"logprobs", part["logprobs"]}});
      out += Event("response.content_part.done", {{"item_id", r.message_item_id},
                                                  {"output_index", 0},
                                                  {"content_index", 0},
                                                  {"part", part}});
      out += Event("response.output_item.done", {{"output_index", 0}, {"item", item}});
      output_index = 1;
    }
    for (const ToolCall& c : r.tool_calls) {
      json added = FunctionCallItem(c, "in_progress");
      added["arguments"] = "";
      out += Event("response.output_item.added", {{"output_index", output_index}, {"item", added}});
      out +=
          Event("response.function_call_arguments.delta",
                {{"item_id", c.item_id}, {"output_index", output_index}, {"delta", c.arguments}});
      out += Event("response.function_call_arguments.done", {{"item_id", c.item_id},
                                                             {"output_index", output_index},
                                                             {"name", c.name},
                                                             {"arguments", c.arguments}});
      out += Event("response.output_item.done",
                   {{"output_index", output_index}, {"item", FunctionCallItem(c, CallStatus(c))}});
      ++output_index;
    }
    const char* final_type = status == "incomplete" ? "response.incomplete" : "response.completed";
    return out + Event(final_type, {{"response", ResponseObject(req_, r, status, true)}});
  }

  std::string Error(const ApiError& e) override {
    json data = {{"code", e.code.empty() ? json(nullptr) : json(e.code)},
                 {"message", e.message},
                 {"param", e.param.empty() ? json(nullptr) : json(e.param)}};
    return Event("error", std::move(data));
  }

 private:
  std::string OpenMessage() {
    if (message_open_) return "";
    message_open_ = true;
    json item = {{"id", header_.message_item_id},
                 {"type", "message"},
                 {"status", "in_progress"},
                 {"role", "assistant"},
                 {"content", json::array()}};
    json part = {{"type", "output_text"},
                 {"text", ""},
                 {"annotations", json::array()},
                 {"logprobs", json::array()}};
    // Two statements: the events' sequence numbers follow the order they are made in.
    std::string out = Event("response.output_item.added", {{"output_index", 0}, {"item", item}});
    return out + Event("response.content_part.added", {{"item_id", header_.message_item_id},
                                                       {"output_index", 0},
                                                       {"content_index", 0},
                                                       {"part", part}});
  }

  // One event: `type` and sequence_number first, then the fields.
  std::string Event(const char* type, json fields) {
    ojson data = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : fields.items()) data[k] = std::move(v);
    return SseFrame(type, JsonText(data));
  }

  const CompletionRequest& req_;  // owned by the call, which outlives its stream
  CompletionResult header_;
  int64_t sequence_ = 0;
  bool message_open_ = false;
};

class ResponsesFormat : public WireFormat {
 public:
  std::string_view api() const override { return kApiResponses; }
  std::string endpoint() const override { return "/v1/responses"; }
  std::string id_prefix() const override { return "resp_"; }
  std::variant<CompletionRequest, ApiError> Parse(std::string_view body) const override {
    return ParseResponsesRequest(body);
  }
  std::string Body(const CompletionRequest& req, const CompletionResult& r) const override {
    return DumpJson(ResponsesBodyJson(req, r));
  }
  std::unique_ptr<StreamEncoder> NewStream(const CompletionRequest& req,
                                           const CompletionResult& header) const override {
    return std::make_unique<ResponsesStream>(req, header);
  }
  ResponseSummary ReadResponse(const json& body) const override {
    return ReadResponsesResponse(body);
  }
  json FoldStream(std::string_view event_stream) const override {
    return FoldResponsesStream(event_stream);
  }
};

}  // namespace

std::variant<CompletionRequest, ApiError> ParseResponsesRequest(std::string_view body_text) {
  CompletionRequest req;
  req.chat = true;
  auto parsed = ParseOpenAiBody(body_text, &req);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  ojson ordered = std::move(std::get<ojson>(parsed));
  const json& body = req.raw;
  if (auto e = RejectUnsupported(body)) return *e;
  std::optional<ApiError> err;
  if (auto prev = body.find("previous_response_id"); prev != body.end() && !prev->is_null()) {
    if (!prev->is_string() || prev->get<std::string>().empty()) {
      return WrongType("previous_response_id", "a non-empty string", *prev);
    }
    req.previous_response_id = prev->get<std::string>();
  }
  auto input = ordered.find("input");
  if (input == ordered.end() || input->is_null()) {
    if (req.previous_response_id.empty()) return BadRequest("input", "'input' is required");
  } else if (auto e = ParseInput(*input, &req.messages)) {
    return *e;
  }
  if (auto instructions = body.find("instructions");
      instructions != body.end() && !instructions->is_null()) {
    if (!instructions->is_string()) return WrongType("instructions", "a string", *instructions);
    req.system = instructions->get<std::string>();
  }
  if (auto t = ordered.find("tools"); t != ordered.end()) {
    if (auto e = ParseResponsesTools(*t, &req.tools)) return *e;
  }
  if (auto tc = ordered.find("tool_choice"); tc != ordered.end() && !tc->is_null()) {
    if (auto e = ParseResponsesToolChoice(*tc, &req)) return *e;
  } else if (req.tools.empty()) {
    req.tool_choice = ToolChoice::kNone;
  }
  if (auto e = CheckToolChoice(req, "tool_choice.name")) return *e;
  if (!BoolField(body, "parallel_tool_calls", &req.parallel_tool_calls, &err)) return *err;
  if (auto text = ordered.find("text"); text != ordered.end()) {
    if (auto e = ParseTextFormat(*text, &req.response_format)) return *e;
  }
  // OpenAI: temperature 0 to 2; top_k and seed are this server's extensions.
  if (auto e = ParseSamplingCore(body, 2.0, &req)) return *e;
  if (auto e = ParseTokenLimit(body, "max_output_tokens", kDefaultMaxTokens, false, &req)) {
    return *e;
  }
  if (!BoolField(body, "stream", &req.stream, &err)) return *err;
  req.store = true;  // OpenAI's default
  if (!BoolField(body, "store", &req.store, &err)) return *err;
  if (auto inc = body.find("include"); inc != body.end() && !inc->is_null()) {
    if (!inc->is_array()) return WrongType("include", "an array of strings", *inc);
    for (const json& v : *inc) {
      if (!v.is_string()) return WrongType("include", "an array of strings", *inc);
      if (v == "message.output_text.logprobs") req.logprobs = true;
    }
  }
  std::optional<int64_t> top_logprobs;
  if (!IntField(body, "top_logprobs", &top_logprobs, &err)) return *err;
  if (top_logprobs) {
    if (*top_logprobs < 0 || *top_logprobs > 20) {
      return OutOfRange("top_logprobs", "'top_logprobs' must be between 0 and 20");
    }
    req.top_logprobs = static_cast<int>(*top_logprobs);
    if (req.top_logprobs > 0) req.logprobs = true;
  }
  req.raw_ordered = std::move(ordered);
  return req;
}

json ResponsesBodyJson(const CompletionRequest& req, const CompletionResult& r) {
  return ResponseObject(req, r, ResponseStatus(r), true);
}

std::vector<ChatMessage> MergeResponsesItems(std::vector<ChatMessage> items) {
  std::vector<ChatMessage> out;
  out.reserve(items.size());
  for (ChatMessage& m : items) {
    const bool call_only = m.role == "assistant" && m.content.empty() && !m.tool_calls.empty();
    if (call_only && !out.empty() && out.back().role == "assistant") {
      for (ToolCall& c : m.tool_calls) out.back().tool_calls.push_back(std::move(c));
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

ResponseSummary ReadResponsesResponse(const json& body) {
  ResponseSummary s;
  s.id = StringOr(body, "id");
  s.model = StringOr(body, "model");
  const json& output = MemberOrNull(body, "output");
  if (output.is_array()) {
    for (const json& item : output) {
      const std::string type = StringOr(item, "type");
      if (type == "message") {
        const json& content = MemberOrNull(item, "content");
        if (!content.is_array()) continue;
        for (const json& part : content) {
          if (StringOr(part, "type") == "output_text") s.text += StringOr(part, "text");
        }
      } else if (type == "function_call") {
        s.tool_calls.push_back({StringOr(item, "call_id"), StringOr(item, "name"),
                                StringOr(item, "arguments"), StringOr(item, "id")});
      }
    }
  }
  const std::string status = StringOr(body, "status");
  if (status == "incomplete") {
    s.finish_reason = "length";
  } else if (status == "failed" || (body.contains("error") && body["error"].is_object())) {
    s.finish_reason = "error";
  } else if (status == "completed") {
    s.finish_reason = s.tool_calls.empty() ? "stop" : "tool_calls";
  } else {
    s.finish_reason = status;
  }
  const json& usage = MemberOrNull(body, "usage");
  if (usage.is_object()) {
    s.has_usage = true;
    s.input_tokens = IntOr(usage, "input_tokens");
    s.output_tokens = IntOr(usage, "output_tokens");
    s.cached_input_tokens = IntOr(MemberOrNull(usage, "input_tokens_details"), "cached_tokens");
  }
  return s;
}

json FoldResponsesStream(std::string_view event_stream) {
  json last;                           // the latest response object seen (created, then completed)
  std::map<int64_t, json> done_items;  // by output_index
  for (const SseEvent& e : ParseSse(event_stream)) {
    json data = ParseJsonOrDiscarded(e.data);
    if (!data.is_object()) continue;
    const std::string type = StringOr(data, "type", e.event);
    if (type == "error") {
      json error = data;
      error.erase("type");
      error.erase("sequence_number");
      return {{"error", error}};
    }
    if (data.contains("response") && data["response"].is_object()) last = data["response"];
    if (type == "response.output_item.done" && data.contains("item")) {
      done_items[IntOr(data, "output_index")] = data["item"];
    }
  }
  if (last.is_object() && StringOr(last, "status") == "in_progress") {
    // Cut before response.completed: what the stream finished of its output.
    json output = json::array();
    for (auto& [index, item] : done_items) output.push_back(std::move(item));
    last["output"] = std::move(output);
  }
  return last;
}

const WireFormat& OpenAiResponsesFormat() {
  static const ResponsesFormat format;
  return format;
}

}  // namespace trace::recorder
