// The fixture of the recorder's server tests: a demo model made once per suite, servers
// started in-process with a test key, a run in a fresh store to record into, and HTTP helpers
// (plain and streamed chat, the conversations and tools the tests send).
//
// Ownership: each test owns the servers it starts. Thread safety: helpers are reentrant.
// Errors: helpers fail the running test on transport or HTTP errors.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/run_log.h"
#include "recorder/server.h"
#include "store/store.h"
#include "tests/common/demo_model.h"

namespace trace::recorder::testing {

using nlohmann::json;
namespace fs = std::filesystem;

inline constexpr const char* kKey = "test-key";

inline std::string TempDir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("trace_rec_" + name + "_" + std::to_string(getpid()));
  fs::create_directories(p);
  return p.string();
}

// A run in a fresh store, for tests that look at what was recorded.
struct RecordedRun {
  explicit RecordedRun(const std::string& name) : dir(TempDir(name)) {
    auto s = store::Store::Open(dir + "/t.db");
    EXPECT_TRUE(s.ok()) << s.status().message();
    store = std::move(s).value();
    auto w = store->BeginRun(proto::RunHeader());
    EXPECT_TRUE(w.ok());
    run_id = (*w)->run_id();
    log = std::make_unique<RunLog>(std::move(w).value(), 5);
  }
  ~RecordedRun() { fs::remove_all(dir); }
  // Ends the run; its events.
  std::vector<proto::Event> End() {
    EXPECT_TRUE(log->writer().End(proto::RunEnd()).ok());
    auto events = store->LoadEvents(run_id);
    EXPECT_TRUE(events.ok());
    return events.ok() ? *events : std::vector<proto::Event>{};
  }
  // Ends the run; its model calls.
  std::vector<proto::LlmCall> Calls() {
    std::vector<proto::LlmCall> out;
    for (const proto::Event& e : End()) {
      if (e.has_llm_call()) out.push_back(e.llm_call());
    }
    return out;
  }
  std::string dir;
  std::unique_ptr<store::Store> store;
  std::string run_id;
  std::unique_ptr<RunLog> log;
};

// A store whose runs can be failed under a running recorder: Begin() starts a run and its
// RunLog; Fail() deletes that run (a failure that is final, as a full disk is), so the
// run's next commit fails and its server answers 503 from then on.
struct FailableStore {
  explicit FailableStore(const std::string& name) : dir(TempDir(name)) {
    auto s = store::Store::Open(dir + "/t.db");
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (s.ok()) store = std::move(s).value();
  }
  ~FailableStore() { fs::remove_all(dir); }
  std::unique_ptr<RunLog> Begin() {
    auto writer = store->BeginRun(proto::RunHeader());
    EXPECT_TRUE(writer.ok()) << writer.status().message();
    return writer.ok() ? std::make_unique<RunLog>(std::move(writer).value(), 3) : nullptr;
  }
  void Fail(const RunLog& log) {
    store::DeleteOptions force;
    force.force = true;
    Status st = store->DeleteRun(log.run_id(), force);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  std::string dir;
  std::unique_ptr<store::Store> store;
};

class ServerTest : public ::trace::testing::DemoModelSuite {
 public:
  // The model's folder is named "demo": the model name the servers serve.
  static void SetUpTestSuite() { SetUpDemoModel("demo"); }

  std::unique_ptr<Server> StartServer(SchedulerOptions so = {}, RunLog* log = nullptr,
                                      std::vector<std::string> served_names = {}) {
    ServerOptions opts;
    opts.served_model_names = std::move(served_names);
    return StartServerWith(opts, log, so);
  }

  // A server with these options (the test key and run seed 11 unless set).
  std::unique_ptr<Server> StartServerWith(ServerOptions opts, RunLog* log = nullptr,
                                          SchedulerOptions so = {}) {
    engine::EngineOptions eo;
    eo.threads = 2;
    auto backend = LoadLocalBackend(model_dir(), eo, so, /*hash_weights=*/false);
    EXPECT_TRUE(backend.ok()) << backend.status().message();
    if (!backend.ok()) return nullptr;
    if (opts.api_key.empty()) opts.api_key = kKey;
    if (opts.run_seed == 0) opts.run_seed = 11;
    auto server = Server::CreateLocal(std::move(backend).value(), opts);
    server->SetRunLog(log);
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.message();
    return server;
  }

  static httplib::Result Post(Server& s, const std::string& path, const json& body,
                              const std::string& key = kKey) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(600, 0);
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    return c.Post(path.c_str(), h, body.is_string() ? body.get<std::string>() : body.dump(),
                  "application/json");
  }

  // Non-streamed chat completion; fails the test unless HTTP 200.
  static json Chat(Server& s, json body) {
    body["model"] = s.model_name();
    auto r = Post(s, "/v1/chat/completions", body);
    EXPECT_TRUE(r) << "no response: " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }

  // Streamed: the content deltas joined, tool_calls, finish_reason and the trace extension.
  static json ChatStream(Server& s, json body) {
    body["model"] = s.model_name();
    body["stream"] = true;
    auto r = Post(s, "/v1/chat/completions", body);
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    json out = {{"content", ""}, {"tool_calls", json::array()}};
    bool done = false;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("data: ", 0) != 0) continue;
      std::string data = line.substr(6);
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      json chunk = json::parse(data);
      if (chunk.contains("trace")) out["trace"] = chunk["trace"];
      for (const json& c : chunk["choices"]) {
        const json& d = c["delta"];
        if (d.contains("content") && d["content"].is_string()) {
          out["content"] = out["content"].get<std::string>() + d["content"].get<std::string>();
        }
        if (d.contains("tool_calls")) {
          for (json tc : d["tool_calls"]) {
            tc.erase("index");
            out["tool_calls"].push_back(tc);
          }
        }
        if (!c["finish_reason"].is_null()) out["finish_reason"] = c["finish_reason"];
      }
    }
    EXPECT_TRUE(done) << "stream without [DONE]";
    return out;
  }

  static json Conversation(int k) {
    return json::array(
        {{{"role", "system"}, {"content", "You are terse."}},
         {{"role", "user"},
          {"content", "Question number " + std::to_string(k) + ": what is " +
                          std::to_string(k * 7) + " plus " + std::to_string(k) + "?"}}});
  }

  static json Tools() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "lookup_customer",
        "parameters": {"type": "object", "required": ["customer_id"], "properties":
                       {"customer_id": {"type": "integer", "minimum": 1, "maximum": 9999}}}}},
      {"type": "function", "function": {"name": "delete_customer",
        "parameters": {"type": "object", "required": ["customer_id"], "properties":
                       {"customer_id": {"type": "integer", "minimum": 1, "maximum": 9999}}}}}
    ])");
  }
};

}  // namespace trace::recorder::testing
