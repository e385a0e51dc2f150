// What only the PostgreSQL backend has: store URLs, connection errors, schema version
// checks in a database, and many processes creating and writing one store at once. The
// backend-neutral store tests run on PostgreSQL too (store_test.cc, this same binary).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include <google/protobuf/util/message_differencer.h>

#include "store/copy.h"
#include "store/store.h"
#include "store/store_location.h"
#include "testkit/store_test_util.h"
#include "tests/store/store_backend.h"

namespace trace::store {
namespace {

using testing::SharedPgServer;

TRACE_BACKEND_SUITE(StorePg);

TEST(StorePgLocation, PathsSqliteAndPostgresUrls) {
  auto plain = ParseStoreLocation("/tmp/a.db");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->backend, StoreBackend::kSqlite);
  EXPECT_EQ(plain->target, "/tmp/a.db");
  auto sqlite = ParseStoreLocation("sqlite:///tmp/b.db");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->backend, StoreBackend::kSqlite);
  EXPECT_EQ(sqlite->target, "/tmp/b.db");
  auto pg = ParseStoreLocation("postgresql://me:s3cret@db.example:5433/traces?password=x&a=b");
  ASSERT_TRUE(pg.ok());
  EXPECT_EQ(pg->backend, StoreBackend::kPostgres);
  EXPECT_EQ(pg->target, "postgresql://me:s3cret@db.example:5433/traces?password=x&a=b");
  EXPECT_EQ(pg->display, "postgresql://me@db.example:5433/traces?password=***&a=b");
  EXPECT_EQ(ParseStoreLocation("postgres://h/d")->backend, StoreBackend::kPostgres);
  auto bad = ParseStoreLocation("mysql://h/d");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown scheme 'mysql://'"), std::string::npos);
  EXPECT_FALSE(ParseStoreLocation("sqlite://").ok());
}

TEST_P(StorePg, UnreachableServerAndUnknownRoleAreOneLineErrors) {
  // Port 1: nothing listens there.
  auto s = Store::Open("postgresql://trace@127.0.0.1:1/db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("postgresql://trace@127.0.0.1:1/db: cannot connect:"),
            std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("Connection refused"), std::string::npos);

  const std::string url = Location("roles");
  std::string who = url;
  who.replace(who.find("trace@"), 6, "intruder:pw@");
  s = Store::Open(who);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("role \"intruder\" does not exist"), std::string::npos)
      << s.status().message();
  // The password is not repeated in messages.
  EXPECT_EQ(s.status().message().find(":pw@"), std::string::npos) << s.status().message();
}

TEST_P(StorePg, RefusesANewerSchemaAndReadsNothingFromAnEmptyDatabase) {
  const std::string url = Location("schema");
  StoreOptions ro;
  ro.read_only = true;
  auto s = Store::Open(url, ro);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a trace store"), std::string::npos)
      << s.status().message();
  StoreOptions no_create;
  no_create.create_if_missing = false;
  s = Store::Open(url, no_create);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  // Neither created a table (1/0 fails when meta exists).
  const std::string db = url.substr(url.rfind('/') + 1);
  EXPECT_EQ(SharedPgServer()->Psql(db, "SELECT 1/(to_regclass('meta') IS NULL)::int"), 0);

  {
    auto made = Store::Open(url);
    ASSERT_TRUE(made.ok()) << made.status().message();
    EXPECT_EQ((*made)->schema_version(), kSchemaVersion);
  }
  ASSERT_EQ(SharedPgServer()->Psql(db, "UPDATE meta SET value='99' WHERE key='schema_version'"), 0);
  for (bool read_only : {false, true}) {
    StoreOptions o;
    o.read_only = read_only;
    s = Store::Open(url, o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.status().message(), url +
                                        ": store schema version 99 is newer than this trace "
                                        "build supports (" +
                                        std::to_string(kSchemaVersion) + "); upgrade trace");
  }
}

// Eight processes open one new store at once (all creating its tables), each records a
// run whose large strings are shared with the others' (blob dedupe across writers), and
// every event each one was told is durable is there.
TEST_P(StorePg, EightProcessesCreateAndWriteOneStoreLosingNothing) {
  const std::string url = Location("eight");
  constexpr int kProcs = 8, kEvents = 60;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = Store::Open(url);
      if (!store.ok()) {
        std::fprintf(stderr, "process %d: %s\n", p, store.status().message().c_str());
        _exit(10);
      }
      proto::RunHeader h;
      h.set_label("proc" + std::to_string(p));
      auto w = (*store)->BeginRun(h);
      if (!w.ok()) _exit(11);
      for (int i = 0; i < kEvents; ++i) {
        proto::Event e;
        // Every process writes the same large note text (one blob for all) and its own.
        e.mutable_note()->set_text(i % 2 ? std::string(2000, 'a' + i % 26)
                                         : "p" + std::to_string(p) + " e" + std::to_string(i) +
                                               std::string(400, 'x'));
        auto seq = (*w)->Append(e);
        if (!seq.ok() || !(*w)->WaitDurable(*seq).ok()) _exit(12);
      }
      proto::RunEnd end;
      if (!(*w)->End(end).ok()) _exit(13);
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  StoreOptions ro;
  ro.read_only = true;
  auto store = Store::Open(url, ro);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), static_cast<size_t>(kProcs));
  std::set<std::string> labels;
  for (const RunSummary& r : *runs) {
    labels.insert(r.label);
    EXPECT_EQ(r.status, RunStatus::kComplete);
    auto events = (*store)->LoadEvents(r.run_id);
    ASSERT_TRUE(events.ok()) << events.status().message();
    ASSERT_EQ(events->size(), static_cast<size_t>(kEvents + 1));
    const int p = std::stoi(r.label.substr(4));
    for (int i = 0; i < kEvents; ++i) {
      std::string want(2000, 'a' + i % 26);
      if (i % 2 == 0) {
        want = "p";
        want.append(std::to_string(p)).append(" e").append(std::to_string(i));
        want.append(400, 'x');
      }
      EXPECT_EQ((*events)[i].note().text(), want) << r.run_id << " seq " << i + 1;
    }
  }
  EXPECT_EQ(labels.size(), static_cast<size_t>(kProcs));
  // 26 shared texts at most (one per letter), stored once, plus each process's own.
  auto stats = (*store)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_LE(stats->blobs, 26 + kProcs * kEvents / 2);
}

// A lock another session holds makes the writer's transaction fail (lock_timeout): the
// batch is redone whole once the lock is gone, the wait is reported and its end too, and
// every acknowledged event is there.
TEST_P(StorePg, ATransactionAbortedByALockTimeoutIsRedoneLosingNothing) {
  const std::string url = Location("locked");
  auto store = Store::Open(url);
  ASSERT_TRUE(store.ok()) << store.status().message();
  std::mutex mu;
  std::vector<WriterHealth::State> states;
  WriterOptions o;
  o.lock_report_ms = 100;
  o.on_health = [&](const WriterHealth& h) {
    std::lock_guard<std::mutex> lock(mu);
    states.push_back(h.state);
  };
  auto w = (*store)->BeginRun({}, o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  proto::Event first;
  first.mutable_note()->set_text("before the lock");
  auto seq = (*w)->Append(first);
  ASSERT_TRUE(seq.ok() && (*w)->WaitDurable(*seq).ok());
  // Another session holds the events table for 1.5 s; we go on once pg_locks shows it
  // granted (psql fails, 1/0, until then).
  const std::string db = url.substr(url.rfind('/') + 1);
  std::atomic<bool> holder_done{false};
  std::thread holder([&] {
    SharedPgServer()->Psql(db,
                           "BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE; "
                           "SELECT pg_sleep(1.5); COMMIT;");
    holder_done = true;
  });
  while (!holder_done &&
         SharedPgServer()->Psql(db,
                                "SELECT 1/(SELECT count(*) FROM pg_locks WHERE granted AND "
                                "mode='AccessExclusiveLock' AND "
                                "relation='events'::regclass)::int") != 0) {
  }
  ASSERT_FALSE(holder_done) << "the lock holder ended before we saw its lock";
  std::vector<uint64_t> seqs;
  for (int i = 0; i < 20; ++i) {
    proto::Event e;
    e.mutable_note()->set_text("during the lock " + std::to_string(i));
    auto s = (*w)->Append(e);
    ASSERT_TRUE(s.ok());
    seqs.push_back(*s);
  }
  Status durable = (*w)->WaitDurable(seqs.back());
  holder.join();
  ASSERT_TRUE(durable.ok()) << durable.message();
  ASSERT_TRUE((*w)->End({}).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(states.size(), 2u);
    EXPECT_EQ(states[0], WriterHealth::State::kWaitingForLock);
    EXPECT_EQ(states.back(), WriterHealth::State::kOk);
  }
  auto events = (*store)->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), 22u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ((*events)[i + 1].note().text(), "during the lock " + std::to_string(i));
  }
}

// WriteRunCopy (`trace push/pull`): SQLite -> PostgreSQL -> SQLite keeps the header and
// every field of every event kind, bit for bit; a second copy is refused.
TEST_P(StorePg, CopiesAreFieldByFieldEqualBothWays) {
  using google::protobuf::util::MessageDifferencer;
  auto sqlite = Store::Open(dir_.file("a.db"));
  ASSERT_TRUE(sqlite.ok());
  proto::RunHeader header = testing::MakeFullHeader(5);
  header.set_run_id(NewRunId());
  auto w = (*sqlite)->BeginRun(header);
  ASSERT_TRUE(w.ok()) << w.status().message();
  int salt = 1;
  for (auto kind : {proto::Event::kLlmCall, proto::Event::kToolCall, proto::Event::kToolResult,
                    proto::Event::kContextChunk, proto::Event::kTemplateVar,
                    proto::Event::kClockRead, proto::Event::kOutput, proto::Event::kNote,
                    proto::Event::kLlmCall, proto::Event::kRunEnd}) {
    ASSERT_TRUE((*w)->Append(testing::MakeFullEvent(kind, salt++)).ok());
  }
  ASSERT_TRUE((*w)->Flush().ok());
  w->reset();
  auto src_header = (*sqlite)->LoadHeader(header.run_id());
  auto src_events = (*sqlite)->LoadEvents(header.run_id());
  ASSERT_TRUE(src_header.ok() && src_events.ok());

  auto pg = Store::Open(Location("copy"));
  ASSERT_TRUE(pg.ok()) << pg.status().message();
  ASSERT_TRUE(WriteRunCopy(**pg, *src_header, *src_events).ok());
  auto back = Store::Open(dir_.file("b.db"));
  ASSERT_TRUE(back.ok());
  {
    auto h = (*pg)->LoadHeader(header.run_id());
    auto e = (*pg)->LoadEvents(header.run_id());
    ASSERT_TRUE(h.ok() && e.ok());
    ASSERT_TRUE(WriteRunCopy(**back, *h, *e).ok());
  }
  for (Store* store : {pg->get(), back->get()}) {
    auto h = store->LoadHeader(header.run_id());
    auto e = store->LoadEvents(header.run_id());
    ASSERT_TRUE(h.ok() && e.ok()) << store->path();
    EXPECT_TRUE(MessageDifferencer::Equals(*src_header, *h)) << store->path();
    ASSERT_EQ(e->size(), src_events->size());
    for (size_t i = 0; i < e->size(); ++i) {
      EXPECT_TRUE(MessageDifferencer::Equals((*src_events)[i], (*e)[i]))
          << store->path() << " seq " << i + 1;
    }
    auto s = store->GetRunSummary(header.run_id());
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->status, RunStatus::kCrashed);  // the filler's RunEnd.how is the last enum
  }
  Status again = WriteRunCopy(**pg, *src_header, *src_events);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.message();
}

}  // namespace
}  // namespace trace::store
