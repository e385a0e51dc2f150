// End-to-end tests of `trace record` as a process: the example agent recorded with event
// counts matching what it printed; a failing agent's status; a child killed by a signal;
// SIGTERM forwarded; the recorder itself SIGKILLed leaves a crashed but readable run and
// stops the agent.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/model_init.h"
#include "store/store.h"
#include "tests/common/demo_model.h"

extern char** environ;

namespace trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";
const std::string kAgent = std::string(TRACE_SOURCE_DIR) + "/examples/support_agent/agent.py";
const std::string kClientDir = std::string(TRACE_SOURCE_DIR) + "/recorder/clients/python";

// A running `trace` process whose stdout we read line by line.
struct Proc {
  pid_t pid = -1;
  int out_fd = -1;
  std::string buffered;

  // Reads until a line starting with `prefix` (returned), EOF or the timeout.
  std::string WaitLine(const std::string& prefix, int timeout_s = 120) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
      size_t nl;
      while ((nl = buffered.find('\n')) != std::string::npos) {
        std::string line = buffered.substr(0, nl);
        buffered.erase(0, nl + 1);
        if (line.rfind(prefix, 0) == 0) return line;
      }
      if (std::chrono::steady_clock::now() > deadline) return "";
      char buf[4096];
      ssize_t n = read(out_fd, buf, sizeof buf);
      if (n <= 0) return "";
      buffered.append(buf, n);
    }
  }
  int Wait() {
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// `extra_env` ("NAME=value") is added to ours; `merge_stderr` sends stderr to the pipe too.
Proc Spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
           bool merge_stderr = false) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = extra_env;
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  Proc p;
  EXPECT_EQ(posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  p.out_fd = fds[0];
  return p;
}

class RecordCliTest : public testing::DemoModelSuite {
 protected:
  std::string StorePath() {
    return demo().file(
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".db");
  }

  std::vector<std::string> Record(const std::vector<std::string>& cmd) {
    std::vector<std::string> args = {kTrace,      "--store", StorePath(), "record", "--model",
                                     model_dir(), "--seed",  "7",         "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    return args;
  }

  std::string Script(const std::string& name, const std::string& body) {
    std::string path = demo().file(name);
    std::ofstream(path) << "import sys, os, time, json, urllib.request\nsys.path.insert(0, " +
                               json(kClientDir).dump() + ")\nimport trace_client as tc\n" + body;
    return path;
  }

  // The only run in this test's store, with its events.
  std::pair<store::RunSummary, std::vector<proto::Event>> OnlyRun() {
    store::StoreOptions o;
    o.create_if_missing = false;
    auto s = store::Store::Open(StorePath(), o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return {};
    auto runs = (*s)->ListRuns();
    EXPECT_TRUE(runs.ok() && runs->size() == 1u);
    if (!runs.ok() || runs->size() != 1u) return {};
    auto events = (*s)->LoadEvents(runs->front().run_id);
    EXPECT_TRUE(events.ok()) << events.status().message();
    return {runs->front(), events.ok() ? *events : std::vector<proto::Event>{}};
  }
};

TEST_F(RecordCliTest, RecordsTheExampleAgentWithMatchingCounts) {
  Proc p = Spawn(Record({"python3", kAgent, "--turns", "3"}));
  std::string line = p.WaitLine("agent-counts ", 300);
  ASSERT_FALSE(line.empty()) << "the agent printed no counts";
  json printed = json::parse(line.substr(13));
  EXPECT_EQ(p.Wait(), 0);
  auto [summary, events] = OnlyRun();
  EXPECT_EQ(summary.status, store::RunStatus::kComplete);
  std::map<std::string, int> n;
  std::string stdout_data;
  for (const proto::Event& e : events) {
    if (e.has_llm_call()) {
      ++n["model_calls"];
      EXPECT_EQ(e.llm_call().token_ids_size(), e.llm_call().logits_digests_size());
      EXPECT_FALSE(e.llm_call().params().has_seed());  // derived from the run seed
      EXPECT_NE(e.llm_call().seed_used(), 0u);
    }
    if (e.has_tool_call() && e.tool_call().source() == "model") ++n["tool_calls"];
    if (e.has_tool_result()) ++n["tool_results"];
    if (e.has_context_chunk()) ++n["context"];
    if (e.has_template_var()) ++n["template_vars"];
    if (e.has_clock_read()) ++n["clock_reads"];
    if (e.has_output() && e.output().stream() == proto::Output::STDOUT) {
      stdout_data += e.output().data();
    }
  }
  for (const auto& [key, value] : printed.items()) {
    EXPECT_EQ(n[key], value.get<int>()) << key;
  }
  EXPECT_EQ(n["model_calls"], 6);
  EXPECT_NE(stdout_data.find(line), std::string::npos) << "stdout not recorded";
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.back().has_run_end());
  EXPECT_EQ(events.back().run_end().how(), proto::RunEnd::EXITED);
  EXPECT_EQ(events.back().run_end().exit_code(), 0);
  store::StoreOptions o;
  o.read_only = true;
  auto s = store::Store::Open(StorePath(), o);
  auto header = (*s)->LoadHeader(summary.run_id);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->argv(1), kAgent);
  EXPECT_EQ(header->run_seed(), 7u);
  EXPECT_EQ(header->env().count("OPENAI_API_KEY"), 0u);  // keys are never recorded
  EXPECT_FALSE(header->model().tokenizer_sha256().empty());
  EXPECT_GT(header->agent_pid(), 0);
}

TEST_F(RecordCliTest, FailingAgentRecordsItsStatus) {
  Proc p = Spawn(Record({"python3", kAgent, "--turns", "3", "--fail-at", "1"}));
  EXPECT_EQ(p.Wait(), 3);
  auto [summary, events] = OnlyRun();
  EXPECT_EQ(summary.exit_code, 3);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_end().how(), proto::RunEnd::EXITED);
  EXPECT_EQ(events.back().run_end().exit_code(), 3);
}

TEST_F(RecordCliTest, ChildKilledBySignalIsRecorded) {
  std::string script = Script("die.py",
                              "print('dying', flush=True)\n"
                              "os.kill(os.getpid(), 9)\n");
  Proc p = Spawn(Record({"python3", script}));
  EXPECT_EQ(p.Wait(), 128 + 9);
  auto [summary, events] = OnlyRun();
  EXPECT_EQ(summary.status, store::RunStatus::kCrashed);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_end().how(), proto::RunEnd::SIGNALLED);
  EXPECT_EQ(events.back().run_end().signal(), 9);
}

TEST_F(RecordCliTest, SigtermIsForwardedToTheAgent) {
  std::string script = Script("wait.py", "print('ready', flush=True)\ntime.sleep(120)\n");
  Proc p = Spawn(Record({"python3", script}));
  ASSERT_EQ(p.WaitLine("ready"), "ready");
  kill(p.pid, SIGTERM);
  EXPECT_EQ(p.Wait(), 128 + SIGTERM);
  auto [summary, events] = OnlyRun();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_end().how(), proto::RunEnd::RECORDER_KILLED);
  EXPECT_EQ(events.back().run_end().signal(), SIGTERM);
}

// Waits (up to timeout_s) for process `pid`, not our child, to end: a pidfd polls
// readable when it does. False if it still runs.
bool WaitForExit(pid_t pid, int timeout_s) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone
  struct pollfd p = {fd, POLLIN, 0};
  int n = poll(&p, 1, timeout_s * 1000);
  close(fd);
  return n == 1;
}

TEST_F(RecordCliTest, RecorderKilledLeavesACrashedReadableRunAndTheAgentIsStopped) {
  std::string script = Script("hang.py", R"(
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": os.environ["OPENAI_MODEL"], "max_tokens": 4,
                     "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"})
urllib.request.urlopen(req).read()
tc.note("before the kill")
tc.flush()
print("ready", os.getpid(), flush=True)
time.sleep(120)
)");
  Proc p = Spawn(Record({"python3", script}));
  std::string line = p.WaitLine("ready ");
  ASSERT_FALSE(line.empty());
  const pid_t agent = std::stoi(line.substr(6));
  kill(p.pid, SIGKILL);
  p.Wait();
  // The agent is not left running orphaned: it got SIGTERM when the recorder died.
  bool agent_ended = WaitForExit(agent, 60);
  if (!agent_ended) kill(agent, SIGKILL);
  EXPECT_TRUE(agent_ended) << "the agent outlived its recorder";
  auto [summary, events] = OnlyRun();
  // No RunEnd, and the recorder is gone: crashed, not incomplete forever.
  EXPECT_EQ(summary.status, store::RunStatus::kCrashed);
  EXPECT_EQ(summary.recorder_pid, p.pid);
  int calls = 0, notes = 0;
  for (const proto::Event& e : events) {
    calls += e.has_llm_call();
    notes += e.has_note() && e.note().text() == "before the kill";
    EXPECT_FALSE(e.has_run_end());
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(notes, 1);
}

// Copies model folder `from` to `to`, adding `delta` to element `index` of the BF16 tensor
// `name` in model.safetensors (found through the safetensors JSON header).
bool CopyModelChangingOneWeight(const std::string& from, const std::string& to,
                                const std::string& name, size_t index, float delta) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    fs::copy_file(entry.path(), fs::path(to) / entry.path().filename(),
                  fs::copy_options::overwrite_existing);
  }
  std::string path = to + "/model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  if (bytes.size() < 8) return false;
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, header_len), nullptr, false);
  if (header.is_discarded() || !header.contains(name) || header[name]["dtype"] != "BF16") {
    return false;
  }
  size_t at = 8 + header_len + header[name]["data_offsets"][0].get<size_t>() + index * 2;
  if (at + 2 > bytes.size()) return false;
  uint16_t bf16 = 0;
  std::memcpy(&bf16, bytes.data() + at, 2);
  uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float value = 0;
  std::memcpy(&value, &bits, 4);
  value += delta;
  std::memcpy(&bits, &value, 4);
  bf16 = static_cast<uint16_t>(bits >> 16);  // truncation: any change will do
  std::memcpy(bytes.data() + at, &bf16, 2);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return true;
}

// Runs `args` to completion; returns (exit status, stdout).
std::pair<int, std::string> RunToEnd(const std::vector<std::string>& args) {
  Proc p = Spawn(args);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p.out_fd, buf, sizeof buf)) > 0) out.append(buf, n);
  int status = p.Wait();
  return {status, out};
}

TEST_F(RecordCliTest, LayerDigestsAreRecordedStableAndNameTheChangedLayer) {
  std::string script = Script("layers.py", R"(
for content in ["hello there", "tell me a story"]:
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": os.environ["OPENAI_MODEL"], "max_tokens": 6, "seed": 3,
                         "temperature": 0.7,
                         "messages": [{"role": "user", "content": content}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
)");
  json config;
  std::ifstream(model_dir() + "/config.json") >> config;
  const int layers = config.at("num_hidden_layers").get<int>();
  ASSERT_GE(layers, 2);

  // Two recordings of the same seeded requests, each into its own store.
  std::vector<std::vector<uint64_t>> digests[2];
  std::string run_id;
  for (int r = 0; r < 2; ++r) {
    std::string store_path = StorePath() + std::to_string(r);
    auto [code, out] = RunToEnd({kTrace, "--store", store_path, "record", "--model", model_dir(),
                                 "--seed", "7", "--layer-digests", "--", "python3", script});
    ASSERT_EQ(code, 0) << out;
    store::StoreOptions o;
    o.create_if_missing = false;
    auto s = store::Store::Open(store_path, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    auto runs = (*s)->ListRuns();
    ASSERT_TRUE(runs.ok() && runs->size() == 1u);
    if (r == 0) run_id = runs->front().run_id;
    auto events = (*s)->LoadEvents(runs->front().run_id);
    ASSERT_TRUE(events.ok()) << events.status().message();
    for (const proto::Event& e : *events) {
      if (!e.has_llm_call()) continue;
      const proto::LlmCall& c = e.llm_call();
      ASSERT_GT(c.token_ids_size(), 0);
      EXPECT_EQ(c.num_layers(), layers);
      EXPECT_EQ(c.layer_digests_size(), c.token_ids_size() * layers);
      digests[r].emplace_back(c.layer_digests().begin(), c.layer_digests().end());
    }
    EXPECT_EQ(digests[r].size(), 2u);
  }
  EXPECT_EQ(digests[0], digests[1]);
  ASSERT_FALSE(digests[0].empty());
  EXPECT_NE(digests[0][0][0], digests[0][0][1]);  // layers 0 and 1 of token 0 differ

  // The unchanged model replays bit for bit.
  auto [same_code, same_out] =
      RunToEnd({kTrace, "--store", StorePath() + "0", "replay", run_id, "--json"});
  EXPECT_EQ(same_code, 0) << same_out;
  json same = json::parse(same_out, nullptr, false);
  ASSERT_FALSE(same.is_discarded()) << same_out;
  EXPECT_EQ(same["level"], "bitwise") << same.dump(2);

  // A model with one weight of layer 1 changed: the replay names layer 1 first.
  std::string changed = demo().file("model-layer1");
  ASSERT_TRUE(CopyModelChangingOneWeight(model_dir(), changed,
                                         "model.layers.1.mlp.down_proj.weight", 5, 40.0f));
  auto [code, out] = RunToEnd(
      {kTrace, "--store", StorePath() + "0", "replay", run_id, "--model", changed, "--json"});
  EXPECT_NE(code, 0);
  json report = json::parse(out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << out;
  ASSERT_TRUE(report["first_divergence"].is_object()) << report.dump(2);
  EXPECT_EQ(report["first_divergence"]["layer_digests_recorded"], true);
  EXPECT_EQ(report["first_divergence"]["first_differing_layer"], 1) << report.dump(2);

  // Off by default: no layer digests.
  auto [plain_code, plain_out] = RunToEnd(Record({"python3", script}));
  ASSERT_EQ(plain_code, 0) << plain_out;
  auto [summary, events] = OnlyRun();
  for (const proto::Event& e : events) {
    if (e.has_llm_call()) {
      EXPECT_EQ(e.llm_call().layer_digests_size(), 0);
    }
  }
}

// frequency_penalty, presence_penalty and logit_bias through the server (Chat Completions
// and Completions) on the demo model: honoured when sampling, recorded with the call, and
// replayed bit for bit (the replayer applies them to the recorded tokens).
TEST_F(RecordCliTest, PenaltiesAndLogitBiasAreHonouredRecordedAndReplayBitwise) {
  std::string script = Script("penalties.py", R"(
def post(route, body):
    body["model"] = os.environ["OPENAI_MODEL"]
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + route,
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
story = [{"role": "user", "content": "tell me a story"}]
post("/chat/completions", {"messages": story, "max_tokens": 12, "temperature": 0})
post("/chat/completions", {"messages": story, "max_tokens": 12, "temperature": 0,
                           "frequency_penalty": -1.5, "presence_penalty": -0.5})
post("/chat/completions", {"messages": story, "max_tokens": 4, "temperature": 0.7, "seed": 3,
                           "frequency_penalty": 0.5, "logit_bias": {"1000": 100}})
post("/completions", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.9,
                      "seed": 5, "frequency_penalty": -1, "presence_penalty": 1.5,
                      "logit_bias": {"1000": -100, "220": 3}})
)");
  auto [code, out] = RunToEnd(Record({"python3", script}));
  ASSERT_EQ(code, 0) << out;
  auto [summary, events] = OnlyRun();
  std::vector<proto::LlmCall> calls;
  for (const proto::Event& e : events) {
    if (e.has_llm_call()) calls.push_back(e.llm_call());
  }
  ASSERT_EQ(calls.size(), 4u);
  for (const auto& c : calls) ASSERT_EQ(c.http_status(), 200) << c.response_json();
  EXPECT_EQ(calls[0].params().frequency_penalty(), 0.0f);
  EXPECT_EQ(calls[0].params().logit_bias_size(), 0);
  EXPECT_EQ(calls[1].params().frequency_penalty(), -1.5f);
  EXPECT_EQ(calls[1].params().presence_penalty(), -0.5f);
  // Greedy over the same prompt: negative penalties make the tiny model, which does not
  // repeat itself greedily, repeat its tokens.
  std::vector<int32_t> plain(calls[0].token_ids().begin(), calls[0].token_ids().end());
  std::vector<int32_t> penalised(calls[1].token_ids().begin(), calls[1].token_ids().end());
  EXPECT_NE(plain, penalised);
  // +100 on token 1000 makes it the draw at every step.
  ASSERT_EQ(calls[2].params().logit_bias_size(), 1);
  EXPECT_EQ(calls[2].params().logit_bias(0).id(), 1000);
  EXPECT_EQ(calls[2].params().logit_bias(0).bias(), 100.0f);
  EXPECT_EQ(calls[2].params().frequency_penalty(), 0.5f);
  ASSERT_GT(calls[2].token_ids_size(), 0);
  for (int32_t t : calls[2].token_ids()) EXPECT_EQ(t, 1000);
  // Recorded ascending by id; -100 keeps token 1000 out.
  ASSERT_EQ(calls[3].params().logit_bias_size(), 2);
  EXPECT_EQ(calls[3].params().logit_bias(0).id(), 220);
  EXPECT_EQ(calls[3].params().logit_bias(1).id(), 1000);
  EXPECT_EQ(calls[3].params().frequency_penalty(), -1.0f);
  EXPECT_EQ(calls[3].params().presence_penalty(), 1.5f);
  for (int32_t t : calls[3].token_ids()) EXPECT_NE(t, 1000);

  auto [replay_code, replay_out] =
      RunToEnd({kTrace, "--store", StorePath(), "replay", summary.run_id, "--json"});
  EXPECT_EQ(replay_code, 0) << replay_out;
  json report = json::parse(replay_out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << replay_out;
  EXPECT_EQ(report["level"], "bitwise") << report.dump(2);
  ASSERT_EQ(report["calls"].size(), 4u);
  for (const json& c : report["calls"]) EXPECT_EQ(c["level"], "bitwise") << c.dump(2);

  // `trace show` names them on the calls that set them.
  auto [show_code, show_out] = RunToEnd({kTrace, "--store", StorePath(), "show", summary.run_id});
  EXPECT_EQ(show_code, 0) << show_out;
  EXPECT_NE(show_out.find("frequency_penalty -1.5, presence_penalty -0.5, logit_bias 0"),
            std::string::npos)
      << show_out;
  EXPECT_NE(show_out.find("frequency_penalty -1, presence_penalty 1.5, logit_bias 2"),
            std::string::npos)
      << show_out;
}

TEST_F(RecordCliTest, UnknownCommandIsAClearError) {
  Proc p = Spawn(Record({"/nonexistent/agent"}));
  EXPECT_EQ(p.Wait(), 2);
}

}  // namespace
}  // namespace trace

namespace trace {
namespace {

// Secrets never reach the run: values after secret-looking flags in the agent's argv and in
// the `trace` command line, NAME=secret arguments, bearer tokens, URL credentials in
// OPENAI_BASE_URL and --upstream; and `trace export` prints none of them.
TEST_F(RecordCliTest, RecordedCommandLinesHoldNoSecrets) {
  std::vector<std::string> args = {kTrace,
                                   "--store",
                                   StorePath(),
                                   "record",
                                   "--upstream",
                                   "https://proxyuser:SECRET-1@127.0.0.1:9/v1",
                                   "--",
                                   "/bin/sh",
                                   "-c",
                                   "exit 0",
                                   "sh",
                                   "--api-key",
                                   "sk-SECRET-2",
                                   "--token=SECRET-3",
                                   "PASSWORD=SECRET-4",
                                   "Authorization: Bearer SECRET-5"};
  Proc p = Spawn(args, {"OPENAI_BASE_URL=https://baseuser:SECRET-6@api.example.invalid/v1"});
  EXPECT_EQ(p.Wait(), 0);
  auto [summary, events] = OnlyRun();
  store::StoreOptions o;
  o.read_only = true;
  auto s = store::Store::Open(StorePath(), o);
  ASSERT_TRUE(s.ok());
  auto header = (*s)->LoadHeader(summary.run_id);
  ASSERT_TRUE(header.ok());
  std::string all = header->DebugString();
  EXPECT_EQ(all.find("SECRET"), std::string::npos) << all;
  EXPECT_EQ(header->argv(5), "[redacted]");
  EXPECT_EQ(header->argv(6), "--token=[redacted]");
  EXPECT_EQ(header->env().at("OPENAI_BASE_URL"), "https://api.example.invalid/v1");
  EXPECT_EQ(header->attributes().at("upstream"), "https://127.0.0.1:9/v1");
  Proc exp = Spawn({kTrace, "--store", StorePath(), "export", summary.run_id});
  std::string exported;
  char buf[4096];
  for (ssize_t n; (n = read(exp.out_fd, buf, sizeof buf)) > 0;) exported.append(buf, n);
  EXPECT_EQ(exp.Wait(), 0);
  EXPECT_NE(exported.find("[redacted]"), std::string::npos);
  EXPECT_EQ(exported.find("SECRET"), std::string::npos);
}

// `trace serve` takes its key from a file or TRACE_API_KEY, never from the command line
// (`ps` shows argv to every user), and the key file's path, not the key, is recorded.
TEST_F(RecordCliTest, ServeTakesItsKeyFromAFileOrTheEnvironment) {
  Proc refused = Spawn({kTrace, "serve", "--port", "0", "--api-key", "k"}, {}, true);
  std::string line = refused.WaitLine("trace: ", 60);
  EXPECT_NE(line.find("--api-key-file"), std::string::npos) << line;
  EXPECT_EQ(refused.Wait(), 2);

  const std::string key_file = demo().file("serve.key");
  std::ofstream(key_file) << "file-key-42\n";
  for (bool from_file : {true, false}) {
    SCOPED_TRACE(from_file ? "--api-key-file" : "TRACE_API_KEY");
    const std::string key = from_file ? "file-key-42" : "env-key-43";
    std::vector<std::string> args = {kTrace,      "--store", StorePath(), "serve",    "--model",
                                     model_dir(), "--port",  "0",         "--record", "keyed"};
    if (from_file) {
      args.push_back("--api-key-file");
      args.push_back(key_file);
    }
    Proc p = Spawn(args, from_file ? std::vector<std::string>{}
                                   : std::vector<std::string>{"TRACE_API_KEY=" + key});
    std::string serving = p.WaitLine("serving on ", 120);
    ASSERT_FALSE(serving.empty());
    std::string base = serving.substr(std::string("serving on ").size());
    base = base.substr(0, base.size() - 3);  // without /v1
    httplib::Client c(base);
    c.set_read_timeout(60, 0);
    EXPECT_EQ(c.Get("/v1/models")->status, 401);
    EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
    EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer " + key}})->status, 200);
    EXPECT_EQ(c.Get("/v1/models", {{"x-api-key", key}})->status, 200);
    EXPECT_EQ(c.Get("/health")->status, 200);
    kill(p.pid, SIGTERM);
    EXPECT_EQ(p.Wait(), 0);
  }
  store::StoreOptions o;
  o.read_only = true;
  auto s = store::Store::Open(StorePath(), o);
  ASSERT_TRUE(s.ok());
  auto runs = (*s)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  for (const store::RunSummary& run : *runs) {
    auto header = (*s)->LoadHeader(run.run_id);
    ASSERT_TRUE(header.ok());
    std::string all = header->DebugString();
    EXPECT_EQ(all.find("file-key-42"), std::string::npos);
    EXPECT_EQ(all.find("env-key-43"), std::string::npos);
    auto events = (*s)->LoadEvents(run.run_id);
    ASSERT_TRUE(events.ok());
    int refused_notes = 0;
    for (const proto::Event& e : *events) {
      if (e.has_note() && e.note().topic() == "refused_requests") ++refused_notes;
    }
    EXPECT_EQ(refused_notes, 2);  // the first of two 401s, and the summary
  }
}

}  // namespace
}  // namespace trace
