#include "recorder/api/anthropic_messages.h"

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

// The oldest anthropic-version Anthropic's API accepts. Newer SDKs send later dates (the
// official TypeScript SDK 1.x sends 2026-10-21) for the same Messages API: any YYYY-MM-DD
// from this one on is served alike.
constexpr std::string_view kOldestVersion = "2023-01-01";

bool IsVersionDate(const std::string& v) {
  if (v.size() != 10 || v[4] != '-' || v[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (v[i] < '0' || v[i] > '9') return false;
  }
  return true;
}

// A string member, "" when absent or not a string (what an upstream sends is not trusted).
std::string Str(const ojson& obj, const char* key, const std::string& fallback = "") {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

ApiError Unsupported(const std::string& where, const std::string& what) {
  return BadRequest(where, "'" + where + "': " + what + " is not supported");
}

// Text content: a string or text blocks (system prompts, tool results).
std::optional<ApiError> ParseText(const ojson& v, const std::string& where, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return WrongType(where, "a string or an array of text blocks", json(v));
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = where + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return WrongType(p, "an object", json(v[i]));
    std::string type;
    if (auto err = RequiredStringField(v[i], p, "type", &type)) return err;
    if (type != "text")
      return Unsupported(FieldPath(p, "type"), "content of type \"" + type + "\"");
    std::string text;
    if (auto err = RequiredStringField(v[i], p, "text", &text)) return err;
    *out += text;
  }
  return std::nullopt;
}

// One message, as one or more ChatMessages: an assistant turn is one message (its text,
// then its tool_use blocks as tool calls); a user turn is its tool_result blocks as tool
// messages and its text blocks as user messages, in the order given.
// `answerable`: the ids of the tool_use blocks of the message before (an assistant turn),
// the only calls a tool_result block here may answer, as Anthropic requires.
std::optional<ApiError> ParseMessage(const ojson& m, const std::string& where,
                                     const std::unordered_set<std::string>& answerable,
                                     std::vector<ChatMessage>* out) {
  if (!m.is_object()) return WrongType(where, "an object", json(m));
  std::string role;
  if (auto err = RequiredStringField(m, where, "role", &role)) return err;
  if (role != "user" && role != "assistant") {
    return BadRequest(FieldPath(where, "role"), "'" + FieldPath(where, "role") +
                                                    "' must be user or assistant; got \"" + role +
                                                    "\" (the system prompt goes in 'system')");
  }
  auto content = m.find("content");
  if (content == m.end()) {
    return BadRequest(FieldPath(where, "content"),
                      "'" + FieldPath(where, "content") + "' is required");
  }
  const std::string cw = FieldPath(where, "content");
  if (content->is_string()) {
    ChatMessage msg;
    msg.role = role;
    msg.content = content->get<std::string>();
    out->push_back(std::move(msg));
    return std::nullopt;
  }
  if (!content->is_array()) return WrongType(cw, "a string or an array of blocks", json(*content));
  ChatMessage assistant;
  assistant.role = "assistant";
  for (size_t i = 0; i < content->size(); ++i) {
    const ojson& block = (*content)[i];
    std::string p = cw + "[" + std::to_string(i) + "]";
    if (!block.is_object()) return WrongType(p, "an object", json(block));
    std::string type;
    if (auto err = RequiredStringField(block, p, "type", &type)) return err;
    if (type == "text") {
      std::string text;
      if (auto err = RequiredStringField(block, p, "text", &text)) return err;
      if (role == "assistant") {
        assistant.content += text;
      } else if (!out->empty() && out->back().role == "user" && i > 0 &&
                 Str((*content)[i - 1], "type") == "text") {
        out->back().content += text;  // adjacent text blocks make one message
      } else {
        ChatMessage msg;
        msg.role = "user";
        msg.content = std::move(text);
        out->push_back(std::move(msg));
      }
    } else if (type == "tool_use" && role == "assistant") {
      ToolCall call;
      if (auto err = RequiredStringField(block, p, "id", &call.id)) return err;
      if (auto err = RequiredStringField(block, p, "name", &call.name)) return err;
      auto input = block.find("input");
      if (input == block.end() || !input->is_object()) {
        return WrongType(FieldPath(p, "input"), "an object",
                         input == block.end() ? json(nullptr) : json(*input));
      }
      call.arguments = JsonText(*input);
      assistant.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result" && role == "user") {
      ChatMessage msg;
      msg.role = "tool";
      if (auto err = RequiredStringField(block, p, "tool_use_id", &msg.tool_call_id)) return err;
      if (answerable.count(msg.tool_call_id) == 0) {
        const std::string id_path = FieldPath(p, "tool_use_id");
        return BadRequest(id_path, "'" + id_path + "' \"" + msg.tool_call_id +
                                       "\" answers no tool_use block of the previous message: "
                                       "each tool_result block needs a corresponding tool_use "
                                       "block in the assistant message just before it");
      }
      if (auto c = block.find("content"); c != block.end() && !c->is_null()) {
        if (auto err = ParseText(*c, FieldPath(p, "content"), &msg.content)) return err;
      }
      if (auto e = block.find("is_error"); e != block.end() && !e->is_null()) {
        if (!e->is_boolean()) return WrongType(FieldPath(p, "is_error"), "a boolean", json(*e));
        msg.is_error = e->get<bool>();
      }
      out->push_back(std::move(msg));
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      continue;  // reasoning this model never produced: nothing to render
    } else if (type == "tool_use" || type == "tool_result" || type == "thinking" ||
               type == "redacted_thinking") {
      return BadRequest(FieldPath(p, "type"),
                        "'" + FieldPath(p, "type") + "': a " + type + " block belongs in a" +
                            (role == "user" ? "n assistant" : " user") + " message");
    } else {
      return Unsupported(FieldPath(p, "type"), "content of type \"" + type + "\"");
    }
  }
  if (role == "assistant") out->push_back(std::move(assistant));
  return std::nullopt;
}

std::optional<ApiError> ParseAnthropicTools(const ojson& v, std::vector<ToolSpec>* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) return WrongType("tools", "an array", json(v));
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const ojson& t = v[i];
    if (!t.is_object()) return WrongType(p, "an object", json(t));
    if (auto type = t.find("type"); type != t.end() && !type->is_null()) {
      if (!type->is_string() || *type != "custom") {
        return Unsupported(FieldPath(p, "type"),
                           "the server tool " + json(*type).dump() + " (only client tools)");
      }
    }
    auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object()) {
      return BadRequest(FieldPath(p, "input_schema"),
                        "'" + FieldPath(p, "input_schema") + "' must be a JSON schema object");
    }
    if (auto err = ParseFunctionTool(t, p, "input_schema", false, out, &names)) return err;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseAnthropicToolChoice(const ojson& v, CompletionRequest* req) {
  if (!v.is_object()) return WrongType("tool_choice", "an object", json(v));
  std::string type;
  if (auto err = RequiredStringField(v, "tool_choice", "type", &type)) return err;
  if (type == "auto") {
    req->tool_choice = ToolChoice::kAuto;
  } else if (type == "any") {
    req->tool_choice = ToolChoice::kRequired;
  } else if (type == "none") {
    req->tool_choice = ToolChoice::kNone;
  } else if (type == "tool") {
    req->tool_choice = ToolChoice::kNamed;
    if (auto err = RequiredStringField(v, "tool_choice", "name", &req->tool_choice_name))
      return err;
  } else {
    return BadRequest("tool_choice.type",
                      "'tool_choice.type' must be auto, any, tool or none; got \"" + type + "\"");
  }
  if (auto d = v.find("disable_parallel_tool_use"); d != v.end() && !d->is_null()) {
    if (!d->is_boolean()) {
      return WrongType("tool_choice.disable_parallel_tool_use", "a boolean", json(*d));
    }
    req->parallel_tool_calls = !d->get<bool>();
  }
  return std::nullopt;
}

// output_config.format (and the earlier beta spelling output_format): a JSON schema the
// answer must follow. Anthropic enforces it always, hence strict.
std::optional<ApiError> ParseOutputFormat(const ojson& v, const std::string& where,
                                          ResponseFormat* out) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_object()) return WrongType(where, "an object", json(v));
  std::string type;
  if (auto err = RequiredStringField(v, where, "type", &type)) return err;
  if (type != "json_schema") {
    return BadRequest(
        FieldPath(where, "type"),
        "'" + FieldPath(where, "type") + "' must be \"json_schema\"; got \"" + type + "\"");
  }
  if (!v.contains("schema")) {
    return BadRequest(FieldPath(where, "schema"),
                      "'" + FieldPath(where, "schema") + "' is required");
  }
  return ParseJsonSchemaFormat(v, where, "output", /*default_strict=*/true, out);
}

std::string StopReason(const CompletionResult& r) {
  if (r.finish_reason == "tool_calls") return "tool_use";
  if (r.finish_reason == "length") return "max_tokens";
  if (!r.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

json StopSequence(const CompletionResult& r) {
  return r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence);
}

// A tool call's arguments as a tool_use input: the object as written (key order kept), or
// {} when they are not a complete object (a call cut by max_tokens).
ojson ToolInput(const ToolCall& c) {
  ojson input = ParseOrderedJsonOrDiscarded(c.arguments);
  return input.is_object() ? input : ojson::object();
}

ojson ToolUseBlock(const ToolCall& c, bool with_input) {
  return {{"type", "tool_use"},
          {"id", c.id},
          {"name", c.name},
          {"input", with_input ? ToolInput(c) : ojson::object()}};
}

// Usage as Anthropic counts it. The server's KV prefix reuse is not Anthropic's prompt
// caching (which clients ask for with cache_control), so every prompt token is input.
ojson Usage(int64_t input, int64_t output) {
  return {{"input_tokens", input},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", 0},
          {"output_tokens", output},
          {"service_tier", "standard"}};
}

std::string Dump(const ojson& j) {
  return JsonText(j);
}

// Anthropic's event stream: message_start, a text block streamed as text_delta events, then
// (at the end, whole) one tool_use block per call with its input as one input_json_delta,
// message_delta with the stop reason and usage, message_stop.
class AnthropicStream : public StreamEncoder {
 public:
  explicit AnthropicStream(const CompletionResult& header) : header_(header) {}

  std::string Begin() override {
    ojson message = {{"id", header_.id},          {"type", "message"},
                     {"role", "assistant"},       {"model", header_.model},
                     {"content", ojson::array()}, {"stop_reason", nullptr},
                     {"stop_sequence", nullptr},  {"usage", Usage(header_.prompt_tokens, 0)}};
    return Event("message_start", {{"type", "message_start"}, {"message", message}});
  }

  std::string Text(const std::string& delta, const std::vector<TokenLogprob>&) override {
    if (delta.empty()) return "";
    std::string out;
    if (!text_open_) {
      text_open_ = true;
      out += Event("content_block_start", {{"type", "content_block_start"},
                                           {"index", 0},
                                           {"content_block", {{"type", "text"}, {"text", ""}}}});
    }
    return out +
           Event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", 0},
                                         {"delta", {{"type", "text_delta"}, {"text", delta}}}});
  }

  std::string End(const CompletionResult& r, const std::string& rest,
                  const std::vector<TokenLogprob>& rest_logprobs) override {
    std::string out = Text(rest, rest_logprobs);
    int index = 0;
    if (text_open_) {
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
      index = 1;
    }
    for (const ToolCall& c : r.tool_calls) {
      out += Event("content_block_start", {{"type", "content_block_start"},
                                           {"index", index},
                                           {"content_block", ToolUseBlock(c, false)}});
      ojson input = ToolInput(c);
      if (!input.empty()) {
        out += Event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", index},
                      {"delta", {{"type", "input_json_delta"}, {"partial_json", Dump(input)}}}});
      }
      out += Event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
      ++index;
    }
    out += Event("message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", StopReason(r)}, {"stop_sequence", StopSequence(r)}}},
                  {"usage", Usage(r.prompt_tokens, r.completion_tokens)},
                  {"trace", ojson(TraceExtension(r))}});
    return out + Event("message_stop", {{"type", "message_stop"}});
  }

  std::string Error(const ApiError& e) override { return SseFrame("error", AnthropicErrorBody(e)); }

 private:
  static std::string Event(const char* name, const ojson& data) {
    return SseFrame(name, Dump(data));
  }

  CompletionResult header_;
  bool text_open_ = false;
};

class AnthropicFormat : public WireFormat {
 public:
  std::string_view api() const override { return kApiAnthropicMessages; }
  std::string endpoint() const override { return "/v1/messages"; }
  std::vector<std::string> routes() const override { return {"/v1/messages", "/messages"}; }
  std::string id_prefix() const override { return "msg_"; }
  std::string tool_call_id_prefix() const override { return "toolu_"; }
  std::optional<ApiError> CheckHeaders(const HeaderLookup& header) const override {
    const std::string version = header("anthropic-version");
    if (version.empty()) {
      return BadRequest("anthropic-version", "anthropic-version: header is required");
    }
    if (IsVersionDate(version) && version >= kOldestVersion) return std::nullopt;
    return BadRequest("anthropic-version",
                      "anthropic-version: \"" + version +
                          "\" is not a supported version (a date from 2023-01-01 on, e.g. "
                          "2023-06-01)");
  }
  std::variant<CompletionRequest, ApiError> Parse(std::string_view body) const override {
    return ParseAnthropicRequest(body);
  }
  std::string Body(const CompletionRequest&, const CompletionResult& r) const override {
    return Dump(AnthropicBodyJson(r));
  }
  std::unique_ptr<StreamEncoder> NewStream(const CompletionRequest&,
                                           const CompletionResult& header) const override {
    return std::make_unique<AnthropicStream>(header);
  }
  std::string ErrorBody(const ApiError& e) const override { return AnthropicErrorBody(e); }
  ResponseSummary ReadResponse(const json& body) const override {
    return ReadAnthropicResponse(body);
  }
  json FoldStream(std::string_view event_stream) const override {
    return FoldAnthropicStream(event_stream);
  }
};

const char* ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

std::variant<CompletionRequest, ApiError> ParseAnthropicRequest(std::string_view body_text) {
  CompletionRequest req;
  req.chat = true;
  // Depth-limited (json_body.h): the conversion to json below recurses once per level.
  auto parsed = ParseJsonBodyOrdered(body_text);
  if (auto* err = std::get_if<ApiError>(&parsed)) return *err;
  ojson ordered = std::move(std::get<ojson>(parsed));
  if (!ordered.is_object()) return WrongType("body", "a JSON object", json(ordered));
  json body = ordered;
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) {
    return BadRequest("model", "model: Field required (a string naming the model)");
  }
  req.model = model->get<std::string>();
  if (auto e = ParseTokenLimit(body, "max_tokens", 0, /*required=*/true, &req)) return *e;
  auto messages = ordered.find("messages");
  if (messages == ordered.end()) return BadRequest("messages", "'messages' is required");
  if (!messages->is_array()) return WrongType("messages", "an array", json(*messages));
  if (messages->empty()) return BadRequest("messages", "'messages' must not be empty");
  std::unordered_set<std::string> answerable;  // tool_use ids of the message before
  for (size_t i = 0; i < messages->size(); ++i) {
    const ojson& m = (*messages)[i];
    if (auto e =
            ParseMessage(m, "messages[" + std::to_string(i) + "]", answerable, &req.messages)) {
      return *e;
    }
    answerable.clear();
    if (Str(m, "role") == "assistant") {
      for (const ToolCall& c : req.messages.back().tool_calls) answerable.insert(c.id);
    }
  }
  if (req.messages.empty()) return BadRequest("messages", "'messages' holds no content");
  // A final assistant turn without tool calls is a prefill: the answer continues it.
  if (!req.messages.empty() && req.messages.back().role == "assistant" &&
      req.messages.back().tool_calls.empty()) {
    std::string prefill = std::move(req.messages.back().content);
    req.messages.pop_back();
    if (!prefill.empty() &&
        std::string_view(" \t\r\n").find(prefill.back()) != std::string_view::npos) {
      return BadRequest("messages", "final assistant content cannot end with trailing whitespace");
    }
    req.assistant_prefill = std::move(prefill);
    if (req.messages.empty()) {
      return BadRequest("messages", "'messages' must hold a user message before the assistant's");
    }
  }
  if (auto system = ordered.find("system"); system != ordered.end() && !system->is_null()) {
    std::string text;
    if (auto e = ParseText(*system, "system", &text)) return *e;
    req.system = std::move(text);
  }
  if (auto t = ordered.find("tools"); t != ordered.end()) {
    if (auto e = ParseAnthropicTools(*t, &req.tools)) return *e;
  }
  if (auto tc = ordered.find("tool_choice"); tc != ordered.end() && !tc->is_null()) {
    if (auto e = ParseAnthropicToolChoice(*tc, &req)) return *e;
  } else if (req.tools.empty()) {
    req.tool_choice = ToolChoice::kNone;
  }
  if (auto e = CheckToolChoice(req, "tool_choice.name")) return *e;
  // Anthropic: temperature 0 to 1; top_k is Anthropic's own; seed is this server's.
  if (auto e = ParseSamplingCore(body, 1.0, &req)) return *e;
  if (auto stop = body.find("stop_sequences"); stop != body.end() && !stop->is_null()) {
    if (!stop->is_array()) return WrongType("stop_sequences", "an array of strings", *stop);
    for (const json& s : *stop) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        return BadRequest("stop_sequences", "'stop_sequences' entries must be non-empty strings");
      }
      req.sampling.stop.push_back(s.get<std::string>());
    }
  }
  std::optional<ApiError> err;
  if (!BoolField(body, "stream", &req.stream, &err)) return *err;
  if (auto thinking = body.find("thinking");
      thinking != body.end() && thinking->is_object() && Str(*thinking, "type") == "enabled") {
    return Unsupported("thinking", "extended thinking");
  }
  if (auto mcp = body.find("mcp_servers"); mcp != body.end() && mcp->is_array() && !mcp->empty()) {
    return Unsupported("mcp_servers", "calling MCP servers");
  }
  if (auto oc = ordered.find("output_config"); oc != ordered.end() && !oc->is_null()) {
    if (!oc->is_object()) return WrongType("output_config", "an object", json(*oc));
    if (auto f = oc->find("format"); f != oc->end()) {
      if (auto e = ParseOutputFormat(*f, "output_config.format", &req.response_format)) return *e;
    }
  }
  if (auto f = ordered.find("output_format"); f != ordered.end()) {
    if (auto e = ParseOutputFormat(*f, "output_format", &req.response_format)) return *e;
  }
  req.raw = std::move(body);
  req.raw_ordered = std::move(ordered);
  return req;
}

nlohmann::ordered_json AnthropicBodyJson(const CompletionResult& r) {
  ojson content = ojson::array();
  if (!r.text.empty()) content.push_back({{"type", "text"}, {"text", r.text}});
  for (const ToolCall& c : r.tool_calls) content.push_back(ToolUseBlock(c, true));
  ojson body = {{"id", r.id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", r.model},
                {"content", content},
                {"stop_reason", StopReason(r)},
                {"stop_sequence", StopSequence(r)},
                {"usage", Usage(r.prompt_tokens, r.completion_tokens)},
                {"trace", ojson(TraceExtension(r))}};
  return body;
}

ResponseSummary ReadAnthropicResponse(const json& body) {
  ResponseSummary s;
  s.id = StringOr(body, "id");
  s.model = StringOr(body, "model");
  const json& content = MemberOrNull(body, "content");
  if (content.is_array()) {
    for (const json& block : content) {
      const std::string type = StringOr(block, "type");
      if (type == "text") {
        s.text += StringOr(block, "text");
      } else if (type == "tool_use") {
        const json& input = MemberOrNull(block, "input");
        s.tool_calls.push_back({StringOr(block, "id"), StringOr(block, "name"),
                                input.is_object() ? input.dump() : "{}", ""});
      }
    }
  }
  const std::string stop = StringOr(body, "stop_reason");
  if (StringOr(body, "type") == "error") {
    s.finish_reason = "error";
  } else if (stop == "tool_use") {
    s.finish_reason = "tool_calls";
  } else if (stop == "max_tokens") {
    s.finish_reason = "length";
  } else if (stop == "end_turn" || stop == "stop_sequence" || stop == "pause_turn") {
    s.finish_reason = "stop";
  } else {
    s.finish_reason = stop;
  }
  const json& usage = MemberOrNull(body, "usage");
  if (usage.is_object()) {
    s.has_usage = true;
    s.cached_input_tokens = IntOr(usage, "cache_read_input_tokens");
    s.input_tokens = IntOr(usage, "input_tokens") + s.cached_input_tokens +
                     IntOr(usage, "cache_creation_input_tokens");
    s.output_tokens = IntOr(usage, "output_tokens");
  }
  return s;
}

namespace {

// A stream event's block index (0 when missing or not an integer).
int64_t IndexOf(const ojson& data) {
  auto it = data.find("index");
  return it != data.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

json FoldAnthropicStream(std::string_view event_stream) {
  ojson message;
  std::map<int64_t, ojson> blocks;        // by index
  std::map<int64_t, std::string> inputs;  // tool_use input JSON text, by index
  for (const SseEvent& e : ParseSse(event_stream)) {
    ojson data = ParseOrderedJsonOrDiscarded(e.data);
    if (!data.is_object()) continue;
    const std::string type = Str(data, "type", e.event);
    if (type == "error") return json(data);
    if (type == "message_start" && data.contains("message") && data["message"].is_object()) {
      message = data["message"];
    } else if (type == "content_block_start" && data.contains("content_block") &&
               data["content_block"].is_object()) {
      blocks[IndexOf(data)] = data["content_block"];
    } else if (type == "content_block_delta" && data.contains("delta")) {
      int64_t index = IndexOf(data);
      const ojson& delta = data["delta"];
      ojson& block = blocks[index];
      if (!block.is_object()) block = ojson::object();  // a delta without its start
      if (!delta.is_object()) continue;
      const std::string dt = Str(delta, "type");
      if (dt == "text_delta") {
        block["text"] = Str(block, "text") + Str(delta, "text");
      } else if (dt == "input_json_delta") {
        inputs[index] += Str(delta, "partial_json");
      } else if (dt == "thinking_delta") {
        block["thinking"] = Str(block, "thinking") + Str(delta, "thinking");
      } else if (dt == "signature_delta") {
        block["signature"] = Str(delta, "signature");
      }
    } else if (type == "message_delta" && message.is_object()) {
      if (data.contains("delta") && data["delta"].is_object()) {
        for (auto& [k, v] : data["delta"].items()) message[k] = v;
      }
      if (data.contains("usage") && data["usage"].is_object()) {
        if (!message.contains("usage") || !message["usage"].is_object()) {
          message["usage"] = ojson::object();
        }
        for (auto& [k, v] : data["usage"].items()) message["usage"][k] = v;
      }
      if (data.contains("trace")) message["trace"] = data["trace"];
    }
  }
  if (!message.is_object()) return nullptr;
  ojson content = ojson::array();
  for (auto& [index, block] : blocks) {
    if (auto it = inputs.find(index); it != inputs.end()) {
      ojson input = ParseOrderedJsonOrDiscarded(it->second);
      block["input"] = input.is_discarded() ? ojson(it->second) : input;
    }
    content.push_back(std::move(block));
  }
  message["content"] = std::move(content);
  return json(message);
}

std::string AnthropicErrorBody(const ApiError& e) {
  ojson body = {{"type", "error"},
                {"error", {{"type", ErrorType(e.http_status)}, {"message", e.message}}}};
  return Dump(body);
}

std::string AnthropicErrorFromOpenAi(int http_status, const std::string& body) {
  json j = ParseJsonOrDiscarded(body);
  if (!j.is_object() || j.contains("type") || !j.contains("error") || !j["error"].is_object()) {
    return "";
  }
  ApiError e;
  e.http_status = http_status;
  e.message = StringOr(j["error"], "message");
  return AnthropicErrorBody(e);
}

bool IsAnthropicRoute(std::string_view path) {
  return path == "/v1/messages" || path == "/messages" || path == "/v1/messages/count_tokens" ||
         path == "/messages/count_tokens";
}

const WireFormat& AnthropicMessagesFormat() {
  static const AnthropicFormat format;
  return format;
}

}  // namespace trace::recorder
