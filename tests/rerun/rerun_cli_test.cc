// End-to-end tests of `trace rerun` as a process, on the example agent
// (examples/support_agent) recorded with the demo model: re-run from its recording with no
// model forward pass and the same outputs; a changed prompt line reported at the right call
// and field, then completed live; --strict; a tool with a side effect not run again, and run
// from call K on with --live-from K; the diff of parent and fork; a run recorded through
// --upstream re-run with the upstream gone; the clear errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "testkit/shell.h"
#include "testkit/temp_dir.h"
#include "tests/common/demo_model.h"
#include "tests/common/trace_cli.h"

namespace trace {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::RunTrace;

const std::string kAgent = std::string(TRACE_SOURCE_DIR) + "/examples/support_agent/agent.py";

// The report `trace rerun --json` prints after the agent's own output on stdout.
json ReportOf(const CliResult& r) {
  size_t at = r.out.rfind("\n{\n");
  at = at == std::string::npos ? (r.out.rfind("{\n", 0) == 0 ? 0 : std::string::npos) : at + 1;
  if (at == std::string::npos) {
    ADD_FAILURE() << "no JSON report in stdout:\n" << r.out << "\nstderr:\n" << r.err;
    return json();
  }
  return json::parse(r.out.substr(at), nullptr, false);
}

// The "agent-counts {...}" line the example agent prints last.
std::string CountsLine(const std::string& out) {
  size_t at = out.find("agent-counts ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

size_t LineCount(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class RerunCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.status().ok()) << dir_.status().message();
    model_ = dir_.model();
    store_ = dir_.file("traces.db");
    tool_log_ = dir_.file("tools.log");
  }

  CliResult Trace(std::vector<std::string> args) {
    args.insert(args.begin(), {"--store", store_});
    return RunTrace(dir_, args);
  }

  // The agent's command: two turns (four model calls), tools logged to tool_log_.
  std::vector<std::string> AgentCommand(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> cmd = {"--", "python3",    kAgent,   "--turns",
                                    "2",  "--tool-log", tool_log_};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    return cmd;
  }

  // Records the agent; returns the new run's id.
  std::string Record(const std::vector<std::string>& upstream = {}) {
    std::vector<std::string> args = {"record", "--seed", "7"};
    if (upstream.empty()) {
      args.insert(args.end(), {"--model", model_});
    } else {
      args.insert(args.end(), upstream.begin(), upstream.end());
    }
    for (const std::string& a : AgentCommand()) args.push_back(a);
    CliResult r = Trace(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    recorded_counts_ = CountsLine(r.out);
    EXPECT_FALSE(recorded_counts_.empty()) << r.out;
    return NewestRun();
  }

  std::string NewestRun() {
    CliResult ls = Trace({"ls", "--json"});
    json runs = json::parse(ls.out, nullptr, false);
    if (!runs.is_array() || runs.empty()) {
      ADD_FAILURE() << "no runs: " << ls.out << ls.err;
      return "";
    }
    return runs[0]["run_id"];
  }

  CliResult Rerun(const std::string& run, std::vector<std::string> flags,
                  const std::vector<std::string>& agent_extra = {}) {
    std::vector<std::string> args = {"rerun", run, "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    for (const std::string& a : AgentCommand(agent_extra)) args.push_back(a);
    std::filesystem::remove(tool_log_);
    return Trace(args);
  }

  json ShowJson(const std::string& run) {
    CliResult r = Trace({"show", run, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  testing::DemoModelFolder dir_;  // this test's folder, with the demo model in it
  std::string model_, store_, tool_log_, recorded_counts_;
};

TEST_F(RerunCliTest, FollowsTheRecordingWithoutRunningTheModelOrTheTools) {
  const std::string parent = Record();
  ASSERT_GT(LineCount(tool_log_), 0u) << "the recorded run ran its tools";
  CliResult r = Rerun(parent, {});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json report = ReportOf(r);
  EXPECT_EQ(report["followed"], true) << report.dump(2);
  EXPECT_EQ(report["calls"]["made"], 4);
  EXPECT_EQ(report["calls"]["answered_from_recording"], 4);
  EXPECT_EQ(report["calls"]["live"], 0);
  EXPECT_EQ(report["calls"]["recorded_unused"], 0);
  EXPECT_GT(report["tools"]["answered_from_recording"].get<int>(), 0);
  EXPECT_EQ(report["tools"]["live"], 0);
  EXPECT_EQ(report["clock_reads_answered_from_recording"], 2);
  // Same outputs; no tool ran (the side effect did not happen again).
  EXPECT_EQ(CountsLine(r.out), recorded_counts_);
  EXPECT_EQ(LineCount(tool_log_), 0u);
  // The new run's records: every model call answered from the recording (0 forward passes:
  // a served call would carry no cassette_seq), linked to its parent.
  const std::string child = report["run"];
  json shown = ShowJson(child);
  EXPECT_EQ(shown["parent_run"], parent);
  EXPECT_EQ(shown["rerun"]["mode"], "cassette");
  int calls = 0;
  for (const json& e : shown["events"]) {
    if (e["kind"] != "llm_call") continue;
    ++calls;
    EXPECT_GT(e["cassette_seq"].get<uint64_t>(), 0u) << e.dump();
  }
  EXPECT_EQ(calls, 4);
  CliResult ls = Trace({"ls"});
  EXPECT_NE(ls.out.find("rerun of " + parent.substr(0, 10)), std::string::npos) << ls.out;
  CliResult diff = Trace({"diff", parent, child});
  EXPECT_NE(diff.out.find("B re-ran A's recording"), std::string::npos) << diff.out;
}

TEST_F(RerunCliTest, AChangedPromptLineIsReportedAtItsCallAndFieldThenRunsLive) {
  const std::string parent = Record();
  // Turn 1's question with another address (the same policy is retrieved for it, so the
  // user message is all that changes).
  CliResult r =
      Rerun(parent, {}, {"--question", "1=Please change my email to bob@example.org, my id is 3."});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json report = ReportOf(r);
  const json& d = report["divergence"];
  ASSERT_TRUE(d.is_object()) << report.dump(2);
  EXPECT_EQ(d["kind"], "request");
  // Turn 1's first call is the third model call; the question is a user message's content.
  EXPECT_EQ(d["call"], 3);
  EXPECT_EQ(d["expected_call"], 3);
  ASSERT_FALSE(d["changes"].empty());
  EXPECT_EQ(d["changes"][0]["role"], "user");
  EXPECT_EQ(d["changes"][0]["field"], "content");
  EXPECT_EQ(d["changes"].size(), 1u) << d.dump(2);
  EXPECT_EQ(d["changes"][0]["path"].get<std::string>().rfind("messages[", 0), 0u);
  EXPECT_NE(d["changes"][0]["recorded"].get<std::string>().find("ada@example.org"),
            std::string::npos);
  EXPECT_NE(d["changes"][0]["now"].get<std::string>().find("bob@example.org"), std::string::npos);
  EXPECT_NE(d["prompt_diff"].get<std::string>().find("+ Please change my email to bob@"),
            std::string::npos)
      << d["prompt_diff"];
  // Calls 1-2 came from the recording, 3-4 ran live, and the agent completed.
  EXPECT_EQ(report["calls"]["answered_from_recording"], 2);
  EXPECT_EQ(report["calls"]["live"], 2);
  EXPECT_EQ(report["agent_exit_status"], 0);
  EXPECT_FALSE(CountsLine(r.out).empty());
  // Tools ran for real once the re-run was live (turn 1's tool calls).
  EXPECT_GT(LineCount(tool_log_), 0u);
  EXPECT_EQ(ShowJson(report["run"])["rerun"]["diverged_at_call"], 3);

  // --strict: the same change stops the agent at call 3, nothing runs live.
  CliResult strict =
      Rerun(parent, {"--strict"},
            {"--question", "1=Please change my email to bob@example.org, my id is 3."});
  EXPECT_EQ(strict.exit_code, 1) << strict.out << strict.err;
  json sr = ReportOf(strict);
  EXPECT_EQ(sr["strict"], true);
  EXPECT_EQ(sr["divergence"]["call"], 3);
  EXPECT_EQ(sr["calls"]["live"], 0);
  EXPECT_EQ(sr["calls"]["answered_from_recording"], 2);
  EXPECT_NE(sr["agent_exit_status"], 0);
  EXPECT_EQ(LineCount(tool_log_), 0u);
}

TEST_F(RerunCliTest, AForkRunsLiveFromCallKWithASeedOrAnEditedRequest) {
  const std::string parent = Record();
  CliResult r = Rerun(parent, {"--live-from", "3", "--seed", "11"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json report = ReportOf(r);
  EXPECT_EQ(report["mode"], "fork");
  EXPECT_EQ(report["calls"]["answered_from_recording"], 2);
  EXPECT_EQ(report["calls"]["live"], 2);
  // Turn 0's tools (after call 1) came from the recording; turn 1's (after call 3) ran.
  EXPECT_GT(report["tools"]["answered_from_recording"].get<int>(), 0);
  EXPECT_GT(report["tools"]["live"].get<int>(), 0);
  EXPECT_EQ(LineCount(tool_log_), report["tools"]["live"].get<size_t>());
  // Another seed from call 3 on: the diff lines the runs up and they part at call 3 or later.
  CliResult diff = Trace({"diff", parent, report["run"], "--json"});
  json dj = json::parse(diff.out, nullptr, false);
  ASSERT_TRUE(dj.is_object()) << diff.out << diff.err;
  EXPECT_EQ(dj["rerun_link"]["mode"], "fork");
  EXPECT_EQ(dj["rerun_link"]["live_from_call"], 3);
  ASSERT_FALSE(dj["calls"].empty()) << diff.out;
  for (const json& c : dj["calls"]) EXPECT_GE(c["call"].get<int>(), 3) << c.dump();
  CliResult text = Trace({"diff", parent, report["run"]});
  EXPECT_NE(text.out.find("B is a fork of A at call 3"), std::string::npos) << text.out;

  // A live call is seeded by its place in the run, as in the recording: the fork's call 3
  // runs on the engine with the recorded prompt and seed and samples the recorded tokens.
  // (Call 4 may differ: turn 0's tools were answered from the recording, so their side
  // effects on the agent's database did not happen this time.)
  CliResult same_seed = Rerun(parent, {"--live-from", "3"});
  EXPECT_EQ(same_seed.exit_code, 0) << same_seed.out << same_seed.err;
  json same = ReportOf(same_seed);
  EXPECT_EQ(same["calls"]["live"], 2);
  CliResult same_diff = Trace({"diff", parent, same["run"], "--json"});
  json sd = json::parse(same_diff.out, nullptr, false);
  ASSERT_TRUE(sd.is_object()) << same_diff.out << same_diff.err;
  for (const json& c : sd["calls"]) EXPECT_GT(c["call"].get<int>(), 3) << c.dump();

  // --edit-call 3 --file BODY: call 3 is sent with the edited body instead.
  json body{{"model", "model"},
            {"messages", {{{"role", "user"}, {"content", "An edited request, EDITED-3."}}}},
            {"max_tokens", 8},
            {"temperature", 0}};
  const std::string body_file = dir_.file("body.json");
  std::ofstream(body_file) << body.dump();
  CliResult edited = Rerun(parent, {"--edit-call", "3", "--file", body_file});
  EXPECT_EQ(edited.exit_code, 0) << edited.out << edited.err;
  json er = ReportOf(edited);
  EXPECT_EQ(er["mode"], "fork");
  EXPECT_EQ(er["live_from"], 3);
  json shown = ShowJson(er["run"]);
  EXPECT_EQ(shown["rerun"]["edit_call"], 3);
  CliResult third = Trace({"export", er["run"], "--format", "json"});
  EXPECT_NE(third.out.find("EDITED-3"), std::string::npos) << third.err;
}

TEST_F(RerunCliTest, TheCppClientsToolIsAnsweredFromTheRecording) {
  const std::string marker = dir_.file("marker");
  CliResult rec = Trace({"record", "--model", model_, "--", TRACE_CPP_TOOL_AGENT, marker});
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const std::string live = rec.out.substr(rec.out.find("tool-result "));
  EXPECT_EQ(live, "tool-result \"wrote \\\"1\\\"\\n\u2713 \U0001F600 done\" error=0\n");
  ASSERT_EQ(LineCount(marker), 1u);
  CliResult r = Trace({"rerun", NewestRun(), "--", TRACE_CPP_TOOL_AGENT, marker});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The recorded result, byte for byte (escapes and UTF-8 included); the tool did not run.
  EXPECT_EQ(r.out.substr(r.out.find("tool-result ")), live);
  EXPECT_EQ(LineCount(marker), 1u);
}

TEST_F(RerunCliTest, ClearErrors) {
  CliResult unknown = Trace({"rerun", "01NOSUCHRUN", "--", "true"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no run matches"), std::string::npos) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
  CliResult empty = Trace({"record", "--model", model_, "--", "true"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  CliResult no_calls = Trace({"rerun", NewestRun(), "--", "true"});
  EXPECT_EQ(no_calls.exit_code, 2);
  EXPECT_NE(no_calls.err.find("has no model calls"), std::string::npos) << no_calls.err;
  CliResult bad_tools = Trace({"rerun", NewestRun(), "--tools", "maybe", "--", "true"});
  EXPECT_EQ(bad_tools.exit_code, 2);
  EXPECT_NE(bad_tools.err.find("--tools must be live or recorded-only"), std::string::npos);
}

// A `trace serve` playing the hosted model; stopped with SIGTERM.
struct Upstream {
  pid_t pid = -1;
  std::string url;
};

Upstream StartUpstream(const std::string& model, const std::string& out_file) {
  Upstream u;
  u.pid = fork();
  if (u.pid == 0) {
    FILE* f = freopen(out_file.c_str(), "w", stdout);
    (void)f;
    const std::string trace = std::string(TRACE_BINARY_DIR) + "/bin/trace";
    execl(trace.c_str(), trace.c_str(), "serve", "--model", model.c_str(), "--port", "0",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Poll the file for the "serving on URL" line (the server writes it once listening).
  for (int i = 0; i < 6000 && u.url.empty(); ++i) {
    std::string text = testing::ReadWholeFile(out_file);
    size_t at = text.find("serving on ");
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      u.url = text.substr(at + 11, text.find('\n', at) - at - 11);
    } else {
      usleep(10000);
    }
  }
  return u;
}

TEST_F(RerunCliTest, ARunRecordedThroughAnUpstreamRerunsOfflineWithTheUpstreamGone) {
  Upstream up = StartUpstream(model_, dir_.file("serve.out"));
  ASSERT_FALSE(up.url.empty()) << testing::ReadWholeFile(dir_.file("serve.out"));
  const std::string parent = Record({"--upstream", up.url});
  kill(up.pid, SIGTERM);
  int status = 0;
  waitpid(up.pid, &status, 0);
  CliResult r = Rerun(parent, {});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json report = ReportOf(r);
  EXPECT_EQ(report["calls"]["answered_from_recording"], 4) << report.dump(2);
  EXPECT_NE(report["live_backend"].get<std::string>().find("offline"), std::string::npos);
  EXPECT_EQ(CountsLine(r.out), recorded_counts_);
  // Beyond the recording there is nothing to go live on: the agent gets a 503 and the
  // report names the call where it left the recording.
  CliResult changed = Rerun(parent, {}, {"--question", "1=Another question."});
  EXPECT_EQ(changed.exit_code, 1) << changed.out << changed.err;
  EXPECT_EQ(ReportOf(changed)["divergence"]["call"], 3);
  EXPECT_NE(changed.err.find("503"), std::string::npos) << changed.err;
}

}  // namespace
}  // namespace trace
