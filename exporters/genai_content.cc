#include "exporters/genai_content.h"

#include <utility>

namespace trace::exporters {
namespace {

using nlohmann::json;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

json TextPart(const std::string& text) {
  return {{"type", "text"}, {"content", text}};
}

json ToolCallPart(const std::string& id, const std::string& name, json arguments) {
  json p = {{"type", "tool_call"}, {"name", name}, {"arguments", std::move(arguments)}};
  p["id"] = id.empty() ? json(nullptr) : json(id);
  return p;
}

json ToolResponsePart(const std::string& id, json response) {
  json p = {{"type", "tool_call_response"}, {"response", std::move(response)}};
  p["id"] = id.empty() ? json(nullptr) : json(id);
  return p;
}

json GenAiMessage(const std::string& role, json parts) {
  return {{"role", role.empty() ? "user" : role}, {"parts", std::move(parts)}};
}

// The text of an OpenAI/Anthropic content value: a string, or the text parts of an array.
std::string JoinedText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const json& p : content) {
      std::string t = Str(p, "text");
      if (!t.empty()) out += (out.empty() ? "" : "\n") + t;
    }
  }
  return out;
}

// One content part of Chat Completions / Responses / Anthropic input, in semconv form.
json ContentPart(const json& p) {
  std::string type = Str(p, "type");
  if (type == "text" || type == "input_text" || type == "output_text") {
    return TextPart(Str(p, "text"));
  }
  if (type == "image_url" || type == "input_image") {
    const json* url = Field(p, "image_url");
    std::string uri = url && url->is_object()   ? Str(*url, "url")
                      : url && url->is_string() ? url->get<std::string>()
                                                : "";
    if (!uri.empty()) return {{"type", "uri"}, {"modality", "image"}, {"uri", uri}};
  }
  if (type == "thinking") return {{"type", "reasoning"}, {"content", Str(p, "thinking")}};
  if (type == "refusal") return TextPart(Str(p, "refusal"));
  return {{"type", type.empty() ? "unknown" : type}};
}

json ContentParts(const json& content) {
  json parts = json::array();
  if (content.is_string()) {
    if (!content.get<std::string>().empty()) parts.push_back(TextPart(content));
  } else if (content.is_array()) {
    for (const json& p : content) {
      if (p.is_string()) {
        parts.push_back(TextPart(p));
      } else {
        parts.push_back(ContentPart(p));
      }
    }
  }
  return parts;
}

json ChatToolCallParts(const json& tool_calls) {
  json parts = json::array();
  if (!tool_calls.is_array()) return parts;
  for (const json& tc : tool_calls) {
    const json* f = Field(tc, "function");
    std::string args = f ? Str(*f, "arguments") : "";
    parts.push_back(ToolCallPart(Str(tc, "id"), f ? Str(*f, "name") : "", ArgumentsValue(args)));
  }
  return parts;
}

// ---- requests ---------------------------------------------------------------------

// gen_ai.tool.definitions from the request's "tools": `definition(tool)` gives the object
// holding name and description, and the key its parameter schema is under.
template <typename Definition>
void ToolDefinitions(const json& req, GenAiContent* out, const Definition& definition) {
  const json* tools = Field(req, "tools");
  if (!tools || !tools->is_array() || tools->empty()) return;
  out->tool_definitions = json::array();
  for (const json& t : *tools) {
    auto [def, params_key] = definition(t);
    std::string type = Str(t, "type");
    json d = {{"type", type.empty() || type == "custom" ? "function" : type},
              {"name", Str(*def, "name")}};
    if (const json* desc = Field(*def, "description")) d["description"] = *desc;
    if (const json* params = Field(*def, params_key)) d["parameters"] = *params;
    out->tool_definitions.push_back(std::move(d));
  }
}

void ChatRequest(const json& req, GenAiContent* out) {
  const json* messages = Field(req, "messages");
  if (messages && messages->is_array()) {
    for (const json& m : *messages) {
      std::string role = Str(m, "role");
      json parts = json::array();
      if (role == "tool") {
        const json* content = Field(m, "content");
        parts.push_back(
            ToolResponsePart(Str(m, "tool_call_id"), content ? json(JoinedText(*content)) : ""));
      } else {
        if (const json* content = Field(m, "content")) parts = ContentParts(*content);
        if (const json* calls = Field(m, "tool_calls")) {
          for (json& p : ChatToolCallParts(*calls)) parts.push_back(std::move(p));
        }
      }
      json msg = GenAiMessage(role, std::move(parts));
      std::string name = Str(m, "name");
      if (!name.empty()) msg["name"] = name;
      out->input_messages.push_back(std::move(msg));
    }
  }
  ToolDefinitions(req, out, [](const json& t) {
    const json* f = Field(t, "function");  // {"type":"function","function":{...}}
    return std::make_pair(f ? f : &t, "parameters");
  });
}

void CompletionsRequest(const json& req, GenAiContent* out) {
  const json* prompt = Field(req, "prompt");
  if (!prompt) return;
  if (prompt->is_array()) {
    for (const json& p : *prompt) {
      if (p.is_string())
        out->input_messages.push_back(GenAiMessage("user", json::array({TextPart(p)})));
    }
  } else if (prompt->is_string()) {
    out->input_messages.push_back(GenAiMessage("user", json::array({TextPart(*prompt)})));
  }
}

void ResponsesRequest(const json& req, GenAiContent* out) {
  std::string instructions = Str(req, "instructions");
  if (!instructions.empty()) out->system_instructions = json::array({TextPart(instructions)});
  const json* input = Field(req, "input");
  if (input && input->is_string()) {
    out->input_messages.push_back(GenAiMessage("user", json::array({TextPart(*input)})));
  } else if (input && input->is_array()) {
    for (const json& item : *input) {
      std::string type = Str(item, "type");
      if (type == "function_call") {
        out->input_messages.push_back(GenAiMessage(
            "assistant", json::array({ToolCallPart(Str(item, "call_id"), Str(item, "name"),
                                                   ArgumentsValue(Str(item, "arguments")))})));
      } else if (type == "function_call_output") {
        const json* output = Field(item, "output");
        out->input_messages.push_back(GenAiMessage(
            "tool", json::array({ToolResponsePart(
                        Str(item, "call_id"), output ? json(JoinedText(*output)) : json(""))})));
      } else if (type == "reasoning") {
        std::string text;
        if (const json* summary = Field(item, "summary")) text = JoinedText(*summary);
        out->input_messages.push_back(GenAiMessage(
            "assistant", json::array({json{{"type", "reasoning"}, {"content", text}}})));
      } else {
        const json* content = Field(item, "content");
        out->input_messages.push_back(
            GenAiMessage(Str(item, "role"), content ? ContentParts(*content) : json::array()));
      }
    }
  }
  ToolDefinitions(req, out, [](const json& t) { return std::make_pair(&t, "parameters"); });
}

json AnthropicBlocks(const json& content) {
  if (!content.is_array()) return ContentParts(content);
  json parts = json::array();
  for (const json& b : content) {
    std::string type = Str(b, "type");
    if (type == "tool_use") {
      const json* input = Field(b, "input");
      parts.push_back(ToolCallPart(Str(b, "id"), Str(b, "name"), input ? *input : json::object()));
    } else if (type == "tool_result") {
      const json* c = Field(b, "content");
      parts.push_back(ToolResponsePart(Str(b, "tool_use_id"), c ? json(JoinedText(*c)) : ""));
    } else {
      parts.push_back(ContentPart(b));
    }
  }
  return parts;
}

void AnthropicRequest(const json& req, GenAiContent* out) {
  if (const json* system = Field(req, "system")) {
    json parts = ContentParts(*system);
    if (!parts.empty()) out->system_instructions = std::move(parts);
  }
  const json* messages = Field(req, "messages");
  if (messages && messages->is_array()) {
    for (const json& m : *messages) {
      const json* content = Field(m, "content");
      out->input_messages.push_back(
          GenAiMessage(Str(m, "role"), content ? AnthropicBlocks(*content) : json::array()));
    }
  }
  ToolDefinitions(req, out, [](const json& t) { return std::make_pair(&t, "input_schema"); });
}

// ---- responses --------------------------------------------------------------------

bool ChatResponse(const json& res, json* out) {
  const json* choices = Field(res, "choices");
  if (!choices || !choices->is_array()) return false;
  for (const json& ch : *choices) {
    json parts = json::array();
    std::string role = "assistant";
    if (const json* m = Field(ch, "message")) {
      if (!Str(*m, "role").empty()) role = Str(*m, "role");
      std::string reasoning = Str(*m, "reasoning_content");
      if (!reasoning.empty()) parts.push_back({{"type", "reasoning"}, {"content", reasoning}});
      if (const json* content = Field(*m, "content")) {
        for (json& p : ContentParts(*content)) parts.push_back(std::move(p));
      }
      if (const json* calls = Field(*m, "tool_calls")) {
        for (json& p : ChatToolCallParts(*calls)) parts.push_back(std::move(p));
      }
    } else if (const json* text = Field(ch, "text"); text && text->is_string()) {
      parts.push_back(TextPart(*text));
    }
    json msg = GenAiMessage(role, std::move(parts));
    msg["finish_reason"] = SemconvFinishReason(Str(ch, "finish_reason"));
    out->push_back(std::move(msg));
  }
  return true;
}

bool ResponsesResponse(const json& res, json* out) {
  const json* output = Field(res, "output");
  if (!output || !output->is_array()) return false;
  json parts = json::array();
  bool tool_call = false;
  for (const json& item : *output) {
    std::string type = Str(item, "type");
    if (type == "message") {
      if (const json* content = Field(item, "content")) {
        for (json& p : ContentParts(*content)) parts.push_back(std::move(p));
      }
    } else if (type == "function_call") {
      tool_call = true;
      parts.push_back(ToolCallPart(Str(item, "call_id"), Str(item, "name"),
                                   ArgumentsValue(Str(item, "arguments"))));
    } else if (type == "reasoning") {
      std::string text;
      if (const json* summary = Field(item, "summary")) text = JoinedText(*summary);
      parts.push_back({{"type", "reasoning"}, {"content", text}});
    }
  }
  std::string reason = "stop";
  if (tool_call) {
    reason = "tool_call";
  } else if (Str(res, "status") == "incomplete") {
    const json* details = Field(res, "incomplete_details");
    reason = details && Str(*details, "reason") == "content_filter" ? "content_filter" : "length";
  } else if (Str(res, "status") == "failed") {
    reason = "error";
  }
  json msg = GenAiMessage("assistant", std::move(parts));
  msg["finish_reason"] = reason;
  out->push_back(std::move(msg));
  return true;
}

bool AnthropicResponse(const json& res, json* out) {
  const json* content = Field(res, "content");
  if (!content || !content->is_array()) return false;
  json msg = GenAiMessage(Str(res, "role").empty() ? "assistant" : Str(res, "role"),
                          AnthropicBlocks(*content));
  msg["finish_reason"] = SemconvFinishReason(Str(res, "stop_reason"));
  out->push_back(std::move(msg));
  return true;
}

}  // namespace

WireFormat WireFormatOf(std::string_view endpoint) {
  size_t q = endpoint.find('?');
  if (q != std::string_view::npos) endpoint = endpoint.substr(0, q);
  if (EndsWith(endpoint, "/embeddings")) return WireFormat::kEmbeddings;
  if (EndsWith(endpoint, "/chat/completions")) return WireFormat::kChatCompletions;
  if (EndsWith(endpoint, "/completions")) return WireFormat::kCompletions;
  if (EndsWith(endpoint, "/responses")) return WireFormat::kResponses;
  if (EndsWith(endpoint, "/messages")) return WireFormat::kAnthropicMessages;
  return WireFormat::kOther;
}

const char* OperationName(WireFormat format) {
  if (format == WireFormat::kEmbeddings) return "embeddings";
  return format == WireFormat::kCompletions ? "text_completion" : "chat";
}

std::string SemconvFinishReason(std::string_view r) {
  if (r == "tool_calls" || r == "function_call" || r == "tool_use" || r == "tool_call")
    return "tool_call";
  if (r == "end_turn" || r == "stop_sequence" || r == "stop" || r == "pause_turn") return "stop";
  if (r == "max_tokens" || r == "length" || r == "max_output_tokens") return "length";
  if (r == "content_filter" || r == "refusal") return "content_filter";
  if (r.empty()) return "stop";
  return std::string(r);
}

json ArgumentsValue(const std::string& text) {
  if (text.empty()) return json::object();
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(text) : parsed;
}

GenAiContent ContentOf(const proto::LlmCall& call,
                       const std::vector<const proto::ToolCall*>& model_tool_calls) {
  GenAiContent out;
  const WireFormat format = WireFormatOf(call.endpoint());
  if (format == WireFormat::kEmbeddings) return out;
  json req = json::parse(call.request_json(), nullptr, /*allow_exceptions=*/false);
  if (!req.is_discarded() && req.is_object()) {
    switch (format) {
      case WireFormat::kChatCompletions:
      case WireFormat::kOther:
        ChatRequest(req, &out);
        break;
      case WireFormat::kCompletions:
        CompletionsRequest(req, &out);
        break;
      case WireFormat::kResponses:
        ResponsesRequest(req, &out);
        break;
      case WireFormat::kAnthropicMessages:
        AnthropicRequest(req, &out);
        break;
      case WireFormat::kEmbeddings:
        break;
    }
  } else if (!call.rendered_prompt().empty()) {
    out.input_messages.push_back(
        GenAiMessage("user", json::array({TextPart(call.rendered_prompt())})));
  }
  if (call.http_status() != 0 && call.http_status() != 200) return out;  // no output
  json res = json::parse(call.response_json(), nullptr, /*allow_exceptions=*/false);
  bool parsed = false;
  if (!res.is_discarded() && res.is_object()) {
    json messages = json::array();
    switch (format) {
      case WireFormat::kChatCompletions:
      case WireFormat::kCompletions:
      case WireFormat::kOther:
        parsed = ChatResponse(res, &messages);
        break;
      case WireFormat::kResponses:
        parsed = ResponsesResponse(res, &messages);
        break;
      case WireFormat::kAnthropicMessages:
        parsed = AnthropicResponse(res, &messages);
        break;
      case WireFormat::kEmbeddings:
        break;
    }
    if (parsed) out.output_messages = std::move(messages);
  }
  if (!parsed) {
    // A streamed proxy response (raw SSE) or an unreadable body: what was recorded.
    json parts = json::array();
    if (!call.output_text().empty()) parts.push_back(TextPart(call.output_text()));
    for (const proto::ToolCall* tc : model_tool_calls) {
      parts.push_back(
          ToolCallPart(tc->call_id(), tc->name(), ArgumentsValue(tc->arguments_json())));
    }
    json msg = GenAiMessage("assistant", std::move(parts));
    msg["finish_reason"] = SemconvFinishReason(call.finish_reason());
    out.output_messages.push_back(std::move(msg));
  }
  return out;
}

}  // namespace trace::exporters
