// Store durability tests: what a writer acknowledges (WaitDurable) is committed at once
// (group commit), a lock held by another connection is waited out without losing or
// failing anything, a store that cannot take writes fails the writer loudly and keeps
// every acknowledged event, and processes creating one new store at once all succeed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "store/store.h"
#include "testkit/store_test_util.h"

namespace trace::store {
namespace {

using testing::MakeFullEvent;
using testing::TempDir;

proto::Event Note(const std::string& text) {
  proto::Event e;
  e.mutable_note()->set_topic("test");
  e.mutable_note()->set_text(text);
  return e;
}

// Collects WriterHealth reports and lets the test wait for a state.
struct HealthLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<WriterHealth> reports;

  std::function<void(const WriterHealth&)> Callback() {
    return [this](const WriterHealth& h) {
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(h);
      cv.notify_all();
    };
  }
  WriterHealth WaitFor(WriterHealth::State state) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] {
      for (const auto& r : reports) {
        if (r.state == state) return true;
      }
      return false;
    });
    for (const auto& r : reports) {
      if (r.state == state) return r;
    }
    return {};
  }
};

TEST(StoreGroupCommit, WaitDurableCommitsAtOnceNotAtTheInterval) {
  TempDir dir;
  auto store = Store::Open(dir.file("t.db"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  WriterOptions o;
  o.commit_interval_ms = 3'600'000;  // an hour: only a waiter can make a commit happen
  auto w = (*store)->BeginRun({}, o);
  ASSERT_TRUE(w.ok());
  // Many threads each acknowledge their own events; every one is committed when its
  // WaitDurable returns, and readable by another connection.
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> acked(kThreads);
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto seq = (*w)->Append(Note(std::to_string(t) + "." + std::to_string(i)));
        if (!seq.ok()) return void(errors[t] = seq.status().message());
        Status st = (*w)->WaitDurable(*seq);
        if (!st.ok()) return void(errors[t] = st.message());
        if ((*w)->durable_seq() < *seq) return void(errors[t] = "durable_seq behind");
        acked[t].push_back(*seq);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) ASSERT_EQ(e, "");
  StoreOptions ro;
  ro.read_only = true;
  auto reader = Store::Open(dir.file("t.db"), ro);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events->size(), size_t{kThreads * kEach});
}

TEST(StoreLock, ALockHeldLongerThanTheBusyTimeoutIsWaitedOutLosingNothing) {
  TempDir dir;
  std::string path = dir.file("t.db");
  StoreOptions so;
  so.busy_timeout_ms = 50;
  auto store = Store::Open(path, so);
  ASSERT_TRUE(store.ok());
  HealthLog health;
  WriterOptions o;
  o.lock_report_ms = 50;  // each try waits 50 ms; the holder keeps it far longer
  o.on_health = health.Callback();
  auto w = (*store)->BeginRun({}, o);
  ASSERT_TRUE(w.ok());
  auto first = (*w)->Append(Note("before"));
  ASSERT_TRUE(first.ok() && (*w)->WaitDurable(*first).ok());

  // Another connection takes the write lock and keeps it.
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE; INSERT INTO meta VALUES('holder', 'x')", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);

  std::vector<uint64_t> acked;
  std::string error;
  std::thread appender([&] {
    for (int i = 0; i < 20; ++i) {
      auto seq = (*w)->Append(Note("during " + std::to_string(i)));
      if (!seq.ok()) return void(error = seq.status().message());
      Status st = (*w)->WaitDurable(*seq);
      if (!st.ok()) return void(error = st.message());
      acked.push_back(*seq);
    }
  });
  // The writer has tried past its busy timeout and says it is waiting...
  WriterHealth waiting = health.WaitFor(WriterHealth::State::kWaitingForLock);
  EXPECT_NE(waiting.status.message().find("another process holds the write lock"),
            std::string::npos)
      << waiting.status.message();
  EXPECT_GE(waiting.waited_ms, 50);
  EXPECT_EQ((*w)->health().state, WriterHealth::State::kWaitingForLock);
  // ... and nothing got acknowledged meanwhile.
  EXPECT_EQ((*w)->durable_seq(), *first);
  ASSERT_EQ(sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(holder);
  appender.join();
  ASSERT_EQ(error, "");  // not sticky: the writer carried on
  EXPECT_EQ(acked.size(), 20u);
  health.WaitFor(WriterHealth::State::kOk);
  EXPECT_EQ((*w)->health().state, WriterHealth::State::kOk);
  ASSERT_TRUE((*w)->End({}).ok());
  auto events = (*store)->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events->size(), 22u);
}

// A file size limit (RLIMIT_FSIZE) makes writes fail at the OS level at a fixed size, as
// a full disk does, without root or a special file system: every write past it fails
// with EFBIG. Runs in a child process (the limit is per process).
TEST(StoreFull, AStoreThatCannotTakeWritesFailsTheWriterAndKeepsWhatWasAcknowledged) {
  TempDir dir;
  std::string path = dir.file("t.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);  // else the first write past the limit kills us
    struct rlimit limit = {256 << 10, 256 << 10};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    auto store = Store::Open(path);
    if (!store.ok()) ::_exit(11);
    std::string failure;
    WriterOptions o;
    o.on_health = [&failure](const WriterHealth& h) {
      if (h.state == WriterHealth::State::kFailed) failure = h.status.message();
    };
    auto w = (*store)->BeginRun({}, o);
    if (!w.ok()) ::_exit(12);
    auto send = [&](uint64_t v) { return ::write(fds[1], &v, sizeof v) == sizeof v; };
    if (!send(0) || ::write(fds[1], (*w)->run_id().data(), 26) != 26) ::_exit(13);
    // Acknowledge events until the store refuses; report each acknowledged seq.
    std::string error;
    for (int i = 0; i < 100000; ++i) {
      auto seq = (*w)->Append(MakeFullEvent(proto::Event::kToolResult, i, 2));
      if (!seq.ok()) {
        error = seq.status().message();
        break;
      }
      Status st = (*w)->WaitDurable(*seq);
      if (!st.ok()) {
        error = st.message();
        break;
      }
      if (!send(*seq)) ::_exit(14);
    }
    // After the failure every append fails at once, with the same error.
    auto later = (*w)->Append(MakeFullEvent(proto::Event::kNote, 1));
    bool later_fails = !later.ok() && later.status().code() == StatusCode::kUnavailable;
    std::string report = error + "\n" + failure + "\n" + (later_fails ? "later-fails" : "");
    if (!send(~uint64_t{0})) ::_exit(15);
    uint64_t n = report.size();
    if (!send(n) || ::write(fds[1], report.data(), n) != static_cast<ssize_t>(n)) ::_exit(16);
    ::_exit(0);
  }
  ::close(fds[1]);
  auto recv = [&](void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fds[0], static_cast<char*>(p) + got, n - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  uint64_t v = 1;
  ASSERT_TRUE(recv(&v, sizeof v) && v == 0) << "child could not start a run";
  char id[27] = {};
  ASSERT_TRUE(recv(id, 26));
  std::vector<uint64_t> acked;
  while (recv(&v, sizeof v) && v != ~uint64_t{0}) acked.push_back(v);
  uint64_t n = 0;
  ASSERT_TRUE(recv(&n, sizeof n));
  std::string report(n, '\0');
  ASSERT_TRUE(recv(report.data(), n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  EXPECT_GT(acked.size(), 5u);  // it did record for a while
  // The error names the store and says why, as the writer reported it at once.
  EXPECT_NE(report.find("cannot take writes"), std::string::npos) << report;
  EXPECT_NE(report.find(path), std::string::npos) << report;
  // SQLite only says "disk I/O error"; the store names the cause.
  EXPECT_NE(report.find("file size limit (ulimit -f) of 256 KiB is reached"), std::string::npos)
      << report;
  EXPECT_NE(report.find("later-fails"), std::string::npos) << report;
  size_t nl = report.find('\n');
  EXPECT_NE(report.substr(nl + 1).find("cannot take writes"), std::string::npos)
      << "on_health did not report the failure: " << report;

  // Every acknowledged event is there, and the run reads as crashed (writer gone).
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto events = (*store)->LoadEvents(id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_GE(events->size(), acked.size());
  for (uint64_t seq : acked) {
    ASSERT_TRUE((*events)[seq - 1].has_tool_result()) << seq;
    EXPECT_EQ((*events)[seq - 1].seq(), seq);
  }
  EXPECT_EQ((*store)->GetRunSummary(id)->status, RunStatus::kCrashed);
}

TEST(StoreOpenConcurrency, EightProcessesCreatingOneNewStoreAllSucceed) {
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    std::string path = dir.file("new/traces.db");
    int gate[2];
    ASSERT_EQ(::pipe(gate), 0);
    std::vector<pid_t> children;
    for (int k = 0; k < 8; ++k) {
      pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        ::close(gate[1]);
        char c;
        (void)::read(gate[0], &c, 1);  // all start together when the gate closes
        auto store = Store::Open(path);
        if (!store.ok()) {
          std::fprintf(stderr, "child %d: %s\n", k, store.status().message().c_str());
          ::_exit(1);
        }
        auto w = (*store)->BeginRun({});
        if (!w.ok()) {
          std::fprintf(stderr, "child %d: %s\n", k, w.status().message().c_str());
          ::_exit(2);
        }
        auto seq = (*w)->Append(Note("child " + std::to_string(k)));
        if (!seq.ok() || !(*w)->End({}).ok()) ::_exit(3);
        ::_exit(0);
      }
      children.push_back(pid);
    }
    ::close(gate[0]);
    ::close(gate[1]);
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    auto runs = (*store)->ListRuns();
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 8u);
    for (const auto& r : *runs) EXPECT_EQ(r.status, RunStatus::kComplete);
  }
}

}  // namespace
}  // namespace trace::store
