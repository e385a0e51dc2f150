// trace ui's JSON API (ui/api.h) called directly, and its HTTP server (ui/server.h) for
// what only HTTP has: the admission rules (a foreign Origin refused, the key required on the
// API but not on the app's files, the page's own origin allowed), the security headers and
// the embedded app.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <sstream>

#include "base/hash.h"
#include "store/store.h"
#include "testkit/temp_dir.h"
#include "tests/store/sql_test_util.h"
#include "ui/api.h"
#include "ui/assets.h"
#include "ui/server.h"
#include "ui/snapshot.h"

namespace trace::ui {
namespace {

using ::trace::store::testing::Sql;

constexpr char kSecret[] = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

// One run: a template variable, a model call with three sampled tokens (logits, runner-ups),
// a tool result that holds a secret the run's environment names, and a RunEnd.
std::string RecordRun(store::Store& st, const std::string& label,
                      const std::string& prompt = "<|im_start|>user\nHello Ada<|im_end|>\n") {
  proto::RunHeader h;
  h.set_label(label);
  h.add_argv("python3");
  h.add_argv("agent.py");
  (*h.mutable_env())["OPENAI_API_KEY"] = kSecret;
  auto w = st.BeginRun(h);
  EXPECT_TRUE(w.ok()) << w.status().message();
  proto::Event var;
  var.mutable_template_var()->set_name("customer");
  var.mutable_template_var()->set_value("Ada");
  EXPECT_TRUE((*w)->Append(var).ok());
  proto::Event call;
  proto::LlmCall* c = call.mutable_llm_call();
  c->set_api("openai.chat_completions");
  c->set_rendered_prompt(prompt);
  c->set_request_json(R"({"messages":[{"role":"user","content":"Hello Ada"}]})");
  for (int id : {11, 22, 33}) c->add_prompt_token_ids(id);
  const float logits[] = {5.5f, 2.25f, 7.0f}, runner[] = {5.0f, 1.0f, 0.5f};
  for (int i = 0; i < 3; ++i) {
    c->add_token_ids(100 + i);
    c->add_logits_digests(0x1234 + i);
    c->add_logits(logits[i]);
    c->add_logprobs(-0.125f * static_cast<float>(i));
    c->add_runner_up_ids(200 + i);
    c->add_runner_up_logits(runner[i]);
  }
  auto appended = (*w)->Append(call);
  EXPECT_TRUE(appended.ok()) << appended.status().message();
  proto::Event result;
  result.mutable_tool_result()->set_name("lookup");
  result.mutable_tool_result()->set_content(std::string("key is ") + kSecret);
  EXPECT_TRUE((*w)->Append(result).ok());
  EXPECT_TRUE((*w)->End(proto::RunEnd()).ok());
  return (*w)->run_id();
}

class UiApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("t.db");
    auto st = store::Store::Open(path_);
    ASSERT_TRUE(st.ok()) << st.status().message();
    run_ = RecordRun(**st, "first");
    other_ = RecordRun(**st, "second");
    st->reset();
    store::StoreOptions ro;
    ro.read_only = true;
    auto opened = store::Store::Open(path_, ro);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(*opened);
  }

  ApiReply Get(UiApi& api, const std::string& path,
               std::map<std::string, std::string> params = {}) {
    ApiRequest r;
    r.path = path;
    r.params = std::move(params);
    return api.Handle(r);
  }

  ::trace::testing::TempDir dir_;
  std::string path_, run_, other_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(UiApiTest, ARunsPageListsRunsWithTheirFieldsAndVerdicts) {
  UiApi api(store_.get(), {});
  ApiReply r = Get(api, "/ui/api/runs", {{"limit", "1"}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["runs"].size(), 1u);
  EXPECT_EQ(r.body["runs"][0]["run_id"], other_);  // newest first
  EXPECT_EQ(r.body["runs"][0]["label"], "second");
  EXPECT_EQ(r.body["runs"][0]["status"], "complete");
  EXPECT_EQ(r.body["runs"][0]["model_calls"], 1);
  EXPECT_TRUE(r.body["runs"][0]["verifications"].is_array());
  ASSERT_TRUE(r.body["next"].is_string());
  ApiReply second = Get(api, "/ui/api/runs", {{"limit", "1"}, {"cursor", r.body["next"]}});
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(second.body["runs"][0]["run_id"], run_);
  EXPECT_TRUE(second.body["next"].is_null());
  ApiReply labelled = Get(api, "/ui/api/runs", {{"label", "first"}, {"status", "complete"}});
  ASSERT_EQ(labelled.body["runs"].size(), 1u);
  EXPECT_EQ(labelled.body["runs"][0]["run_id"], run_);
  EXPECT_EQ(Get(api, "/ui/api/runs", {{"from", "2200-01-01"}}).body["runs"].size(), 0u);
}

TEST_F(UiApiTest, AContentSearchReadsWhatTheModelSawAsShown) {
  UiApi api(store_.get(), {});
  // The prompt of both runs, ASCII case folded; one per page, then the next.
  ApiReply both = Get(api, "/ui/api/runs", {{"content", "HELLO ada"}, {"limit", "1"}});
  ASSERT_EQ(both.status, 200) << both.body.dump();
  ASSERT_EQ(both.body["runs"].size(), 1u);
  EXPECT_EQ(both.body["runs"][0]["run_id"], other_);
  ApiReply next = Get(api, "/ui/api/runs",
                      {{"content", "HELLO ada"}, {"limit", "1"}, {"cursor", both.body["next"]}});
  ASSERT_EQ(next.body["runs"].size(), 1u);
  EXPECT_EQ(next.body["runs"][0]["run_id"], run_);
  EXPECT_TRUE(next.body["next"].is_null());
  // A tool result's text; but a redacted secret is not found (the search sees what the page
  // shows), unless the server shows runs as stored.
  EXPECT_EQ(Get(api, "/ui/api/runs", {{"content", "key is"}}).body["runs"].size(), 2u);
  EXPECT_EQ(Get(api, "/ui/api/runs", {{"content", kSecret}}).body["runs"].size(), 0u);
  UiApiOptions raw;
  raw.redaction.reset();
  UiApi unredacted(store_.get(), std::move(raw));
  EXPECT_EQ(Get(unredacted, "/ui/api/runs", {{"content", kSecret}}).body["runs"].size(), 2u);
  EXPECT_EQ(Get(api, "/ui/api/runs", {{"content", "nowhere to be found"}}).body["runs"].size(), 0u);
}

TEST_F(UiApiTest, BadParametersAreA400NamingTheParameter) {
  UiApi api(store_.get(), {});
  const std::pair<std::string, std::string> bad[] = {
      {"limit", "0"},      {"limit", "abc"},        {"limit", "1001"},
      {"cursor", "zzz"},   {"status", "finished"},  {"from", "2026-13-01"},
      {"before", "today"}, {"order", "alphabetic"}, {"from", "2999-01-01"},
  };
  for (const auto& [name, value] : bad) {
    ApiReply r = Get(api, "/ui/api/runs", {{name, value}});
    EXPECT_EQ(r.status, 400) << name << "=" << value << ": " << r.body.dump();
    const std::string message = r.body["error"]["message"];
    EXPECT_TRUE(message.find(name) != std::string::npos ||
                message.find("cursor") != std::string::npos ||
                message.find("1 to 1000") != std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_EQ(Get(api, "/ui/api/runs/01M98CEHXE7RV27CJWXF7ZNTEB").status, 404);
  EXPECT_EQ(Get(api, "/ui/api/runs/" + run_ + "/events/99").status, 404);
  EXPECT_EQ(Get(api, "/ui/api/runs/" + run_ + "/events/x").status, 400);
  EXPECT_EQ(Get(api, "/ui/api/nothing").status, 404);
  EXPECT_EQ(Get(api, "/ui/api/diff", {{"a", run_}}).status, 400);
  ApiRequest post;
  post.method = "POST";
  post.path = "/ui/api/runs";
  EXPECT_EQ(api.Handle(post).status, 405);
}

TEST_F(UiApiTest, AModelCallShowsItsTokensWithTheirMarginsAndIsRedacted) {
  UiApi api(store_.get(), {});
  ApiReply run = Get(api, "/ui/api/runs/" + run_);
  ASSERT_EQ(run.status, 200) << run.body.dump();
  EXPECT_EQ(run.body["run_id"], run_);
  ASSERT_EQ(run.body["events"].size(), 4u);
  EXPECT_EQ(run.body["events"][1]["kind"], "llm_call");
  EXPECT_EQ(run.body["events"][1]["rendered_prompt"], "<|im_start|>user\nHello Ada<|im_end|>\n");
  ApiReply call = Get(api, "/ui/api/runs/" + run_ + "/events/2");
  ASSERT_EQ(call.status, 200) << call.body.dump();
  const nlohmann::json& tokens = call.body["tokens"]["tokens"];
  ASSERT_EQ(tokens.size(), 3u);
  const float logits[] = {5.5f, 2.25f, 7.0f}, runner[] = {5.0f, 1.0f, 0.5f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tokens[i]["id"], 100 + i);
    EXPECT_EQ(tokens[i]["runner_up_id"], 200 + i);
    EXPECT_EQ(tokens[i]["margin"].get<float>(), logits[i] - runner[i]);
    EXPECT_FALSE(tokens[i].contains("text"));  // no model folder: ids only
  }
  // The secret the run's environment names is redacted everywhere, as exports are.
  EXPECT_EQ(run.body.dump().find(kSecret), std::string::npos);
  ApiReply result = Get(api, "/ui/api/runs/" + run_ + "/events/3");
  EXPECT_EQ(result.body.dump().find(kSecret), std::string::npos) << result.body.dump();
  EXPECT_TRUE(run.body["redaction"]["applied"].get<bool>());
  UiApiOptions raw;
  raw.redaction.reset();
  UiApi unredacted(store_.get(), std::move(raw));
  EXPECT_NE(Get(unredacted, "/ui/api/runs/" + run_ + "/events/3").body.dump().find(kSecret),
            std::string::npos);
}

TEST_F(UiApiTest, ADamagedRowIsReportedAndTheRestOfTheRunShown) {
  store_.reset();
  Sql(path_, "UPDATE events SET payload=x'0a05deadbeef' WHERE run_id='" + run_ + "' AND seq=3");
  store::StoreOptions ro;
  ro.read_only = true;
  auto reopened = store::Store::Open(path_, ro);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  store_ = std::move(*reopened);
  UiApi api(store_.get(), {});
  ApiReply run = Get(api, "/ui/api/runs/" + run_);
  ASSERT_EQ(run.status, 200) << run.body.dump();
  EXPECT_EQ(run.body["events"].size(), 3u);
  ASSERT_EQ(run.body["errors"].size(), 1u);
  EXPECT_EQ(run.body["errors"][0]["seq"], 3);
  ApiReply bad = Get(api, "/ui/api/runs/" + run_ + "/events/3");
  EXPECT_EQ(bad.status, 500);
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("seq 3"), std::string::npos)
      << bad.body.dump();
  EXPECT_EQ(Get(api, "/ui/api/runs/" + run_ + "/events/2").status, 200);
  EXPECT_EQ(Get(api, "/ui/api/runs").status, 200);
}

TEST_F(UiApiTest, TheDiffIsTraceDiffsAndReadingChangesNothingInTheStore) {
  Result<std::string> before = Sha256File(path_);
  ASSERT_TRUE(before.ok());
  UiApi api(store_.get(), {});
  ApiReply d = Get(api, "/ui/api/diff", {{"a", run_}, {"b", other_}});
  ASSERT_EQ(d.status, 200) << d.body.dump();
  EXPECT_EQ(d.body["run_a"], run_);
  EXPECT_TRUE(d.body["sources"].is_array());
  EXPECT_EQ(d.body["sources"].size(), 8u);
  for (const char* path : {"/ui/api/store", "/ui/api/runs"}) EXPECT_EQ(Get(api, path).status, 200);
  EXPECT_EQ(Get(api, "/ui/api/runs/" + run_).status, 200);
  EXPECT_EQ(*Sha256File(path_), *before);
}

TEST_F(UiApiTest, AStaticPageCarriesItsRepliesAsInertJson) {
  if (!AppMissing().ok()) GTEST_SKIP() << AppMissing().message();
  const std::string evil = "</script><script>window.pwned=1</script><!-- <\\/SCRIPT>";
  std::string id;
  {
    auto st = store::Store::Open(dir_.file("evil.db"));
    ASSERT_TRUE(st.ok());
    id = RecordRun(**st, "evil", evil);
  }
  auto st = store::Store::Open(dir_.file("evil.db"));
  ASSERT_TRUE(st.ok());
  const nlohmann::json report = {{"level", "bitwise"}, {"calls", nlohmann::json::array()}};
  Result<std::string> page = ReplayPage(st->get(), id, report);
  ASSERT_TRUE(page.ok()) << page.status().message();
  // Only the page's own two script elements close; no comment opens.
  size_t closings = 0;
  for (size_t at = page->find("</script"); at != std::string::npos;
       at = page->find("</script", at + 1)) {
    ++closings;
  }
  EXPECT_EQ(closings, 2u);
  EXPECT_EQ(page->find("<!--"), std::string::npos);
  const std::string open = R"(<script type="application/json" id="trace-snapshot">)";
  const size_t start = page->find(open);
  ASSERT_NE(start, std::string::npos);
  const size_t end = page->find("</script>", start);
  const nlohmann::json data =
      nlohmann::json::parse(page->substr(start + open.size(), end - start - open.size()));
  EXPECT_EQ(data["start"], "#/run/" + id);
  EXPECT_EQ(data["replays"][id], report);
  const nlohmann::json& run = data["replies"]["runs/" + id];
  EXPECT_EQ(run["events"][1]["rendered_prompt"], evil);  // as stored, byte for byte
  for (const nlohmann::json& e : run["events"]) {
    EXPECT_TRUE(
        data["replies"].contains("runs/" + id + "/events/" + std::to_string(e["seq"].get<int>())));
  }
  EXPECT_EQ(data["replies"]["runs"]["runs"][0]["run_id"], id);
  EXPECT_TRUE(data["replies"].contains("store"));
  EXPECT_EQ(SnapshotKey("diff", {{"b", "2"}, {"a", "1"}, {"call", ""}}), "diff?a=1&b=2");
}

// The HTTP side: admission, headers and the embedded app.
class UiServerTest : public UiApiTest {
 protected:
  void Start(const std::string& key) {
    if (!AppMissing().ok()) GTEST_SKIP() << AppMissing().message();
    recorder::ServerOptions http;
    http.port = 0;
    http.api_key = key;
    server_ = std::make_unique<UiServer>(store_.get(), UiApiOptions{}, http);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }
  std::unique_ptr<UiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(UiServerTest, ServesTheEmbeddedAppWithASecurityPolicy) {
  Start("");
  auto page = client_->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<script src=\"/app.js\">"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("script-src 'self'"),
            std::string::npos);
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  for (const Asset& a : Assets()) {
    auto got = client_->Get(std::string(a.path).c_str());
    ASSERT_TRUE(got) << a.path;
    EXPECT_EQ(got->body, a.content) << a.path;
    EXPECT_GT(a.content.size(), 100u) << a.path;
  }
  auto runs = client_->Get("/ui/api/runs");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200);
  EXPECT_EQ(nlohmann::json::parse(runs->body)["runs"].size(), 2u);
}

TEST_F(UiServerTest, AForeignOriginIsRefusedAndThePagesOwnOriginAllowed) {
  Start("");
  auto foreign = client_->Get("/ui/api/runs", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403);
  auto cross = client_->Get("/ui/api/runs", {{"Sec-Fetch-Site", "cross-site"}});
  ASSERT_TRUE(cross);
  EXPECT_EQ(cross->status, 403);
  const std::string self = "http://127.0.0.1:" + std::to_string(server_->port());
  // The page's own POST (a replay) carries its origin; a replay of a run recorded without a
  // model folder fails in the background, but it is admitted and started.
  auto own =
      client_->Post(("/ui/api/replays?run=" + run_).c_str(), {{"Origin", self}}, "", "text/plain");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 202) << own->body;
  auto host = client_->Get("/ui/api/runs", {{"Host", "evil.example"}});
  ASSERT_TRUE(host);
  EXPECT_EQ(host->status, 403);
}

TEST_F(UiServerTest, TheKeyGuardsTheApiButNotTheAppsFiles) {
  Start("k3y");
  auto page = client_->Get("/app.js");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  auto no_key = client_->Get("/ui/api/runs");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  auto wrong = client_->Get("/ui/api/runs", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = client_->Get("/ui/api/runs", {{"Authorization", "Bearer k3y"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  auto stream = client_->Get("/ui/api/replays/r1/events");
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->status, 401);
}

}  // namespace
}  // namespace trace::ui
