// End-to-end tests of the OpenAI Responses and Anthropic Messages APIs, in-process with the
// demo model over HTTP: streamed answers equal the non-streamed ones (text, tool calls,
// token ids), the recording keeps the API and the bytes the client received, conversation
// state (previous_response_id, item_reference, store: false, GET / DELETE), Anthropic's
// headers, auth and error shapes; and proxy mode for each API against a second server
// playing the hosted model: the recorded call equals what the client received, streaming
// included, upstream errors keep their status, the upstream key never reaches the store,
// upstream connections are reused, and an agent that stops reading is recorded as such.
#include <fstream>
#include <set>
#include <sstream>

#include "engine/template/chat_template.h"
#include "recorder/api/anthropic_messages.h"
#include "recorder/api/openai_responses.h"
#include "recorder/api/sse.h"
#include "tests/recorder/server_fixture.h"

namespace trace::recorder {
namespace {

using namespace testing;  // NOLINT: the fixture
using nlohmann::json;

constexpr const char* kAnthropicVersion = "2023-06-01";

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

Reply Send(int port, const std::string& path, const std::string& body,
           const httplib::Headers& headers) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(600, 0);
  auto r = c.Post(path.c_str(), headers, body, "application/json");
  EXPECT_TRUE(r) << path << ": " << httplib::to_string(r.error());
  if (!r) return {};
  return {r->status, r->body, r->get_header_value("Content-Type")};
}

// A stream as the client received it without the server's keep-alive probes (": keep-alive"
// comments, sent when the engine is slow to give a token): the recording leaves them out.
std::string WithoutProbes(std::string stream) {
  const std::string probe = ": keep-alive\n\n";
  for (size_t at; (at = stream.find(probe)) != std::string::npos;) stream.erase(at, probe.size());
  return stream;
}

httplib::Headers OpenAiAuth(const std::string& key = kKey) {
  return {{"Authorization", "Bearer " + key}};
}

httplib::Headers AnthropicAuth(const std::string& key = kKey) {
  return {{"x-api-key", key}, {"anthropic-version", kAnthropicVersion}};
}

Reply Responses(int port, const json& body) {
  return Send(port, "/v1/responses", body.dump(), OpenAiAuth());
}

Reply Messages(int port, const json& body, const std::string& path = "/v1/messages") {
  return Send(port, path, body.dump(), AnthropicAuth());
}

// The text a Responses stream carries, as a client assembles it, and its final response.
struct ResponsesStreamed {
  std::string text;
  json completed;
  std::vector<json> function_calls;
};
ResponsesStreamed ReadResponsesStream(const std::string& stream) {
  ResponsesStreamed out;
  for (const SseEvent& e : ParseSse(stream)) {
    json d = json::parse(e.data);
    if (e.event == "response.output_text.delta") out.text += d["delta"].get<std::string>();
    if (e.event == "response.output_item.done" && d["item"]["type"] == "function_call") {
      out.function_calls.push_back(d["item"]);
    }
    if (e.event == "response.completed" || e.event == "response.incomplete") {
      out.completed = d["response"];
    }
  }
  return out;
}

std::string OutputText(const json& response) {
  std::string text;
  for (const json& item : response["output"]) {
    if (item["type"] != "message") continue;
    for (const json& part : item["content"]) text += part["text"].get<std::string>();
  }
  return text;
}

json WeatherTool() {
  return {{"type", "function"},
          {"name", "get_weather"},
          {"description", "The weather in a city"},
          {"parameters",
           {{"type", "object"},
            {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
            {"required", {"city"}},
            {"additionalProperties", false}}}};
}

TEST_F(ServerTest, ResponsesStreamEqualsResponseAndIsRecordedAsSent) {
  RecordedRun run("responses");
  auto server = StartServer({}, run.log.get());
  ASSERT_TRUE(server);
  const int port = server->port();
  json req = {{"model", "gpt-4.1-mini"},
              {"instructions", "You are terse."},
              {"input", "Say something about the sea."},
              {"max_output_tokens", 24},
              {"seed", 4}};
  Reply plain = Responses(port, req);
  ASSERT_EQ(plain.status, 200) << plain.body;
  json body = json::parse(plain.body);
  EXPECT_EQ(body["object"], "response");
  EXPECT_EQ(body["model"], "gpt-4.1-mini");
  EXPECT_EQ(body["instructions"], "You are terse.");
  EXPECT_TRUE(body["status"] == "completed" || body["status"] == "incomplete");
  EXPECT_EQ(body["usage"]["output_tokens"], body["trace"]["token_ids"].size());
  req["stream"] = true;
  Reply streamed = Responses(port, req);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_NE(streamed.content_type.find("text/event-stream"), std::string::npos);
  ResponsesStreamed s = ReadResponsesStream(streamed.body);
  EXPECT_EQ(s.text, OutputText(body));
  EXPECT_EQ(s.completed["trace"]["token_ids"], body["trace"]["token_ids"]);
  EXPECT_EQ(s.completed["trace"]["logits_digests"], body["trace"]["logits_digests"]);
  EXPECT_EQ(OutputText(s.completed), OutputText(body));

  // Forced tool calls: function_call items, the same streamed and not.
  json tools_req = {{"model", "gpt-4.1-mini"},      {"input", "Weather in Oslo?"},
                    {"tools", {WeatherTool()}},     {"tool_choice", "required"},
                    {"parallel_tool_calls", false},  // forced calls are parallel by default
                    {"max_output_tokens", 80},      {"seed", 9}};
  Reply called = Responses(port, tools_req);
  ASSERT_EQ(called.status, 200) << called.body;
  json cb = json::parse(called.body);
  ASSERT_GE(cb["output"].size(), 1u);
  const json& fc = cb["output"].back();
  EXPECT_EQ(fc["type"], "function_call");
  EXPECT_EQ(fc["name"], "get_weather");
  EXPECT_TRUE(json::parse(fc["arguments"].get<std::string>()).contains("city"));
  tools_req["stream"] = true;
  Reply called_stream = Responses(port, tools_req);
  ResponsesStreamed cs = ReadResponsesStream(called_stream.body);
  ASSERT_EQ(cs.function_calls.size(), 1u);
  EXPECT_EQ(cs.function_calls[0]["arguments"], fc["arguments"]);
  EXPECT_EQ(cs.completed["trace"]["token_ids"], cb["trace"]["token_ids"]);

  // Structured output through text.format.
  json schema = {{"type", "object"},
                 {"properties",
                  {{"mood", {{"type", "string"}, {"enum", {"calm", "rough"}}}},
                   {"waves", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}}}},
                 {"required", {"mood", "waves"}},
                 {"additionalProperties", false}};
  Reply structured = Responses(
      port, {{"model", "m"},
             {"input", "Describe the sea."},
             {"text", {{"format", {{"type", "json_schema"}, {"name", "sea"}, {"schema", schema}}}}},
             {"max_output_tokens", 60},
             {"seed", 2}});
  ASSERT_EQ(structured.status, 200) << structured.body;
  json sea = json::parse(OutputText(json::parse(structured.body)));
  EXPECT_TRUE(sea["mood"] == "calm" || sea["mood"] == "rough") << sea;
  EXPECT_GE(sea["waves"].get<int>(), 0);
  EXPECT_LE(sea["waves"].get<int>(), 9);

  server->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), 5u);
  for (const proto::LlmCall& c : calls) {
    EXPECT_EQ(c.api(), "openai.responses");
    EXPECT_EQ(c.endpoint(), "/v1/responses");
    EXPECT_GT(c.usage().input_tokens(), 0);
  }
  EXPECT_EQ(calls[0].response_json(), plain.body);
  EXPECT_TRUE(calls[0].response_stream().empty());
  // The stream as the client received it, byte for byte, and its non-streamed form.
  EXPECT_EQ(calls[1].response_stream(), WithoutProbes(streamed.body));
  EXPECT_EQ(OutputText(json::parse(calls[1].response_json())), OutputText(body));
  EXPECT_EQ(calls[3].response_stream(), WithoutProbes(called_stream.body));
  EXPECT_FALSE(calls[4].constraint_json().empty());
}

TEST_F(ServerTest, ResponsesConversationStateFromThisRun) {
  RecordedRun run("responses_state");
  auto server = StartServer({}, run.log.get());
  ASSERT_TRUE(server);
  const int port = server->port();
  Reply first = Responses(
      port, {{"model", "m"}, {"input", "My name is Ada."}, {"max_output_tokens", 8}, {"seed", 1}});
  ASSERT_EQ(first.status, 200);
  json r1 = json::parse(first.body);
  const std::string id1 = r1["id"];
  const std::string msg1 = r1["output"][0]["id"];
  const std::string answer1 = OutputText(r1);

  // previous_response_id: the conversation continues.
  Reply second = Responses(port, {{"model", "m"},
                                  {"previous_response_id", id1},
                                  {"input", "What is my name?"},
                                  {"max_output_tokens", 8},
                                  {"seed", 1}});
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(json::parse(second.body)["previous_response_id"], id1);
  // The same conversation sent in full, and with the earlier answer by item_reference.
  json full = {{"model", "m"},
               {"input",
                {{{"role", "user"}, {"content", "My name is Ada."}},
                 {{"role", "assistant"}, {"content", answer1}},
                 {{"role", "user"}, {"content", "What is my name?"}}}},
               {"max_output_tokens", 8},
               {"seed", 1}};
  ASSERT_EQ(Responses(port, full).status, 200);
  json by_ref = full;
  by_ref["input"][1] = {{"type", "item_reference"}, {"id", msg1}};
  ASSERT_EQ(Responses(port, by_ref).status, 200);

  // Unknown ids: a 404 naming them, in OpenAI's shape.
  Reply unknown =
      Responses(port, {{"model", "m"}, {"previous_response_id", "resp_nope"}, {"input", "x"}});
  EXPECT_EQ(unknown.status, 404);
  json ue = json::parse(unknown.body);
  EXPECT_NE(ue["error"]["message"].get<std::string>().find("resp_nope"), std::string::npos);
  EXPECT_EQ(ue["error"]["param"], "previous_response_id");
  Reply unknown_item = Responses(
      port, {{"model", "m"}, {"input", {{{"type", "item_reference"}, {"id", "msg_nope"}}}}});
  EXPECT_EQ(unknown_item.status, 404);
  EXPECT_NE(unknown_item.body.find("msg_nope"), std::string::npos);
  // A function_call_output must answer a function_call of the conversation (OpenAI's 400).
  const json output = {{"type", "function_call_output"}, {"call_id", "call_9"}, {"output", "1"}};
  Reply orphan = Responses(port, {{"model", "m"}, {"input", {output}}});
  EXPECT_EQ(orphan.status, 400) << orphan.body;
  EXPECT_NE(orphan.body.find("call_9"), std::string::npos) << orphan.body;
  Reply orphan_after =
      Responses(port, {{"model", "m"}, {"previous_response_id", id1}, {"input", {output}}});
  EXPECT_EQ(orphan_after.status, 400) << orphan_after.body;

  // store: false is not kept.
  Reply unstored =
      Responses(port, {{"model", "m"}, {"input", "x"}, {"store", false}, {"max_output_tokens", 2}});
  ASSERT_EQ(unstored.status, 200);
  const std::string unstored_id = json::parse(unstored.body)["id"];
  EXPECT_EQ(Responses(port, {{"model", "m"}, {"previous_response_id", unstored_id}, {"input", "y"}})
                .status,
            404);

  // Retrieve and delete.
  httplib::Client c("127.0.0.1", port);
  auto got = c.Get(("/v1/responses/" + id1).c_str(), OpenAiAuth());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, first.body);
  auto deleted = c.Delete(("/v1/responses/" + id1).c_str(), OpenAiAuth());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(json::parse(deleted->body)["deleted"], true);
  EXPECT_EQ(c.Get(("/v1/responses/" + id1).c_str(), OpenAiAuth())->status, 404);

  server->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), 5u);
  // Turn 2 by id, in full and by reference render the same prompt.
  EXPECT_EQ(calls[1].rendered_prompt(), calls[2].rendered_prompt());
  EXPECT_EQ(calls[2].rendered_prompt(), calls[3].rendered_prompt());
  EXPECT_NE(calls[1].rendered_prompt().find("My name is Ada."), std::string::npos);
  EXPECT_NE(calls[1].rendered_prompt().find(answer1), std::string::npos);
}

// The system prompt in each API's spellings reaches the model: the prompt each request is
// rendered to is Jinja2's rendering (render_jinja.py, the model's own template) of the
// system message then the user's, byte for byte. Responses' `instructions` and Anthropic's
// `system` were once dropped (inserted as two arrays that the template skipped).
TEST_F(ServerTest, SystemPromptsReachThePromptInEverySpelling) {
  RecordedRun run("system_prompts");
  auto server = StartServer({}, run.log.get());
  ASSERT_TRUE(server);
  const int port = server->port();
  const std::string system = "You are terse.", user = "Hello there.";
  const json user_msg = {{"role", "user"}, {"content", user}};
  const json parts = {{{"type", "text"}, {"text", "You are "}},
                      {{"type", "text"}, {"text", "terse."}}};
  std::vector<std::pair<std::string, Reply>> replies;
  auto chat = [&](const json& first) {
    return Send(port, "/v1/chat/completions",
                json{{"model", "m"}, {"max_tokens", 1}, {"messages", {first, user_msg}}}.dump(),
                OpenAiAuth());
  };
  replies.emplace_back("chat system", chat({{"role", "system"}, {"content", system}}));
  replies.emplace_back("chat developer", chat({{"role", "developer"}, {"content", system}}));
  replies.emplace_back("chat system parts", chat({{"role", "system"}, {"content", parts}}));
  replies.emplace_back("responses instructions", Responses(port, {{"model", "m"},
                                                                  {"max_output_tokens", 1},
                                                                  {"instructions", system},
                                                                  {"input", user}}));
  replies.emplace_back(
      "responses developer item",
      Responses(
          port,
          {{"model", "m"},
           {"max_output_tokens", 1},
           {"input",
            {{{"role", "developer"}, {"content", {{{"type", "input_text"}, {"text", system}}}}},
             user_msg}}}));
  replies.emplace_back(
      "anthropic system",
      Messages(port,
               {{"model", "m"}, {"max_tokens", 1}, {"system", system}, {"messages", {user_msg}}}));
  replies.emplace_back(
      "anthropic system blocks",
      Messages(port,
               {{"model", "m"}, {"max_tokens", 1}, {"system", parts}, {"messages", {user_msg}}}));
  for (const auto& [what, reply] : replies) EXPECT_EQ(reply.status, 200) << what << reply.body;
  server->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), replies.size());

  auto tmpl = engine::ChatTemplate::FromTokenizerConfig(model_dir() + "/tokenizer_config.json");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  nlohmann::ordered_json cases = nlohmann::ordered_json::array(
      {{{"name", "system_then_user"},
        {"template", (*tmpl)->source()},
        {"messages", {{{"role", "system"}, {"content", system}}, user_msg}},
        {"tools", nullptr},
        {"add_generation_prompt", true},
        {"kwargs", nlohmann::ordered_json::object()},
        {"bos_token", (*tmpl)->bos_token()},
        {"eos_token", (*tmpl)->eos_token()}}});
  const std::string cases_path = run.dir + "/cases.json", out_path = run.dir + "/out.json";
  std::ofstream(cases_path, std::ios::binary) << cases.dump();
  const std::string cmd = std::string("/usr/bin/python3 ") + TRACE_SOURCE_DIR +
                          "/tests/template/render_jinja.py " + cases_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " failed (python3 with jinja2 is required)";
  std::ifstream out(out_path, std::ios::binary);
  const json reference = json::parse(out).at(0);
  ASSERT_TRUE(reference["ok"].get<bool>()) << reference.dump();
  const std::string want = reference["output"].get<std::string>();
  ASSERT_NE(want.find(system), std::string::npos);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].rendered_prompt(), want) << replies[i].first;
  }
}

// A conversation the chat template refuses is a 422 that names the model, not where the
// model lives on the server's disk. The model: the demo model's files under a folder of
// the test's, with a template that refuses every conversation.
TEST_F(ServerTest, TemplateRefusalNamesTheModelNotItsPath) {
  const fs::path dir = fs::path(TempDir("refusing")) / "refusing-model";
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(model_dir())) {
    if (f.path().filename() != "tokenizer_config.json") {
      fs::create_symlink(f.path(), dir / f.path().filename());
    }
  }
  std::ifstream in(model_dir() + "/tokenizer_config.json", std::ios::binary);
  json config = json::parse(in);
  config["chat_template"] = "{{ raise_exception('refused: ' + messages[0].content) }}";
  std::ofstream(dir / "tokenizer_config.json", std::ios::binary) << config.dump();
  engine::EngineOptions eo;
  eo.threads = 1;
  auto backend = LoadLocalBackend(dir.string(), eo, {}, /*hash_weights=*/false);
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  ServerOptions opts;
  opts.api_key = kKey;
  auto server = Server::CreateLocal(std::move(backend).value(), opts);
  ASSERT_TRUE(server->Start().ok());
  Reply r = Send(server->port(), "/v1/chat/completions",
                 json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}}.dump(),
                 OpenAiAuth());
  server->Stop();
  fs::remove_all(dir.parent_path());
  ASSERT_EQ(r.status, 422) << r.body;
  const std::string message = json::parse(r.body)["error"]["message"];
  EXPECT_NE(message.find("refused: Hi"), std::string::npos) << message;
  EXPECT_NE(message.find("refusing-model/tokenizer_config.json"), std::string::npos) << message;
  EXPECT_EQ(message.find(dir.parent_path().string()), std::string::npos) << message;
}

TEST_F(ServerTest, AnthropicMessagesStreamHeadersAndErrors) {
  RecordedRun run("anthropic");
  auto server = StartServer({}, run.log.get());
  ASSERT_TRUE(server);
  const int port = server->port();
  json req = {{"model", "claude-sonnet-4-5"},
              {"max_tokens", 24},
              {"system", "You are terse."},
              {"messages", {{{"role", "user"}, {"content", "Tell me about the sea."}}}},
              {"seed", 3}};
  Reply plain = Messages(port, req);
  ASSERT_EQ(plain.status, 200) << plain.body;
  json body = json::parse(plain.body);
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["model"], "claude-sonnet-4-5");
  EXPECT_EQ(body["usage"]["output_tokens"], body["trace"]["token_ids"].size());
  req["stream"] = true;
  Reply streamed = Messages(port, req, "/messages");  // the Vercel AI SDK's route
  ASSERT_EQ(streamed.status, 200);
  json folded = AnthropicMessagesFormat().FoldStream(streamed.body);
  EXPECT_EQ(folded["content"], body["content"]);
  EXPECT_EQ(folded["trace"]["token_ids"], body["trace"]["token_ids"]);
  EXPECT_EQ(folded["stop_reason"], body["stop_reason"]);

  // A forced tool call (tool_choice any), then its result sent back.
  json tools = {{{"name", "get_weather"},
                 {"description", "The weather in a city"},
                 {"input_schema",
                  {{"type", "object"},
                   {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                   {"required", {"city"}}}}}};
  json ask = {{"model", "claude"},
              {"max_tokens", 80},
              {"tools", tools},
              {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
              {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
              {"seed", 5}};
  Reply called = Messages(port, ask);
  ASSERT_EQ(called.status, 200) << called.body;
  json cb = json::parse(called.body);
  EXPECT_EQ(cb["stop_reason"], "tool_use");
  const json& use = cb["content"].back();
  ASSERT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);
  ask["stream"] = true;
  Reply called_stream = Messages(port, ask);
  // The same blocks; only the tool_use ids differ (each call names its own).
  json streamed_content = AnthropicMessagesFormat().FoldStream(called_stream.body)["content"];
  json plain_content = cb["content"];
  for (json* content : {&streamed_content, &plain_content}) {
    for (json& block : *content) block.erase("id");
  }
  EXPECT_EQ(streamed_content, plain_content);
  json answer = {
      {"model", "claude"},
      {"max_tokens", 8},
      {"tools", tools},
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Oslo?"}},
        {{"role", "assistant"}, {"content", cb["content"]}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", use["id"]}, {"content", "4C"}}}}}}}};
  ASSERT_EQ(Messages(port, answer).status, 200);

  // A stop sequence is reported as one; a final assistant turn is continued.
  Reply prefilled = Messages(port, {{"model", "c"},
                                    {"max_tokens", 6},
                                    {"messages",
                                     {{{"role", "user"}, {"content", "Count."}},
                                      {{"role", "assistant"}, {"content", "One, two,"}}}}});
  ASSERT_EQ(prefilled.status, 200) << prefilled.body;

  // Headers and errors in Anthropic's shape.
  auto expect_error = [](const Reply& r, int status, const std::string& type) {
    EXPECT_EQ(r.status, status) << r.body;
    json e = json::parse(r.body, nullptr, false);
    EXPECT_EQ(e["type"], "error") << r.body;
    EXPECT_EQ(e["error"]["type"], type) << r.body;
    EXPECT_FALSE(e["error"]["message"].get<std::string>().empty());
  };
  expect_error(Send(port, "/v1/messages", req.dump(), {{"x-api-key", kKey}}), 400,
               "invalid_request_error");  // no anthropic-version
  expect_error(Send(port, "/v1/messages", req.dump(), AnthropicAuth("wrong")), 401,
               "authentication_error");
  expect_error(Send(port, "/v1/messages", req.dump(), {{"anthropic-version", kAnthropicVersion}}),
               401, "authentication_error");
  expect_error(Send(port, "/v1/messages", "{oops", AnthropicAuth()), 400, "invalid_request_error");
  // The admission checks that run before any route answer in Anthropic's shape here too:
  // a body nested past the depth limit, a foreign Host (DNS rebinding), a browser Origin.
  expect_error(Send(port, "/v1/messages", std::string(100'000, '['), AnthropicAuth()), 400,
               "invalid_request_error");
  httplib::Headers foreign_host = AnthropicAuth();
  foreign_host.emplace("Host", "attacker.example");
  expect_error(Send(port, "/v1/messages", req.dump(), foreign_host), 403, "permission_error");
  httplib::Headers foreign_origin = AnthropicAuth();
  foreign_origin.emplace("Origin", "https://attacker.example");
  expect_error(Send(port, "/messages", req.dump(), foreign_origin), 403, "permission_error");
  // ... and OpenAI's shape on the OpenAI routes.
  Reply too_deep = Send(port, "/v1/responses", std::string(100'000, '['), OpenAiAuth());
  EXPECT_EQ(too_deep.status, 400);
  EXPECT_EQ(json::parse(too_deep.body, nullptr, false)["error"]["code"], "json_too_deep")
      << too_deep.body;
  json no_max = req;
  no_max.erase("max_tokens");
  expect_error(Messages(port, no_max), 400, "invalid_request_error");
  // A bearer token works too (the run token is the same either way).
  EXPECT_EQ(Send(port, "/v1/messages", req.dump(),
                 {{"Authorization", std::string("Bearer ") + kKey},
                  {"anthropic-version", kAnthropicVersion}})
                .status,
            200);
  // The models list in Anthropic's shape for an Anthropic client.
  httplib::Client c("127.0.0.1", port);
  auto models = c.Get("/v1/models", AnthropicAuth());
  ASSERT_TRUE(models);
  json m = json::parse(models->body);
  EXPECT_EQ(m["data"][0]["type"], "model");
  EXPECT_EQ(m["has_more"], false);

  server->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), 7u);
  for (const proto::LlmCall& c : calls) EXPECT_EQ(c.api(), "anthropic.messages");
  EXPECT_EQ(calls[1].endpoint(), "/messages");
  EXPECT_EQ(calls[1].response_stream(), WithoutProbes(streamed.body));
  EXPECT_EQ(calls[0].response_json(), plain.body);
  // The prefill ends the prompt the model continued.
  const std::string& prompt = calls[5].rendered_prompt();
  EXPECT_EQ(prompt.substr(prompt.size() - 9), "One, two,");
}

// A second in-process server plays the hosted model (with its own key); the proxy records.
class ProxyTest : public ServerTest {
 public:
  static constexpr const char* kUpstreamKey = "upstream-secret-5c1e0f";

  void SetUp() override {
    engine::EngineOptions eo;
    eo.threads = 2;
    auto backend = LoadLocalBackend(model_dir(), eo, {}, /*hash_weights=*/false);
    ASSERT_TRUE(backend.ok());
    ServerOptions opts;
    opts.api_key = kUpstreamKey;
    opts.run_seed = 11;
    upstream_ = Server::CreateLocal(std::move(backend).value(), opts);
    ASSERT_TRUE(upstream_->Start().ok());
    setenv("TRACE_UPSTREAM_API_KEY", kUpstreamKey, 1);
  }
  void TearDown() override {
    unsetenv("TRACE_UPSTREAM_API_KEY");
    if (upstream_) upstream_->Stop();
  }

  std::unique_ptr<Server> StartProxy(const std::string& upstream_url, RunLog* log) {
    ServerOptions opts;
    opts.api_key = kKey;
    auto proxy = Server::CreateProxy(upstream_url, opts);
    EXPECT_TRUE(proxy.ok()) << proxy.status().message();
    if (!proxy.ok()) return nullptr;
    (*proxy)->SetRunLog(log);
    EXPECT_TRUE((*proxy)->Start().ok());
    return std::move(proxy).value();
  }

  std::unique_ptr<Server> upstream_;
};

TEST_F(ProxyTest, EachApiRecordedAsTheClientReceivedIt) {
  RecordedRun run("proxy_apis");
  auto proxy = StartProxy(upstream_->origin() + "/v1", run.log.get());
  ASSERT_TRUE(proxy);
  const int port = proxy->port();
  struct Exchange {
    std::string api;
    bool stream;
    Reply reply;
  };
  std::vector<Exchange> sent;
  json tool = WeatherTool();
  for (bool stream : {false, true}) {
    json chat = {{"model", "gpt-4o"},
                 {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                 {"tools",
                  {{{"type", "function"},
                    {"function", {{"name", tool["name"]}, {"parameters", tool["parameters"]}}}}}},
                 {"tool_choice", "required"},
                 {"parallel_tool_calls", false},
                 {"max_tokens", 60},
                 {"seed", 7},
                 {"stream", stream}};
    if (stream) chat["stream_options"] = {{"include_usage", true}};
    sent.push_back({"openai.chat_completions", stream,
                    Send(port, "/v1/chat/completions", chat.dump(), OpenAiAuth())});
    json responses = {{"model", "gpt-4.1"},
                      {"input", "Weather in Oslo?"},
                      {"tools", {tool}},
                      {"tool_choice", "required"},
                      {"parallel_tool_calls", false},
                      {"max_output_tokens", 60},
                      {"seed", 7},
                      {"stream", stream}};
    sent.push_back({"openai.responses", stream, Responses(port, responses)});
    json messages = {{"model", "claude"},
                     {"max_tokens", 60},
                     {"tools", {{{"name", "get_weather"}, {"input_schema", tool["parameters"]}}}},
                     {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                     {"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                     {"seed", 7},
                     {"stream", stream}};
    sent.push_back({"anthropic.messages", stream,
                    Messages(port, messages, stream ? "/messages" : "/v1/messages")});
  }
  // An upstream error on a streamed request arrives as the error, not inside a 200 stream.
  Reply refused = Messages(port, {{"model", "c"},
                                  {"max_tokens", 5},
                                  {"temperature", 3},
                                  {"stream", true},
                                  {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(json::parse(refused.body)["error"]["type"], "invalid_request_error");

  proxy->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), sent.size() + 1);
  for (size_t i = 0; i < sent.size(); ++i) {
    const proto::LlmCall& c = calls[i];
    const Exchange& x = sent[i];
    SCOPED_TRACE(x.api + (x.stream ? " streamed" : ""));
    ASSERT_EQ(x.reply.status, 200) << x.reply.body;
    EXPECT_EQ(c.api(), x.api);
    EXPECT_EQ(c.upstream(), upstream_->origin() + "/v1");
    EXPECT_EQ(c.http_status(), 200);
    EXPECT_EQ(c.stream(), x.stream);
    EXPECT_EQ(c.finish_reason(), "tool_calls");
    EXPECT_EQ(c.prompt_token_ids_size(), 0);
    // What the client received, byte for byte.
    if (x.stream) {
      EXPECT_EQ(c.response_stream(), x.reply.body);
      EXPECT_NE(x.reply.content_type.find("text/event-stream"), std::string::npos);
    } else {
      EXPECT_EQ(c.response_json(), x.reply.body);
    }
    // The upstream's ids and usage.
    json object = json::parse(c.response_json());
    EXPECT_EQ(c.request_id(), object["id"]);
    EXPECT_EQ(c.usage().output_tokens(), object["trace"]["token_ids"].size());
    EXPECT_GT(c.usage().input_tokens(), 0);
    EXPECT_FALSE(c.upstream_request_id().empty());
  }
  EXPECT_EQ(calls.back().http_status(), 400);
  EXPECT_EQ(calls.back().finish_reason(), "error");
  EXPECT_EQ(calls.back().response_json(), refused.body);
  // A streamed answer folds to the same answer as the non-streamed one (same seed).
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(calls[i].output_text(), calls[i + 3].output_text());
  }
  // Tool calls the upstream made are recorded, pointing at their call.
  auto events = run.store->LoadEvents(run.run_id);
  ASSERT_TRUE(events.ok());
  int tool_calls = 0;
  for (const proto::Event& e : *events) tool_calls += e.has_tool_call();
  EXPECT_GE(tool_calls, 6);
  // The upstream key is nowhere in the store: not in any event, not in the file.
  for (const proto::Event& e : *events) {
    EXPECT_EQ(e.DebugString().find(kUpstreamKey), std::string::npos) << e.DebugString();
  }
  for (const char* suffix : {"", "-wal"}) {
    std::ifstream f(run.dir + "/t.db" + suffix, std::ios::binary);
    std::stringstream bytes;
    bytes << f.rdbuf();
    EXPECT_EQ(bytes.str().find(kUpstreamKey), std::string::npos);
  }
}

TEST_F(ProxyTest, UpstreamConnectionsAreReused) {
  // A bare upstream that notes which client port each request came from.
  httplib::Server fake;
  fake.set_keep_alive_max_count(1000);
  std::mutex mu;
  std::set<int> ports;
  fake.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ports.insert(req.remote_port);
    }
    res.set_content(
        R"({"id":"chatcmpl-1","object":"chat.completion","model":"x","choices":[{"index":0,)"
        R"("message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],)"
        R"("usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})",
        "application/json");
  });
  int fake_port = fake.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { fake.listen_after_bind(); });
  while (!fake.is_running()) std::this_thread::yield();
  RecordedRun run("proxy_pool");
  auto proxy = StartProxy("http://127.0.0.1:" + std::to_string(fake_port) + "/v1", run.log.get());
  ASSERT_TRUE(proxy);
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    Reply r =
        Send(proxy->port(), "/v1/chat/completions",
             json{{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump(),
             OpenAiAuth());
    ASSERT_EQ(r.status, 200);
  }
  proxy->Stop();
  fake.stop();
  serving.join();
  // Sequential calls share one kept-alive connection.
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(run.Calls().size(), static_cast<size_t>(kRequests));
}

TEST_F(ProxyTest, AStreamTheAgentStopsReadingIsRecordedAsCancelled) {
  RecordedRun run("proxy_cancel");
  auto proxy = StartProxy(upstream_->origin() + "/v1", run.log.get());
  ASSERT_TRUE(proxy);
  httplib::Client c("127.0.0.1", proxy->port());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/responses";
  req.headers = OpenAiAuth();
  req.body = json{
      {"model", "m"},
      {"input", "Tell a long story."},
      {"max_output_tokens", 1500},
      {"stream",
       true}}.dump();
  req.set_header("Content-Type", "application/json");
  std::string got;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    got.append(data, n);
    return got.find("response.output_text.delta") == std::string::npos;  // then stop reading
  };
  auto r = c.send(req);
  EXPECT_FALSE(r);  // cancelled by us
  // The server goes on.
  EXPECT_EQ(
      Responses(proxy->port(), {{"model", "m"}, {"input", "hi"}, {"max_output_tokens", 2}}).status,
      200);
  proxy->Stop();
  std::vector<proto::LlmCall> calls = run.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].finish_reason(), "cancelled");
  EXPECT_TRUE(calls[0].stream());
  EXPECT_FALSE(calls[0].response_stream().empty());
  EXPECT_EQ(calls[0].response_stream().rfind(got.substr(0, 40), 0), 0u);
  EXPECT_EQ(calls[1].finish_reason(), "length");  // max_output_tokens 2
}

// Acknowledged means stored, in every API's shape: once the store stops taking writes (the
// runs deleted under the recorder), a streamed Responses or Messages answer, local or
// relayed from an upstream, ends with that API's error event instead of its end
// (response.completed, message_stop), and from then on calls are refused with a 503 in the
// route's shape (Anthropic's overloaded_error on the Messages routes).
TEST_F(ProxyTest, AStoreThatFailedEndsEveryApisStreamsWithItsErrorAndRefuses) {
  FailableStore store("failing_store_apis");
  std::unique_ptr<RunLog> local_log = store.Begin(), proxy_log = store.Begin();
  ASSERT_TRUE(local_log && proxy_log);
  auto local = StartServer({}, local_log.get());
  ASSERT_TRUE(local);
  auto proxy = StartProxy(upstream_->origin() + "/v1", proxy_log.get());
  ASSERT_TRUE(proxy);
  store.Fail(*local_log);
  store.Fail(*proxy_log);

  json responses = {{"model", "m"},
                    {"input", "Tell me about the sea."},
                    {"max_output_tokens", 6},
                    {"seed", 3},
                    {"stream", true}};
  json messages = {{"model", "c"},
                   {"max_tokens", 6},
                   {"seed", 3},
                   {"stream", true},
                   {"messages", {{{"role", "user"}, {"content", "Tell me about the sea."}}}}};
  for (Server* s : {local.get(), proxy.get()}) {
    SCOPED_TRACE(s == local.get() ? "local" : "proxy");
    // The first call's commit fails: its stream ends with the API's error event.
    Reply r = Responses(s->port(), responses);
    ASSERT_EQ(r.status, 200) << r.body;
    std::vector<SseEvent> events = ParseSse(r.body);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front().event, "response.created");
    EXPECT_EQ(events.back().event, "error") << r.body;
    EXPECT_NE(events.back().data.find("not recorded, so not answered"), std::string::npos);
    for (const SseEvent& e : events) EXPECT_NE(e.event, "response.completed");
    // Then everything is refused up front, in each API's shape.
    responses["stream"] = false;
    Reply refused = Responses(s->port(), responses);
    responses["stream"] = true;
    EXPECT_EQ(refused.status, 503);
    EXPECT_NE(json::parse(refused.body)["error"]["message"].get<std::string>().find("not recorded"),
              std::string::npos);
    Reply anthropic = Messages(s->port(), messages);
    EXPECT_EQ(anthropic.status, 503);
    json e = json::parse(anthropic.body);
    EXPECT_EQ(e["type"], "error") << anthropic.body;
    EXPECT_EQ(e["error"]["type"], "overloaded_error") << anthropic.body;
  }
  // A Messages stream whose commit fails: a fresh run, failed before its first call.
  std::unique_ptr<RunLog> messages_log = store.Begin();
  ASSERT_TRUE(messages_log);
  auto messages_server = StartServer({}, messages_log.get());
  ASSERT_TRUE(messages_server);
  store.Fail(*messages_log);
  Reply m = Messages(messages_server->port(), messages);
  ASSERT_EQ(m.status, 200) << m.body;
  std::vector<SseEvent> events = ParseSse(m.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().event, "message_start");
  EXPECT_EQ(events.back().event, "error") << m.body;
  EXPECT_EQ(json::parse(events.back().data)["type"], "error");
  for (const SseEvent& ev : events) EXPECT_NE(ev.event, "message_stop");
  messages_server->Stop();
  proxy->Stop();
  local->Stop();
}

}  // namespace
}  // namespace trace::recorder
