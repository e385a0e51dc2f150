// End-to-end durability of `trace record` (docs/recorder.md, "Durability"): what the
// server acknowledged is in the store however the recorder ends; recorders started
// together on a new store all work; a lock another process holds delays the recording
// without losing anything; a store that cannot take writes makes the server answer 503
// at once and says so on the terminal. The agents log every acknowledgement they got, and
// the tests check each one against the store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "store/store.h"
#include "tests/common/demo_model.h"

namespace trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";
const std::string kClientDir = std::string(TRACE_SOURCE_DIR) + "/recorder/clients/python";

// Waits up to timeout_s for process `pid` (a child or not) to end, through a pidfd.
bool WaitForExit(pid_t pid, int timeout_s) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  struct pollfd p = {fd, POLLIN, 0};
  int n = poll(&p, 1, timeout_s * 1000);
  close(fd);
  return n == 1;
}

// A `trace` process with pipes to its stdin, stdout and stderr.
struct Proc {
  pid_t pid = -1;
  int in_fd = -1, out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;

  // Reads `fd` until a line containing `needle` arrives (returned), EOF or the timeout.
  static std::string WaitLine(int fd, std::string* buf, const std::string& needle, int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    for (;;) {
      size_t nl;
      while ((nl = buf->find('\n')) != std::string::npos) {
        std::string line = buf->substr(0, nl);
        buf->erase(0, nl + 1);
        if (line.find(needle) != std::string::npos) return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return "";
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) return "";
      char chunk[4096];
      ssize_t n = read(fd, chunk, sizeof chunk);
      if (n <= 0) return "";
      buf->append(chunk, n);
    }
  }
  std::string OutLine(const std::string& needle, int timeout_s = 120) {
    return WaitLine(out_fd, &out_buf, needle, timeout_s);
  }
  std::string ErrLine(const std::string& needle, int timeout_s = 120) {
    return WaitLine(err_fd, &err_buf, needle, timeout_s);
  }
  void Send(const std::string& s) { (void)!write(in_fd, s.data(), s.size()); }
  // Exit status (128 + signal when killed); -1 when it did not end within the timeout.
  int Wait(int timeout_s = 300) {
    if (!WaitForExit(pid, timeout_s)) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return -1;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int fd : {in_fd, out_fd, err_fd}) close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Starts `args`; with file_limit > 0, under that RLIMIT_FSIZE (bytes).
Proc Spawn(const std::vector<std::string>& args, rlim_t file_limit = 0) {
  int in[2], out[2], err[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (file_limit > 0) {
      struct rlimit limit = {file_limit, file_limit};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(120);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  p.in_fd = in[1];
  p.out_fd = out[0];
  p.err_fd = err[0];
  return p;
}

class DurabilityTest : public testing::DemoModelSuite {
 protected:
  std::string Path(const std::string& name) {
    return demo().file(
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" + name);
  }

  // `trace record` on the local engine, or (upstream non-empty) forwarding to that
  // OpenAI-compatible server: no model to load, so it starts in milliseconds.
  std::vector<std::string> Record(const std::string& store, const std::vector<std::string>& cmd,
                                  const std::string& upstream = "") {
    std::vector<std::string> args = {kTrace, "--store", store, "record", "--seed", "7"};
    if (upstream.empty()) {
      args.insert(args.end(), {"--model", model_dir()});
    } else {
      args.insert(args.end(), {"--upstream", upstream});
    }
    args.push_back("--");
    args.insert(args.end(), cmd.begin(), cmd.end());
    return args;
  }

  // A Python agent: `body` runs after the preamble, which defines post(path, body) /
  // get(path) against the recorder and ack(line) (appends to the log in argv[1], then
  // prints "acked N").
  std::string Agent(const std::string& name, const std::string& body) {
    std::string path = Path(name);
    std::ofstream(path) << R"(import json, os, sys, threading, urllib.request, urllib.error
sys.path.insert(0, )" << json(kClientDir).dump()
                        << R"()
base = os.environ["TRACE_ENDPOINT"]
key = os.environ["OPENAI_API_KEY"]
log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
lock = threading.Lock()
acked = [0]
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())
model = os.environ.get("OPENAI_MODEL")
if not model:  # proxy mode: the upstream names its model
    req = urllib.request.Request(base + "/v1/models", headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=300) as r:
        model = json.loads(r.read())["data"][0]["id"]
def call(i):
    return post("/v1/chat/completions", {"model": model, "max_tokens": 3, "seed": i,
        "messages": [{"role": "user", "content": "call %d" % i}]})
def ack(line):
    with lock:
        os.write(log, (line + "\n").encode())  # in the kernel before we go on
        acked[0] += 1
        print("acked", acked[0], flush=True)
print("agent", os.getpid(), os.environ["TRACE_RUN_ID"], flush=True)
)" << body;
    return path;
  }

  // Every acknowledgement in `log_path` is in run `run_id` of `store_path`: model calls by
  // response id, events by seq and text. Returns how many were checked.
  int CheckAcknowledged(const std::string& store_path, const std::string& run_id,
                        const std::string& log_path) {
    store::StoreOptions ro;
    ro.read_only = true;
    auto store = store::Store::Open(store_path, ro);
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return 0;
    auto events = (*store)->LoadEvents(run_id);
    EXPECT_TRUE(events.ok()) << events.status().message();
    if (!events.ok()) return 0;
    std::set<std::string> call_ids;
    std::map<uint64_t, std::string> notes;
    for (const proto::Event& e : *events) {
      if (e.has_llm_call()) call_ids.insert(e.llm_call().request_id());
      if (e.has_note()) notes[e.seq()] = e.note().text();
    }
    std::ifstream in(log_path);
    int checked = 0;
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string kind;
      words >> kind;
      if (kind == "call") {
        std::string id;
        words >> id;
        EXPECT_TRUE(call_ids.count(id)) << "acknowledged model call " << id << " is missing";
        ++checked;
      } else if (kind == "events") {
        for (std::string item; words >> item;) {
          size_t colon = item.find(':');
          uint64_t seq = std::stoull(item.substr(0, colon));
          EXPECT_EQ(notes[seq], item.substr(colon + 1)) << "acknowledged event seq " << seq;
          ++checked;
        }
      }
    }
    return checked;
  }
};

// 12 SIGKILLs of `trace record` at random moments while an agent sends model calls
// and event batches from two threads: 0 acknowledged events missing, each run readable
// and marked crashed, and the agent stopped with its recorder. Three rounds record the
// local engine; nine forward to one `trace serve` (each starts without loading a model,
// which keeps the test short) and so also cover the proxy's acknowledgements.
TEST_F(DurabilityTest, KillLoopLosesNoAcknowledgedEvent) {
  std::string store_path = Path("traces.db");
  Proc upstream = Spawn({kTrace, "serve", "--model", model_dir(), "--port", "0"});
  std::string serving = upstream.OutLine("serving on ");
  ASSERT_FALSE(serving.empty()) << upstream.ErrLine("trace:", 1);
  const std::string upstream_url = serving.substr(std::string("serving on ").size());
  std::string agent = Agent("agent.py", R"(
def calls():
    i = 0
    while True:
        r = call(i)
        ack("call " + r["id"])
        i += 1
def events():
    i = 0
    while True:
        texts = ["n-%d-%d" % (i, k) for k in range(3)]
        r = post("/trace/v1/events", {"events": [{"type": "note", "text": t} for t in texts]})
        ack("events " + " ".join("%d:%s" % (s, t) for s, t in zip(r["seqs"], texts)))
        i += 1
threads = [threading.Thread(target=f, daemon=True) for f in (calls, events)]
for t in threads: t.start()
for t in threads: t.join()
)");
  std::mt19937 rng(16);
  int total_checked = 0;
  constexpr int kKills = 12;
  for (int kill_round = 0; kill_round < kKills; ++kill_round) {
    SCOPED_TRACE("kill " + std::to_string(kill_round));
    std::string log_path = Path("acks-" + std::to_string(kill_round));
    Proc p = Spawn(
        Record(store_path, {"python3", agent, log_path}, kill_round % 4 == 0 ? "" : upstream_url));
    std::string hello = p.OutLine("agent ");
    ASSERT_FALSE(hello.empty()) << "agent did not start";
    std::istringstream words(hello);
    std::string word, run_id;
    pid_t agent_pid = 0;
    words >> word >> agent_pid >> run_id;
    // Kill after a random number of acknowledgements, while requests are in flight.
    const int after = std::uniform_int_distribution<int>(1, 20)(rng);
    ASSERT_FALSE(p.OutLine("acked " + std::to_string(after)).empty());
    kill(p.pid, SIGKILL);
    EXPECT_EQ(p.Wait(), 128 + SIGKILL);
    bool agent_ended = WaitForExit(agent_pid, 60);
    if (!agent_ended) kill(agent_pid, SIGKILL);
    EXPECT_TRUE(agent_ended) << "the agent outlived its recorder";
    total_checked += CheckAcknowledged(store_path, run_id, log_path);
    store::StoreOptions ro;
    ro.read_only = true;
    auto store = store::Store::Open(store_path, ro);
    ASSERT_TRUE(store.ok());
    auto summary = (*store)->GetRunSummary(run_id);
    ASSERT_TRUE(summary.ok()) << summary.status().message();
    EXPECT_EQ(summary->status, store::RunStatus::kCrashed);
  }
  kill(upstream.pid, SIGTERM);
  upstream.Wait();
  EXPECT_GT(total_checked, kKills);
  std::printf("kill loop: %d SIGKILLs, %d acknowledged events checked, %s\n", kKills, total_checked,
              HasFailure() ? "SOME MISSING" : "0 missing");
}

// Eight recorders started at once on a store that does not exist yet all succeed, and
// `trace record -- true` always exits. (Forwarding mode: nothing to load, so all eight
// reach the new store within milliseconds of each other; the upstream is never called.)
TEST_F(DurabilityTest, EightRecordersStartedAtOnceOnANewStoreAllSucceed) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::string store_path = Path("new" + std::to_string(round) + "/traces.db");
    std::vector<Proc> procs;
    for (int k = 0; k < 8; ++k) {
      procs.push_back(Spawn(Record(store_path, {"true"}, "http://127.0.0.1:9/v1")));
    }
    for (auto& p : procs) {
      int rc = p.Wait(120);  // -1: it never exited
      EXPECT_EQ(rc, 0) << p.ErrLine("trace:", 1);
    }
    store::StoreOptions ro;
    ro.read_only = true;
    auto store = store::Store::Open(store_path, ro);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto runs = (*store)->ListRuns();
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 8u);
    for (const auto& r : *runs) EXPECT_EQ(r.status, store::RunStatus::kComplete);
  }
}

// Another process holds the store's write lock while the agent works: the recorder says
// so on the terminal, answers nothing it has not stored, and once the lock is free goes
// on; nothing is lost and the run completes.
TEST_F(DurabilityTest, ALockHeldByAnotherProcessDelaysButLosesNothing) {
  std::string store_path = Path("traces.db");
  std::string log_path = Path("acks");
  std::string agent = Agent("agent.py", R"(
ack("call " + call(0)["id"])
print("ready", flush=True)
sys.stdin.readline()
for i in range(1, 4):
    ack("call " + call(i)["id"])
    r = post("/trace/v1/events", {"events": [{"type": "note", "text": "note-%d" % i}]})
    ack("events %d:note-%d" % (r["seqs"][0], i))
print("done", flush=True)
)");
  Proc p = Spawn(Record(store_path, {"python3", agent, log_path}));
  std::string hello = p.OutLine("agent ");
  ASSERT_FALSE(hello.empty());
  std::string run_id = hello.substr(hello.rfind(' ') + 1);
  ASSERT_FALSE(p.OutLine("ready").empty());

  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(store_path.c_str(), &holder), SQLITE_OK);
  sqlite3_busy_timeout(holder, 60000);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE; INSERT INTO meta VALUES('holder', 'x')", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  p.Send("go\n");
  // The recorder reports the wait on the terminal (after its first try at the lock).
  std::string busy = p.ErrLine("store busy:");
  EXPECT_NE(busy.find("another process holds the write lock"), std::string::npos) << busy;
  ASSERT_EQ(sqlite3_exec(holder, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(holder);
  EXPECT_FALSE(p.ErrLine("store writable again").empty());
  EXPECT_FALSE(p.OutLine("done").empty());
  EXPECT_EQ(p.Wait(), 0);
  EXPECT_EQ(CheckAcknowledged(store_path, run_id, log_path), 7);
  store::StoreOptions ro;
  ro.read_only = true;
  auto store = store::Store::Open(store_path, ro);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->GetRunSummary(run_id)->status, store::RunStatus::kComplete);
}

// The store cannot take more writes (a file size limit, as a full disk does): from the
// first failed commit on, requests get 503 with a clear error, the terminal says so at
// once (before the agent goes on), and everything answered 200 before is in the store.
TEST_F(DurabilityTest, AStoreThatCannotTakeWritesAnswers503AndSaysSoAtOnce) {
  std::string store_path = Path("traces.db");
  {
    auto store = store::Store::Open(store_path);  // created without the limit
    ASSERT_TRUE(store.ok());
  }
  std::string log_path = Path("acks");
  std::string agent = Agent("agent.py", R"(
i = 0
while True:
    try:
        ack("call " + call(i)["id"])
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        print("refused", e.code, body["error"]["message"], flush=True)
        break
    i += 1
sys.stdin.readline()
codes = []
for j in range(3):
    try:
        call(1000 + j)
        codes.append(200)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
try:
    post("/trace/v1/events", {"events": [{"type": "note", "text": "after"}]})
    codes.append(200)
except urllib.error.HTTPError as e:
    codes.append(e.code)
print("after", " ".join(str(c) for c in codes), flush=True)
)");
  Proc p = Spawn(Record(store_path, {"python3", agent, log_path}), 256 << 10);
  std::string hello = p.OutLine("agent ");
  ASSERT_FALSE(hello.empty()) << p.ErrLine("trace:", 1);
  std::string run_id = hello.substr(hello.rfind(' ') + 1);
  std::string refused = p.OutLine("refused ");
  ASSERT_FALSE(refused.empty());
  EXPECT_NE(refused.find("refused 503 not recorded"), std::string::npos) << refused;
  EXPECT_NE(refused.find("cannot take writes"), std::string::npos) << refused;
  EXPECT_NE(refused.find("file size limit"), std::string::npos) << refused;
  // Told at once: the agent waits for us, and we wait for the terminal line.
  std::string stopped = p.ErrLine("RECORDING STOPPED", 60);
  EXPECT_FALSE(stopped.empty()) << "the terminal was not told";
  EXPECT_NE(stopped.find(store_path), std::string::npos) << stopped;
  p.Send("go\n");
  EXPECT_EQ(p.OutLine("after "), "after 503 503 503 503");
  EXPECT_EQ(p.Wait(), 2);  // the run could not be completed in the store
  EXPECT_GT(CheckAcknowledged(store_path, run_id, log_path), 3);
  store::StoreOptions ro;
  ro.read_only = true;
  auto store = store::Store::Open(store_path, ro);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->GetRunSummary(run_id)->status, store::RunStatus::kCrashed);
}

}  // namespace
}  // namespace trace
