// End-to-end tests of the recorder's server with the tiny demo model, through HTTP:
// streaming == non-streaming, 16 concurrent clients == each alone (bitwise), prefix
// reuse == cold, tool_choice required / guided_choice, bad requests -> 4xx while the
// server keeps serving and recording, the trace event API landing in the store, and
// answers that wait for their commit (503 once the store cannot take writes).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/model_init.h"
#include "engine/template/chat_template.h"
#include "recorder/server.h"
#include "store/store.h"
#include "tests/recorder/server_fixture.h"

namespace trace::recorder {
namespace {

using namespace testing;  // NOLINT: the fixture
using nlohmann::json;
namespace fs = std::filesystem;

TEST_F(ServerTest, StreamingEqualsNonStreaming) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  json req = {{"messages", Conversation(1)}, {"max_tokens", 12}, {"seed", 5}, {"temperature", 0.9}};
  json plain = Chat(*server, req);
  json streamed = ChatStream(*server, req);
  const json& msg = plain["choices"][0]["message"];
  EXPECT_EQ(streamed["content"], msg["content"]);
  EXPECT_EQ(streamed["finish_reason"], plain["choices"][0]["finish_reason"]);
  EXPECT_EQ(streamed["trace"]["token_ids"], plain["trace"]["token_ids"]);
  EXPECT_EQ(streamed["trace"]["logits_digests"], plain["trace"]["logits_digests"]);
  EXPECT_EQ(plain["trace"]["token_ids"].size(), plain["usage"]["completion_tokens"]);

  // With tool_choice required the tool call is the same either way.
  json treq = {{"messages", Conversation(2)},  {"tools", Tools()},  {"tool_choice", "required"},
               {"parallel_tool_calls", false}, {"max_tokens", 200}, {"seed", 9}};
  json tplain = Chat(*server, treq);
  json tstream = ChatStream(*server, treq);
  EXPECT_EQ(tplain["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(tstream["finish_reason"], "tool_calls");
  // Same calls; only the ids differ (they name the call index).
  json plain_calls = tplain["choices"][0]["message"]["tool_calls"];
  json stream_calls = tstream["tool_calls"];
  ASSERT_EQ(plain_calls.size(), 1u);
  ASSERT_EQ(stream_calls.size(), 1u);
  EXPECT_EQ(stream_calls[0]["function"], plain_calls[0]["function"]);
  EXPECT_NE(stream_calls[0]["id"], plain_calls[0]["id"]);
  EXPECT_EQ(tstream["trace"]["logits_digests"], tplain["trace"]["logits_digests"]);
}

TEST_F(ServerTest, ToolChoiceRequiredAndGuidedChoiceConstrainTheOutput) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  std::set<std::string> names;
  for (int seed = 0; seed < 4; ++seed) {
    // Parallel tool calls are allowed by default (OpenAI's parallel_tool_calls): one or more.
    json r = Chat(*server, {{"messages", Conversation(seed)},
                            {"tools", Tools()},
                            {"tool_choice", "required"},
                            {"max_tokens", 400},
                            {"seed", seed},
                            {"temperature", 1.0}});
    ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
    const json& calls = r["choices"][0]["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u) << r.dump();
    for (const json& call : calls) {
      std::string name = call["function"]["name"];
      EXPECT_TRUE(name == "lookup_customer" || name == "delete_customer") << name;
      json args = json::parse(call["function"]["arguments"].get<std::string>());
      ASSERT_TRUE(args["customer_id"].is_number_integer()) << args.dump();
      EXPECT_GE(args["customer_id"].get<int>(), 1);
      EXPECT_LE(args["customer_id"].get<int>(), 9999);
      names.insert(name);
    }
  }
  json named =
      Chat(*server,
           {{"messages", Conversation(1)},
            {"tools", Tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "delete_customer"}}}}},
            {"max_tokens", 200}});
  EXPECT_EQ(named["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "delete_customer");
  json guided = Chat(*server, {{"messages", Conversation(3)},
                               {"guided_choice", {"approve", "deny", "escalate"}},
                               {"max_tokens", 16},
                               {"seed", 3}});
  std::string content = guided["choices"][0]["message"]["content"];
  EXPECT_TRUE(content == "approve" || content == "deny" || content == "escalate") << content;
}

TEST_F(ServerTest, SixteenConcurrentClientsEqualEachAlone) {
  SchedulerOptions one_at_a_time;
  one_at_a_time.max_active_sequences = 1;
  one_at_a_time.prefix_reuse = false;
  auto alone = StartServer(one_at_a_time);
  auto batched = StartServer();
  ASSERT_TRUE(alone && batched);
  constexpr int kClients = 16;
  auto request = [](int k) {
    json r = {{"messages", Conversation(k)},
              {"max_tokens", 4 + k % 4},
              {"seed", 100 + k},
              {"temperature", k % 4 == 0 ? 0.0 : 0.8}};
    if (k % 3 == 0) r["top_k"] = 40;
    return r;
  };
  std::vector<json> expected(kClients), got(kClients);
  for (int k = 0; k < kClients; ++k) expected[k] = Chat(*alone, request(k));
  std::vector<std::thread> threads;
  for (int k = 0; k < kClients; ++k) {
    threads.emplace_back([&, k] { got[k] = Chat(*batched, request(k)); });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kClients; ++k) {
    EXPECT_EQ(got[k]["trace"]["token_ids"], expected[k]["trace"]["token_ids"]) << "client " << k;
    EXPECT_EQ(got[k]["trace"]["logits_digests"], expected[k]["trace"]["logits_digests"])
        << "client " << k;
    EXPECT_EQ(got[k]["choices"][0]["message"]["content"],
              expected[k]["choices"][0]["message"]["content"]);
  }
  // The batched server really shared forward passes.
  SchedulerStats st = batched->scheduler()->stats();
  EXPECT_LT(st.forward_calls, st.sampled_tokens) << "no batching happened";
}

TEST_F(ServerTest, PrefixReuseEqualsColdComputation) {
  SchedulerOptions cold_options;
  cold_options.prefix_reuse = false;
  auto warm = StartServer();
  auto cold = StartServer(cold_options);
  ASSERT_TRUE(warm && cold);
  json messages = Conversation(4);
  for (int turn = 0; turn < 3; ++turn) {
    json req = {
        {"messages", messages}, {"max_tokens", 8}, {"seed", 42 + turn}, {"temperature", 0.7}};
    json w = Chat(*warm, req);
    json c = Chat(*cold, req);
    EXPECT_EQ(w["trace"]["token_ids"], c["trace"]["token_ids"]) << "turn " << turn;
    EXPECT_EQ(w["trace"]["logits_digests"], c["trace"]["logits_digests"]) << "turn " << turn;
    EXPECT_EQ(c["trace"]["cached_prompt_tokens"], 0);
    if (turn > 0) {
      EXPECT_GT(w["trace"]["cached_prompt_tokens"].get<int>(), 10) << "no prefix reuse";
    }
    messages.push_back({{"role", "assistant"}, {"content", w["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And then turn " + std::to_string(turn)}});
  }
}

TEST_F(ServerTest, BadRequestsGetClearErrorsAndTheRunKeepsRecording) {
  std::string dir = TempDir("bad");
  auto store = store::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto writer = (*store)->BeginRun(proto::RunHeader());
  ASSERT_TRUE(writer.ok());
  std::string run_id = (*writer)->run_id();
  RunLog log(std::move(writer).value(), 3);
  auto server = StartServer({}, &log);
  ASSERT_TRUE(server);
  std::string model = server->model_name();
  struct Case {
    std::string body;
    int status;
    std::string key = kKey;
  };
  std::vector<Case> cases = {
      {"{\"model\": ", 400},
      {json{{"model", model}, {"messages", "hi"}}.dump(), 400},
      {json{{"model", model}, {"messages", Conversation(1)}, {"temperature", -0.5}}.dump(), 400},
      {json{{"model", model}, {"messages", Conversation(1)}, {"top_p", 1.5}}.dump(), 400},
      {json{{"model", model}, {"messages", Conversation(1)}, {"max_tokens", "ten"}}.dump(), 400},
      {json{{"model", model}, {"messages", Conversation(1)}, {"temperature", 2.5}}.dump(), 400},
      {json{{"model", model}, {"messages", Conversation(1)}}.dump(), 401, "wrong-key"},
      {json{{"model", model}, {"messages", Conversation(1)}}.dump(), 401, ""},
  };
  for (const Case& c : cases) {
    auto r = Post(*server, "/v1/chat/completions", json(c.body), c.key);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    json err = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(err.is_discarded()) << r->body;
    EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());
  }
  auto unknown = Post(*server, "/v1/nothing", json::object());
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(Post(*server, "/trace/v1/events", json{{"type", "bogus"}})->status, 422);
  EXPECT_EQ(Post(*server, "/trace/v1/events", json{{"type", "note"}, {"text", 5}})->status, 400);
  // Still serving and recording.
  json ok = Chat(*server, {{"messages", Conversation(1)}, {"max_tokens", 4}});
  EXPECT_EQ(ok["choices"][0]["message"]["role"], "assistant");
  // The event API, the clock and a tool result that also arrives as a role:tool message.
  for (const json& e : {json{{"type", "tool_result"}, {"call_id", "c9"}, {"content", "42"}},
                        json{{"type", "context"}, {"content", "policy"}, {"source", "p.md"}},
                        json{{"type", "template_var"}, {"name", "user"}, {"value", "Ada"}},
                        json{{"type", "tool_call"}, {"name", "f"}, {"arguments", {{"a", 1}}}},
                        json{{"type", "note"}, {"text", "hello"}}}) {
    auto r = Post(*server, "/trace/v1/events", e);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  httplib::Client c("127.0.0.1", server->port());
  auto clock = c.Get("/trace/v1/clock", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock->status, 200);
  json with_tool = Conversation(1);
  with_tool.push_back({{"role", "assistant"},
                       {"content", ""},
                       {"tool_calls",
                        {{{"id", "c9"},
                          {"type", "function"},
                          {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}});
  with_tool.push_back({{"role", "tool"}, {"tool_call_id", "c9"}, {"content", "42"}});
  Chat(*server, {{"messages", with_tool}, {"max_tokens", 2}});
  server->Stop();
  ASSERT_TRUE(log.writer().End(proto::RunEnd()).ok());

  auto events = (*store)->LoadEvents(run_id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  std::map<std::string, int> kinds;
  for (const proto::Event& e : *events) {
    if (e.has_llm_call()) {
      ++kinds["llm_call"];
      EXPECT_EQ(e.llm_call().http_status(), 200);
      EXPECT_GT(e.llm_call().prompt_token_ids_size(), 0);
      EXPECT_EQ(e.llm_call().token_ids_size(), e.llm_call().logits_digests_size());
      EXPECT_FALSE(e.llm_call().rendered_prompt().empty());
      EXPECT_EQ(e.llm_call().seed_used(), DeriveCallSeed(11, kinds["llm_call"] - 1));
    }
    if (e.has_note()) ++kinds[e.note().topic()];
    if (e.has_tool_result()) ++kinds["tool_result"];
    if (e.has_context_chunk()) ++kinds["context"];
    if (e.has_template_var()) ++kinds["template_var"];
    if (e.has_tool_call()) ++kinds["tool_call"];
    if (e.has_clock_read()) ++kinds["clock"];
  }
  EXPECT_EQ(kinds["llm_call"], 2);
  // The two 401s are refused before authentication: counted, recorded as the first one and
  // a summary, not as rejected requests (hostile_input_test.cc floods them).
  EXPECT_EQ(kinds["rejected_request"], static_cast<int>(cases.size()) - 2 + 3);
  EXPECT_EQ(kinds["refused_requests"], 2);
  EXPECT_EQ(kinds["tool_result"], 1);  // once, though posted and sent as role:tool
  EXPECT_EQ(kinds["context"], 1);
  EXPECT_EQ(kinds["template_var"], 1);
  EXPECT_EQ(kinds["tool_call"], 1);
  EXPECT_EQ(kinds["clock"], 1);
  EXPECT_EQ(kinds["agent"], 1);
  fs::remove_all(dir);
}

// The rendered prompt is what Hugging Face's apply_chat_template renders for the same
// request: Python dicts keep the client's key order, so a tool schema's properties and a
// prior tool call's arguments print in the order sent (Qwen3's template `tojson`s both),
// not sorted. The reference is python jinja2 as transformers configures it
// (tests/template/render_jinja.py) over the demo model's real (Qwen3) chat template.
TEST_F(ServerTest, RenderedPromptKeepsClientKeyOrderLikeApplyChatTemplate) {
  using ojson = nlohmann::ordered_json;
  std::string dir = TempDir("order");
  auto store = store::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto writer = (*store)->BeginRun(proto::RunHeader());
  ASSERT_TRUE(writer.ok());
  std::string run_id = (*writer)->run_id();
  RunLog log(std::move(writer).value(), 3);
  auto server = StartServer({}, &log);
  ASSERT_TRUE(server);

  // Non-alphabetical keys at every level the template prints. The shapes are those the
  // recorder passes to the template (OpenAI messages/tools), so the same JSON is the
  // reference renderer's input.
  ojson tools = ojson::parse(R"([{"type": "function", "function": {
      "name": "add_contact", "description": "Adds a contact.",
      "parameters": {"type": "object",
                     "properties": {"name": {"type": "string", "description": "Full name"},
                                    "email": {"type": "string"},
                                    "age": {"type": "integer", "minimum": 0}},
                     "required": ["name", "email"]}}}])");
  ojson messages = ojson::parse(R"([
      {"role": "system", "content": "You manage contacts."},
      {"role": "user", "content": "Add Zed."},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "add_contact",
                                    "arguments": {"zip": "10001", "name": "Zed",
                                                  "email": "zed@example.com"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
      {"role": "user", "content": "Now add Ada."}])");
  ojson body = {
      {"model", server->model_name()}, {"messages", messages}, {"tools", tools}, {"max_tokens", 2}};
  auto r = Post(*server, "/v1/chat/completions", json(body.dump()));  // sent as is, unsorted
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  server->Stop();
  ASSERT_TRUE(log.writer().End(proto::RunEnd()).ok());
  auto events = (*store)->LoadEvents(run_id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  std::string rendered;
  for (const proto::Event& e : *events) {
    if (e.has_llm_call()) {
      rendered = e.llm_call().rendered_prompt();
      EXPECT_EQ(e.llm_call().request_json(), body.dump());  // recorded as received
    }
  }
  ASSERT_FALSE(rendered.empty());

  // The reference: render_jinja.py over the model's own chat template and special tokens.
  auto tmpl = engine::ChatTemplate::FromTokenizerConfig(model_dir() + "/tokenizer_config.json");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  ojson cases = ojson::array({{{"name", "key_order"},
                               {"template", (*tmpl)->source()},
                               {"messages", messages},
                               {"tools", tools},
                               {"add_generation_prompt", true},
                               {"kwargs", ojson::object()},
                               {"bos_token", (*tmpl)->bos_token()},
                               {"eos_token", (*tmpl)->eos_token()}}});
  std::string cases_path = dir + "/cases.json", out_path = dir + "/out.json";
  {
    std::ofstream f(cases_path, std::ios::binary);
    f << cases.dump();
  }
  std::string cmd = std::string("/usr/bin/python3 ") + TRACE_SOURCE_DIR +
                    "/tests/template/render_jinja.py " + cases_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << " failed (python3 with jinja2 is required)";
  std::ifstream in(out_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  json out = json::parse(ss.str());
  ASSERT_TRUE(out.is_array() && out.size() == 1u) << ss.str();
  ASSERT_TRUE(out[0]["ok"].get<bool>()) << out[0].dump();
  std::string reference = out[0]["output"];
  EXPECT_EQ(rendered, reference);
  // The case discriminates: with keys sorted (nlohmann::json) the template prints otherwise.
  auto sorted = (*tmpl)->Render(json(messages), json(tools), true, nullptr);
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  EXPECT_NE(*sorted, reference);

  // And in the order sent, which sorting would have changed.
  const std::string props =
      R"("properties": {"name": {"type": "string", "description": "Full name"}, )"
      R"("email": {"type": "string"}, "age": {"type": "integer", "minimum": 0}})";
  EXPECT_NE(rendered.find(props), std::string::npos) << rendered;
  EXPECT_NE(rendered.find(R"({"zip": "10001", "name": "Zed", "email": "zed@example.com"})"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find(R"({"type": "function", "function": {"name": "add_contact", )"
                          R"("description": "Adds a contact.", "parameters": {"type": )"),
            std::string::npos)
      << rendered;
  fs::remove_all(dir);
}

TEST_F(ServerTest, ProxyModeForwardsAndRecordsAsGiven) {
  auto upstream = StartServer();
  ASSERT_TRUE(upstream);
  std::string dir = TempDir("proxy");
  auto store = store::Store::Open(dir + "/t.db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto writer = (*store)->BeginRun(proto::RunHeader());
  ASSERT_TRUE(writer.ok());
  std::string run_id = (*writer)->run_id();
  RunLog log(std::move(writer).value(), 3);
  // The upstream wants kKey too; the proxy passes it from $TRACE_UPSTREAM_API_KEY, read
  // when the proxy is made.
  setenv("TRACE_UPSTREAM_API_KEY", kKey, 1);
  ServerOptions opts;
  opts.api_key = kKey;
  auto proxy = Server::CreateProxy(upstream->origin() + "/v1", opts);
  ASSERT_TRUE(proxy.ok()) << proxy.status().message();
  (*proxy)->SetRunLog(&log);
  ASSERT_TRUE((*proxy)->Start().ok());
  json req = {{"model", upstream->model_name()},
              {"messages", Conversation(5)},
              {"max_tokens", 6},
              {"seed", 21}};
  auto direct = Post(*upstream, "/v1/chat/completions", req);
  auto via = Post(**proxy, "/v1/chat/completions", req);
  ASSERT_TRUE(direct && via);
  EXPECT_EQ(via->status, 200) << via->body;
  json d = json::parse(direct->body), v = json::parse(via->body);
  EXPECT_EQ(v["choices"], d["choices"]);
  EXPECT_EQ(v["trace"]["token_ids"], d["trace"]["token_ids"]);
  req["stream"] = true;
  auto streamed = Post(**proxy, "/v1/chat/completions", req);
  ASSERT_TRUE(streamed);
  EXPECT_NE(streamed->body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(Post(**proxy, "/v1/chat/completions", req, "bad")->status, 401);
  (*proxy)->Stop();
  ASSERT_TRUE(log.writer().End(proto::RunEnd()).ok());
  auto events = (*store)->LoadEvents(run_id);
  ASSERT_TRUE(events.ok());
  std::vector<proto::LlmCall> calls;
  for (const proto::Event& e : *events) {
    if (e.has_llm_call()) calls.push_back(e.llm_call());
  }
  ASSERT_EQ(calls.size(), 2u);
  std::string text = d["choices"][0]["message"]["content"];
  EXPECT_EQ(calls[0].response_json(), via->body);  // as given to the agent
  EXPECT_EQ(calls[0].output_text(), text);
  EXPECT_FALSE(calls[0].stream());
  EXPECT_TRUE(calls[1].stream());
  EXPECT_EQ(calls[1].output_text(), text);  // reassembled from the stream's deltas
  EXPECT_EQ(calls[1].http_status(), 200);
  fs::remove_all(dir);
}

// Acknowledged means stored, on every path of the split server: once a commit fails (here:
// the run is deleted under the recorder, a failure that is final like a full disk), a
// streamed local call ends with a 503 error event instead of its finish, a relayed stream
// ends with one instead of the upstream's last bytes ("data: [DONE]"), and from then on
// model calls (local and proxied), event batches and clock reads are refused with 503.
TEST_F(ServerTest, AnswersWaitForTheCommitAndA503FollowsAStoreThatFailed) {
  FailableStore failable("failing_store");
  std::unique_ptr<RunLog> local_log = failable.Begin(), proxy_log = failable.Begin();
  ASSERT_TRUE(local_log && proxy_log);
  auto server = StartServer({}, local_log.get());
  ASSERT_TRUE(server);
  auto upstream = StartServer();
  ASSERT_TRUE(upstream);
  setenv("TRACE_UPSTREAM_API_KEY", kKey, 1);
  ServerOptions opts;
  opts.api_key = kKey;
  auto proxy = Server::CreateProxy(upstream->origin() + "/v1", opts);
  ASSERT_TRUE(proxy.ok()) << proxy.status().message();
  (*proxy)->SetRunLog(proxy_log.get());
  ASSERT_TRUE((*proxy)->Start().ok());
  auto answered = [](const httplib::Result& r) { return r ? r->status : -1; };
  auto not_recorded = [](const httplib::Result& r) {
    return r && r->body.find("not recorded, so not answered") != std::string::npos &&
           r->body.find("was deleted") != std::string::npos;
  };
  json req = {{"model", server->model_name()},
              {"messages", Conversation(2)},
              {"max_tokens", 4},
              {"seed", 9}};
  // Answered only once stored: the call is in the store when its answer arrives.
  auto ok = Post(*server, "/v1/chat/completions", req);
  ASSERT_EQ(answered(ok), 200) << (ok ? ok->body : "");
  EXPECT_GE(local_log->writer().durable_seq(), 1u);
  auto stored = failable.store->LoadEvents(local_log->run_id());
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->size(), 1u);
  if (!stored->empty()) {
    EXPECT_EQ(stored->at(0).llm_call().request_id(), json::parse(ok->body)["id"]);
  }

  failable.Fail(*local_log);
  failable.Fail(*proxy_log);

  // A local stream: its text may have gone out, its end waits for the commit that fails.
  req["stream"] = true;
  auto local_stream = Post(*server, "/v1/chat/completions", req);
  ASSERT_EQ(answered(local_stream), 200);
  EXPECT_TRUE(not_recorded(local_stream)) << local_stream->body;
  int chunks = 0, errors = 0;
  std::istringstream lines(local_stream->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    json chunk = json::parse(line.substr(6));
    if (chunk.contains("error")) ++errors;
    for (const json& c : chunk.value("choices", json::array())) {
      ++chunks;
      EXPECT_TRUE(c["finish_reason"].is_null()) << "the stream finished: " << line;
    }
  }
  EXPECT_GE(chunks, 1);  // the text deltas went out before the commit
  EXPECT_EQ(errors, 1);
  // A relayed stream: the upstream's last bytes are held back and replaced by the error.
  req["model"] = upstream->model_name();
  auto relayed = Post(**proxy, "/v1/chat/completions", req);
  ASSERT_EQ(answered(relayed), 200);
  EXPECT_TRUE(not_recorded(relayed)) << relayed->body;
  EXPECT_EQ(relayed->body.find("[DONE]"), std::string::npos) << relayed->body;

  // From now on everything that would be recorded is refused up front.
  req["stream"] = false;
  for (Server* s : {server.get(), proxy->get()}) {
    auto r = Post(*s, "/v1/chat/completions", req);
    EXPECT_EQ(answered(r), 503);
    EXPECT_TRUE(not_recorded(r)) << (r ? r->body : "");
  }
  auto events = Post(*server, "/trace/v1/events", json{{"type", "note"}, {"text", "x"}});
  EXPECT_EQ(answered(events), 503);
  EXPECT_TRUE(not_recorded(events)) << (events ? events->body : "");
  httplib::Client c("127.0.0.1", server->port());
  auto clock = c.Get("/trace/v1/clock", {{"Authorization", std::string("Bearer ") + kKey}});
  EXPECT_EQ(answered(clock), 503);
  EXPECT_TRUE(not_recorded(clock)) << (clock ? clock->body : "");
  // Serving without recording is unaffected.
  req["model"] = upstream->model_name();
  EXPECT_EQ(answered(Post(*upstream, "/v1/chat/completions", req)), 200);
  (*proxy)->Stop();
  server->Stop();
}

}  // namespace
}  // namespace trace::recorder
