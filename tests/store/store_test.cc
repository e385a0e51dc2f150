// Store tests: round trip, dedupe, durability and crash, corruption, concurrency.
#include "store/store.h"
#include "store/verify_queue.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "store/codec.h"
#include "store/export.h"
#include "testkit/store_test_util.h"
#include "tests/store/sql_test_util.h"
#include "tests/store/store_backend.h"

namespace trace::store {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::MakeConversation;
using testing::MakeFullEvent;
using testing::MakeFullHeader;
using testing::Sql;
using testing::TempDir;

std::unique_ptr<Store> OpenOrDie(const std::string& path, const StoreOptions& o = {}) {
  auto s = Store::Open(path, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

TRACE_PG_ENVIRONMENT();
TRACE_BACKEND_SUITE(StoreRoundTrip);
TRACE_BACKEND_SUITE(StoreWriter);
TRACE_BACKEND_SUITE(StoreConcurrency);
TRACE_BACKEND_SUITE(StoreCrash);
TRACE_BACKEND_SUITE(StoreIds);
TRACE_BACKEND_SUITE(StoreDelete);
TRACE_BACKEND_SUITE(StoreDedupe);
TRACE_BACKEND_SUITE(StoreList);
TRACE_BACKEND_SUITE(StoreVerifyQueue);

const proto::Event::KindCase kAllKinds[] = {
    proto::Event::kLlmCall,      proto::Event::kToolCall,    proto::Event::kToolResult,
    proto::Event::kContextChunk, proto::Event::kTemplateVar, proto::Event::kClockRead,
    proto::Event::kOutput,       proto::Event::kNote,        proto::Event::kRunEnd};

TEST(StoreOpen, CreatesParentDirsWithMode0600AndWal) {
  TempDir dir;
  std::string path = dir.file("a/b/traces.db");
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Flush().ok());
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));
}

TEST(StoreOpen, RefusesNewerSchemaWithClearMessage) {
  TempDir dir;
  std::string path = dir.file("t.db");
  { ASSERT_TRUE(OpenOrDie(path)); }
  Sql(path, "UPDATE meta SET value='99' WHERE key='schema_version'");
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("schema version 99 is newer"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find(path), std::string::npos);
}

TEST(StoreOpen, MigratesAnEmptyFileAndRefusesForeignFiles) {
  TempDir dir;
  std::string empty = dir.file("empty.db");
  { std::ofstream(empty).flush(); }
  ASSERT_TRUE(OpenOrDie(empty));

  std::string junk = dir.file("junk.db");
  { std::ofstream(junk) << std::string(4096, 'x'); }
  auto s = Store::Open(junk);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a trace store"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find(junk), std::string::npos);

  std::string other = dir.file("other.db");
  Sql(other, "CREATE TABLE t(x)");
  s = Store::Open(other);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a trace store"), std::string::npos);

  StoreOptions no_create;
  no_create.create_if_missing = false;
  s = Store::Open(dir.file("missing.db"), no_create);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
}

TEST_P(StoreRoundTrip, EveryEventKindFieldByField) {
  auto store = OpenOrDie(Location("t.db"));
  proto::RunHeader header = MakeFullHeader(3);
  auto w = store->BeginRun(header);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<proto::Event> written;
  int salt = 1;
  for (auto kind : kAllKinds) {
    // Two of each: the second LlmCall's prompt shares the first's prefix.
    for (int copy = 0; copy < 2 && !(kind == proto::Event::kRunEnd && copy == 1); ++copy) {
      proto::Event e = MakeFullEvent(kind, salt++);
      if (kind == proto::Event::kLlmCall && copy == 1) {
        auto& first = written.front().llm_call();
        auto* ids = e.mutable_llm_call()->mutable_prompt_token_ids();
        ids->Clear();
        ids->Add(first.prompt_token_ids().begin(), first.prompt_token_ids().end() - 3);
        ids->Add(77);
      }
      auto seq = (*w)->Append(e);
      ASSERT_TRUE(seq.ok()) << seq.status().message();
      e.set_seq(*seq);
      written.push_back(e);
    }
  }
  ASSERT_TRUE((*w)->WaitDurable(written.size()).ok());
  EXPECT_EQ((*w)->durable_seq(), written.size());

  auto loaded_header = store->LoadHeader((*w)->run_id());
  ASSERT_TRUE(loaded_header.ok());
  header.set_run_id((*w)->run_id());
  header.set_format_version(header.format_version());
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(header, *loaded_header)) << diff;

  auto events = store->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    diff.clear();
    EXPECT_TRUE(d.Compare(written[i], (*events)[i])) << "event " << i << ": " << diff;
    auto one = store->ReadEvent((*w)->run_id(), i + 1);
    ASSERT_TRUE(one.ok()) << one.status().message();
    EXPECT_TRUE(MessageDifferencer::Equals(written[i], *one)) << "ReadEvent " << i + 1;
  }
  // The second LlmCall was stored as a prefix of the first plus one token.
  auto summary = store->GetRunSummary((*w)->run_id());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->status, RunStatus::kCrashed);  // the filler's RunEnd.how is the last enum
  EXPECT_EQ(summary->model_calls, 2);
  EXPECT_EQ(summary->sampled_tokens, 10);
  EXPECT_EQ(summary->events, static_cast<int64_t>(written.size()));
}

TEST_P(StoreRoundTrip, FloatsAndDigestsAreBitwise) {
  auto store = OpenOrDie(Location("t.db"));
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  proto::Event e;
  auto* c = e.mutable_llm_call();
  const uint32_t bits[] = {0x7fc00001u, 0x80000000u, 0x7f800000u,
                           0xff800000u, 0x00000001u, 0x3f800000u};
  for (uint32_t b : bits) {
    float f;
    std::memcpy(&f, &b, 4);
    c->add_token_ids(static_cast<int32_t>(b));
    c->add_logits_digests(~uint64_t{b});
    c->add_logits(f);
    c->add_logprobs(-f);
    c->add_runner_up_ids(-1);
    c->add_runner_up_logits(f);
  }
  ASSERT_TRUE((*w)->Append(e).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  auto back = store->ReadEvent((*w)->run_id(), 1);
  ASSERT_TRUE(back.ok());
  for (int i = 0; i < 6; ++i) {
    uint32_t l, r, p;
    float lf = back->llm_call().logits(i), rf = back->llm_call().runner_up_logits(i),
          pf = back->llm_call().logprobs(i);
    std::memcpy(&l, &lf, 4);
    std::memcpy(&r, &rf, 4);
    std::memcpy(&p, &pf, 4);
    EXPECT_EQ(l, bits[i]);
    EXPECT_EQ(r, bits[i]);
    float neg = -c->logits(i);
    uint32_t want;
    std::memcpy(&want, &neg, 4);
    EXPECT_EQ(p, want);
    EXPECT_EQ(back->llm_call().logits_digests(i), ~uint64_t{bits[i]});
  }
}

TEST_P(StoreWriter, RejectsInconsistentTokenArraysNamingTheField) {
  auto store = OpenOrDie(Location("t.db"));
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  proto::Event e = MakeFullEvent(proto::Event::kLlmCall, 1);
  e.mutable_llm_call()->add_logits(1.0f);
  auto r = (*w)->Append(e);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("LlmCall.logits"), std::string::npos);
  EXPECT_NE(r.status().message().find((*w)->run_id()), std::string::npos);
  ASSERT_FALSE((*w)->Append(proto::Event()).ok());  // no kind
  proto::Event bad_utf8;
  bad_utf8.mutable_note()->set_text("caf\xc3");
  r = (*w)->Append(bad_utf8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trace.proto.Note.text is not valid UTF-8"),
            std::string::npos)
      << r.status().message();
  proto::Event raw_bytes;  // bytes fields take anything
  raw_bytes.mutable_output()->set_data(std::string("\xff\x00\xc3", 3));
  ASSERT_TRUE((*w)->Append(raw_bytes).ok());
}

TEST_P(StoreWriter, EndCommitsAndLaterAppendsFail) {
  auto store = OpenOrDie(Location("t.db"));
  WriterOptions slow;
  slow.commit_interval_ms = 60'000;  // only End() may commit
  auto w = store->BeginRun({}, slow);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(MakeFullEvent(proto::Event::kNote, 1)).ok());
  EXPECT_EQ((*w)->durable_seq(), 0u);
  proto::RunEnd end;
  end.set_how(proto::RunEnd::EXITED);
  end.set_exit_code(3);
  auto seq = (*w)->End(end);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 2u);
  EXPECT_EQ((*w)->durable_seq(), 2u);
  EXPECT_FALSE((*w)->Append(MakeFullEvent(proto::Event::kNote, 2)).ok());
  auto s = store->GetRunSummary((*w)->run_id());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status, RunStatus::kComplete);
  EXPECT_EQ(s->exit_code, 3);
  EXPECT_GT(s->end_time_ns, 0);
}

TEST_P(StoreWriter, CommitsWithinTheIntervalWithoutFlush) {
  auto store = OpenOrDie(Location("t.db"));
  auto w = store->BeginRun({});  // default: commit at least every 100 ms
  ASSERT_TRUE(w.ok());
  auto seq = (*w)->Append(MakeFullEvent(proto::Event::kNote, 1));
  ASSERT_TRUE(seq.ok());
  // Nobody waits (WaitDurable would commit at once): the interval alone commits it. The
  // deadline only bounds a hang; 100 ms is nominal.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((*w)->durable_seq() < *seq && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE((*w)->durable_seq(), *seq);
  auto other = OpenOrDie(Location("t.db"));
  auto events = other->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);
  // Its writer (this process) still runs.
  EXPECT_EQ(other->GetRunSummary((*w)->run_id())->status, RunStatus::kRecording);
}

TEST_P(StoreWriter, UpdateHeaderKeepsIdAndStart) {
  auto store = OpenOrDie(Location("t.db"));
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  auto before = store->LoadHeader((*w)->run_id());
  ASSERT_TRUE(before.ok());
  proto::RunHeader h = MakeFullHeader(9);
  h.set_start_time_ns(5);
  ASSERT_TRUE((*w)->UpdateHeader(h).ok());
  ASSERT_TRUE((*w)->Append(MakeFullEvent(proto::Event::kNote, 1)).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  auto after = store->LoadHeader((*w)->run_id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->run_id(), (*w)->run_id());
  EXPECT_EQ(after->start_time_ns(), before->start_time_ns());
  EXPECT_EQ(after->agent_pid(), h.agent_pid());
  EXPECT_EQ(store->GetRunSummary((*w)->run_id())->command,
            h.argv(0) + " " + h.argv(1) + " " + h.argv(2));
}

TEST_P(StoreWriter, ManyThreadsAppendToOneRunLosingNothing) {
  auto store = OpenOrDie(Location("t.db"));
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        proto::Event e;
        e.mutable_note()->set_text(std::to_string(t) + ":" + std::to_string(i));
        ASSERT_TRUE((*w)->Append(std::move(e)).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE((*w)->End({}).ok());
  auto events = store->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), size_t{kThreads * kPerThread + 1});
  std::set<std::string> seen;
  std::vector<int> next(kThreads, 0);
  for (size_t i = 0; i + 1 < events->size(); ++i) {
    EXPECT_EQ((*events)[i].seq(), i + 1);
    const std::string& text = (*events)[i].note().text();
    int t = std::stoi(text.substr(0, text.find(':')));
    int k = std::stoi(text.substr(text.find(':') + 1));
    EXPECT_EQ(k, next[t]++) << "per-thread order";
    seen.insert(text);
  }
  EXPECT_EQ(seen.size(), size_t{kThreads * kPerThread});
}

TEST_P(StoreConcurrency, TwoWritersOfDifferentRunsLoseNothing) {
  std::string path = Location("t.db");
  constexpr int kEvents = 3000;
  // Each thread reports what happened; nothing is dereferenced or asserted inside a
  // thread (an ASSERT there returns from the lambda only, and a failed open used to be
  // dereferenced: the test crashed instead of failing).
  struct Outcome {
    std::string run_id;
    std::string error;  // empty: every call succeeded
  };
  Outcome outcomes[2];
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k) {
    threads.emplace_back([&path, out = &outcomes[k]] {
      // Separate Store objects on a new file, as two processes starting at once would.
      auto store = Store::Open(path);
      if (!store.ok()) return void(out->error = "open: " + store.status().message());
      WriterOptions o;
      o.commit_interval_ms = 5;  // many small transactions contending for the lock
      auto w = (*store)->BeginRun({}, o);
      if (!w.ok()) return void(out->error = "begin: " + w.status().message());
      out->run_id = (*w)->run_id();
      for (int i = 0; i < kEvents; ++i) {
        auto seq = (*w)->Append(
            MakeFullEvent(i % 7 ? proto::Event::kNote : proto::Event::kLlmCall, i % 50, 3));
        if (!seq.ok()) return void(out->error = "append: " + seq.status().message());
      }
      auto end = (*w)->End({});
      if (!end.ok()) out->error = "end: " + end.status().message();
    });
  }
  for (auto& t : threads) t.join();
  for (const Outcome& o : outcomes) ASSERT_EQ(o.error, "");
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  for (const Outcome& o : outcomes) {
    auto events = store->LoadEvents(o.run_id);
    ASSERT_TRUE(events.ok()) << events.status().message();
    EXPECT_EQ(events->size(), size_t{kEvents + 1});
    auto summary = store->GetRunSummary(o.run_id);
    ASSERT_TRUE(summary.ok()) << summary.status().message();
    EXPECT_EQ(summary->status, RunStatus::kComplete);
  }
}

TEST_P(StoreConcurrency, ReadersSeeConsistentPrefixesWhileAWriterWrites) {
  std::string path = Location("t.db");
  auto store = OpenOrDie(path);
  WriterOptions o;
  o.commit_interval_ms = 10;
  auto w = store->BeginRun({}, o);
  ASSERT_TRUE(w.ok());
  std::string id = (*w)->run_id();
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    auto r = OpenOrDie(path);
    size_t last = 0;
    while (!done.load()) {
      auto it = r->ReadEvents(id);
      ASSERT_TRUE(it.ok());
      EventRecord rec;
      size_t n = 0;
      while ((*it)->Next(&rec)) {
        ASSERT_TRUE(rec.status.ok()) << rec.status.message();
        ASSERT_EQ(rec.seq, ++n);
      }
      ASSERT_TRUE((*it)->status().ok());
      EXPECT_GE(n, last);
      last = n;
      auto runs = r->ListRuns();
      ASSERT_TRUE(runs.ok());
      ++reads;
    }
  });
  for (int i = 0; i < 20000; ++i) {
    ASSERT_TRUE((*w)->Append(MakeFullEvent(i % 10 ? proto::Event::kOutput : proto::Event::kLlmCall,
                                           i % 20, 4))
                    .ok());
  }
  ASSERT_TRUE((*w)->End({}).ok());
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(store->LoadEvents(id)->size(), 20001u);
}

TEST_P(StoreCrash, SigkilledWriterLeavesIncompleteRunWithEveryDurableEvent) {
  std::string path = Location("t.db");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto store = Store::Open(path);
    if (!store.ok()) ::_exit(10);
    WriterOptions o;
    o.commit_interval_ms = 20;
    auto w = (*store)->BeginRun({}, o);
    if (!w.ok()) ::_exit(11);
    if (::write(fds[1], (*w)->run_id().data(), 26) != 26) ::_exit(12);
    uint64_t reported = 0;
    for (int i = 0;; ++i) {
      proto::Event e =
          MakeFullEvent(i % 5 ? proto::Event::kToolResult : proto::Event::kLlmCall, i % 30, 8);
      if (!(*w)->Append(std::move(e)).ok()) ::_exit(13);
      uint64_t d = (*w)->durable_seq();
      if (d != reported) {
        reported = d;
        if (::write(fds[1], &d, sizeof d) != sizeof d) ::_exit(14);
      }
      if (i % 64 == 0) ::usleep(1000);
    }
  }
  ::close(fds[1]);
  char id[27] = {};
  ASSERT_EQ(::read(fds[0], id, 26), 26);
  uint64_t max_durable = 0;
  int reports = 0;
  while (max_durable < 2000 || reports < 3) {
    uint64_t d;
    ASSERT_EQ(::read(fds[0], &d, sizeof d), static_cast<ssize_t>(sizeof d)) << "child died";
    max_durable = std::max(max_durable, d);
    ++reports;
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto store = OpenOrDie(path);
  auto summary = store->GetRunSummary(id);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  // No RunEnd and its writer is gone: crashed, not "still recording" forever.
  EXPECT_EQ(summary->status, RunStatus::kCrashed);
  EXPECT_EQ(summary->recorder_pid, pid);
  EXPECT_GE(summary->events, static_cast<int64_t>(max_durable));
  auto events = store->LoadEvents(id);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_GE(events->size(), max_durable);
  EXPECT_EQ(static_cast<int64_t>(events->size()), summary->events);
  for (size_t i = 0; i < events->size(); ++i) ASSERT_EQ((*events)[i].seq(), i + 1);
  // The store is still writable after the crash.
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->End({}).ok());
}

TEST(StoreCorruption, BadPayloadRowNamesRunAndSeqAndSparesTheRest) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto store = OpenOrDie(path);
  std::string ids[2];
  for (int k = 0; k < 2; ++k) {
    auto w = store->BeginRun({});
    ASSERT_TRUE(w.ok());
    ids[k] = (*w)->run_id();
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(
          (*w)->Append(MakeFullEvent(i % 2 ? proto::Event::kToolResult : proto::Event::kNote, i))
              .ok());
    }
    ASSERT_TRUE((*w)->End({}).ok());
  }
  Sql(path, "UPDATE events SET payload=x'0a05deadbeef', encoding=0 WHERE run_id='" + ids[0] +
                "' AND seq=3");
  Sql(path, "UPDATE events SET payload=x'28b52ffd00', encoding=1 WHERE run_id='" + ids[0] +
                "' AND seq=5");
  auto it = store->ReadEvents(ids[0]);
  ASSERT_TRUE(it.ok());
  EventRecord rec;
  int good = 0;
  std::vector<uint64_t> bad;
  while ((*it)->Next(&rec)) {
    if (rec.status.ok()) {
      ++good;
    } else {
      bad.push_back(rec.seq);
      EXPECT_NE(rec.status.message().find("run " + ids[0] + " seq " + std::to_string(rec.seq)),
                std::string::npos)
          << rec.status.message();
      EXPECT_EQ(rec.status.code(), StatusCode::kCorruption);
    }
  }
  EXPECT_TRUE((*it)->status().ok());
  EXPECT_EQ(good, 5);
  EXPECT_EQ(bad, (std::vector<uint64_t>{3, 5}));
  auto one = store->ReadEvent(ids[0], 3);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("seq 3"), std::string::npos);
  EXPECT_FALSE(store->LoadEvents(ids[0]).ok());
  EXPECT_TRUE(store->LoadEvents(ids[1]).ok());
  EXPECT_EQ(store->LoadEvents(ids[1])->size(), 7u);

  // A damaged blob fails exactly the events that use it (both runs share none here:
  // salts differ per event) and names the blob.
  Sql(path,
      "UPDATE blobs SET data=x'00', encoding=0 WHERE sha256 IN (SELECT sha256 FROM "
      "blob_refs WHERE run_id='" +
          ids[1] + "' LIMIT 1)");
  auto it2 = store->ReadEvents(ids[1]);
  ASSERT_TRUE(it2.ok());
  int bad2 = 0, good2 = 0;
  while ((*it2)->Next(&rec)) {
    if (rec.status.ok()) {
      ++good2;
    } else {
      ++bad2;
      EXPECT_NE(rec.status.message().find("blob"), std::string::npos);
    }
  }
  EXPECT_GE(bad2, 1);
  EXPECT_GE(good2, 1);
}

// MessageToJson (the run export's and `trace show --json`'s) is a function of the message:
// the same header built with its map entries inserted in other orders prints the same
// bytes (protobuf's map order differs with insertion order, and from process to process),
// entries sorted by key. A string field holding invalid UTF-8 (only a damaged or hand-made
// store gives one) prints as U+FFFD, not as protobuf's "\u0000".
TEST(StoreExportJson, MapsPrintSortedAndInvalidTextAsReplacementCharacters) {
  std::vector<int> order(60);
  for (int i = 0; i < 60; ++i) order[i] = i;
  std::string first;
  std::mt19937 rng(11);
  for (int round = 0; round < 6; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    proto::RunHeader h;
    h.set_run_id("01JD0000000000000000000AAA");
    for (int i : order) {
      const std::string n = std::to_string(i);
      (*h.mutable_env())[std::string("VAR_").append(n)] = std::string("v").append(n);
      (*h.mutable_attributes())[std::string("a").append(std::to_string(i * 37 % 61))] = n;
    }
    auto text = MessageToJson(h);
    ASSERT_TRUE(text.ok()) << text.status().message();
    if (round == 0) {
      first = *text;
    } else {
      EXPECT_EQ(*text, first) << "round " << round;
    }
  }
  // Sorted by key (as strings): VAR_0, VAR_1, VAR_10, ...
  EXPECT_LT(first.find("\"VAR_0\""), first.find("\"VAR_1\""));
  EXPECT_LT(first.find("\"VAR_1\""), first.find("\"VAR_10\""));
  EXPECT_LT(first.find("\"VAR_10\""), first.find("\"VAR_2\""));

  proto::Event e;
  e.mutable_tool_result()->set_content(
      std::string("ok A\xFF"
                  "B \xED\xA0\x80"));
  auto text = MessageToJson(e);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("ok A\xEF\xBF\xBD"
                       "B \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"),
            std::string::npos)
      << *text;
  EXPECT_FALSE(CheckUtf8(e).ok());  // the message itself is left as it was
}

TEST_P(StoreIds, ResolvesPrefixesLikeGit) {
  std::string path = Location("t.db");
  auto store = OpenOrDie(path);
  proto::RunHeader a, b, c;
  a.set_run_id("01JD0000000000000000000AAA");
  b.set_run_id("01JD0000000000000000000ABB");
  c.set_run_id("01JE0000000000000000000CCC");
  for (auto* h : {&a, &b, &c}) ASSERT_TRUE(store->BeginRun(*h).ok());
  EXPECT_EQ(*store->ResolveRunId("01JE"), c.run_id());
  EXPECT_EQ(*store->ResolveRunId("01jd0000000000000000000aaa"), a.run_id());
  EXPECT_EQ(*store->ResolveRunId("01JD0000000000000000000AB"), b.run_id());
  auto amb = store->ResolveRunId("01JD");
  ASSERT_FALSE(amb.ok());
  EXPECT_NE(amb.status().message().find("ambiguous"), std::string::npos);
  EXPECT_NE(amb.status().message().find(a.run_id()), std::string::npos);
  EXPECT_NE(amb.status().message().find(b.run_id()), std::string::npos);
  auto none = store->ResolveRunId("01JZ");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "no run matches '01JZ' in " + path);
  EXPECT_FALSE(store->BeginRun(a).ok());  // duplicate id
  proto::RunHeader bad;
  bad.set_run_id("not-a-ulid");
  EXPECT_FALSE(store->BeginRun(bad).ok());
}

TEST_P(StoreIds, NewIdsAreValidUniqueAndOrdered) {
  std::string prev;
  for (int i = 0; i < 10000; ++i) {
    std::string id = NewRunId();
    ASSERT_TRUE(IsValidRunId(id)) << id;
    ASSERT_LT(prev, id);
    prev = id;
  }
  EXPECT_FALSE(IsValidRunId("01JD000000000000000000000I"));  // I is not Crockford
  EXPECT_FALSE(IsValidRunId("81JD0000000000000000000000"));  // overflows 128 bits
}

TEST_P(StoreDelete, RemovesRunAndOnlyUnreferencedBlobs) {
  std::string path = Location("t.db");
  auto store = OpenOrDie(path);
  auto conv = MakeConversation(6, 20);
  std::string ids[2];
  for (int k = 0; k < 2; ++k) {
    auto w = store->BeginRun({});
    ASSERT_TRUE(w.ok());
    ids[k] = (*w)->run_id();
    for (const auto& e : conv.calls) ASSERT_TRUE((*w)->Append(e).ok());
    ASSERT_TRUE((*w)->End({}).ok());
  }
  auto before = store->Stats();
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(store->DeleteRun(ids[0]).ok());
  auto mid = store->Stats();
  EXPECT_EQ(mid->runs, 1);
  EXPECT_EQ(mid->blobs, before->blobs);  // all shared with the other run
  auto events = store->LoadEvents(ids[1]);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), conv.calls.size() + 1);
  for (size_t i = 0; i < conv.calls.size(); ++i) {
    proto::Event want = conv.calls[i];
    want.set_seq(i + 1);
    EXPECT_TRUE(MessageDifferencer::Equals(want, (*events)[i])) << i;
  }
  auto again = store->DeleteRun(ids[0]);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  ASSERT_TRUE(store->DeleteRun(ids[1]).ok());
  auto after = store->Stats();
  EXPECT_EQ(after->runs, 0);
  EXPECT_EQ(after->events, 0);
  EXPECT_EQ(after->blobs, 0);
}

TEST_P(StoreDedupe, FiftyTurnConversationCostsLessThanTwiceTheFinalOne) {
  auto conv = MakeConversation(50);
  // All 50 calls, each carrying the whole history.
  auto store = OpenOrDie(Location("all.db"));
  auto w = store->BeginRun({});
  ASSERT_TRUE(w.ok());
  size_t full_bytes = 0;
  for (const auto& e : conv.calls) {
    full_bytes += e.ByteSizeLong();
    ASSERT_TRUE((*w)->Append(e).ok());
  }
  ASSERT_TRUE((*w)->Flush().ok());
  auto all = store->Stats();
  ASSERT_TRUE(all.ok());
  const double all_bytes = static_cast<double>(all->event_payload_bytes + all->blob_bytes);

  // The final conversation alone, stored once.
  auto single = OpenOrDie(Location("one.db"));
  auto w1 = single->BeginRun({});
  ASSERT_TRUE(w1.ok());
  ASSERT_TRUE((*w1)->Append(conv.calls.back()).ok());
  ASSERT_TRUE((*w1)->Flush().ok());
  auto one = single->Stats();
  const double one_bytes = static_cast<double>(one->event_payload_bytes + one->blob_bytes);

  // Every request stored in full, compressed one by one (no sharing).
  auto nodedupe = OpenOrDie(Location("full.db"));
  WriterOptions off;
  off.history = 0;
  auto w2 = nodedupe->BeginRun({}, off);
  ASSERT_TRUE(w2.ok());
  for (const auto& e : conv.calls) ASSERT_TRUE((*w2)->Append(e).ok());
  ASSERT_TRUE((*w2)->Flush().ok());
  auto full = nodedupe->Stats();
  const double full_stored = static_cast<double>(full->event_payload_bytes + full->blob_bytes);

  // The per-sampled-token records (id, digest, logits, runner-up) are new data in every
  // call, not repeated history: measure them alone and compare what remains.
  auto StoredTokenBytes = [&](const std::string& name, size_t first) {
    auto st = OpenOrDie(Location(name));
    auto wt = st->BeginRun({});
    EXPECT_TRUE(wt.ok());
    for (size_t i = first; i < conv.calls.size(); ++i) {
      proto::Event e;
      auto* c = e.mutable_llm_call();
      const auto& src = conv.calls[i].llm_call();
      *c->mutable_token_ids() = src.token_ids();
      *c->mutable_logits_digests() = src.logits_digests();
      *c->mutable_logits() = src.logits();
      *c->mutable_logprobs() = src.logprobs();
      *c->mutable_runner_up_ids() = src.runner_up_ids();
      *c->mutable_runner_up_logits() = src.runner_up_logits();
      EXPECT_TRUE((*wt)->Append(e).ok());
    }
    EXPECT_TRUE((*wt)->Flush().ok());
    auto s = st->Stats();
    return static_cast<double>(s->event_payload_bytes + s->blob_bytes);
  };
  const double tokens_all = StoredTokenBytes("tokens_all.db", 0);
  const double tokens_final = StoredTokenBytes("tokens_final.db", conv.calls.size() - 1);
  const double ratio = all_bytes / one_bytes;
  const double history_ratio = (all_bytes - tokens_all) / (one_bytes - tokens_final);
  std::printf(
      "dedupe: 50 turns stored %.0f B (of which %.0f B per-token records); final "
      "conversation once %.0f B (%.0f B per-token records); ratio %.2f overall, %.2f "
      "without the per-token records; every request in full: %.0f B raw protobuf "
      "(%.1fx ours), %.0f B zstd without sharing (%.1fx ours)\n",
      all_bytes, tokens_all, one_bytes, tokens_final, ratio, history_ratio,
      static_cast<double>(full_bytes), full_bytes / all_bytes, full_stored,
      full_stored / all_bytes);
  ::testing::Test::RecordProperty("dedupe_ratio_vs_final_once", std::to_string(ratio));
  ::testing::Test::RecordProperty("dedupe_history_ratio", std::to_string(history_ratio));
  EXPECT_LT(history_ratio, 2.0);
  EXPECT_GT(full_stored / all_bytes, 5.0);

  // And everything reads back in full.
  auto events = store->LoadEvents((*w)->run_id());
  ASSERT_TRUE(events.ok()) << events.status().message();
  for (size_t i = 0; i < conv.calls.size(); ++i) {
    proto::Event want = conv.calls[i];
    want.set_seq(i + 1);
    ASSERT_TRUE(MessageDifferencer::Equals(want, (*events)[i])) << "call " << i;
  }
  auto last = store->ReadEvent((*w)->run_id(), 50);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->llm_call().prompt_token_ids_size(),
            conv.calls.back().llm_call().prompt_token_ids_size());
}

TEST_P(StoreList, SummariesNewestFirstWithLimit) {
  auto store = OpenOrDie(Location("t.db"));
  std::vector<std::string> ids;
  for (int k = 0; k < 3; ++k) {
    proto::RunHeader h;
    h.add_argv("python3");
    h.add_argv("agent" + std::to_string(k) + ".py");
    h.set_start_time_ns(1'000'000'000ll * (k + 1));
    auto w = store->BeginRun(h);
    ASSERT_TRUE(w.ok());
    ids.push_back((*w)->run_id());
    auto conv = MakeConversation(k + 1, 10);
    for (const auto& e : conv.calls) ASSERT_TRUE((*w)->Append(e).ok());
    if (k != 1) {
      proto::RunEnd end;
      end.set_how(k == 0 ? proto::RunEnd::EXITED : proto::RunEnd::SIGNALLED);
      end.set_signal(k == 0 ? 0 : 9);
      ASSERT_TRUE((*w)->End(end).ok());
    } else {
      ASSERT_TRUE((*w)->Flush().ok());
    }
  }
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].run_id, ids[2]);
  EXPECT_EQ((*runs)[0].status, RunStatus::kCrashed);
  EXPECT_EQ((*runs)[0].signal, 9);
  EXPECT_EQ((*runs)[1].status, RunStatus::kRecording);  // its writer (this process) runs
  EXPECT_EQ((*runs)[2].status, RunStatus::kComplete);
  EXPECT_EQ((*runs)[2].command, "python3 agent0.py");
  EXPECT_EQ((*runs)[1].model_calls, 2);
  EXPECT_EQ((*runs)[1].sampled_tokens, 20);
  EXPECT_GT((*runs)[1].stored_bytes, 0);
  EXPECT_EQ(store->ListRuns(2)->size(), 2u);
}

}  // namespace
}  // namespace trace::store

namespace trace::store {
namespace {

Verification VerdictFor(const VerifyJob& job, const std::string& verdict) {
  Verification v;
  v.run_id = job.run_id;
  v.verdict = verdict;
  v.machine = "cpu test";
  v.worker = "test:1";
  v.time_ns = 1;
  v.seconds = 0.25;
  return v;
}

// Claim order: the model the worker has loaded, then by model, then as enqueued; a claim
// holds until finished; the verdict is written with the job's end, once.
TEST_P(StoreVerifyQueue, ClaimsGroupByModelAndFinishWritesOneVerdict) {
  auto store = OpenOrDie(Location("q.db"));
  ASSERT_TRUE(store);
  auto q = store->OpenVerifyQueue();
  ASSERT_TRUE(q.ok()) << q.status().message();
  auto batch =
      (*q)->Enqueue({{"R1", "/m/b"}, {"R2", "/m/a"}, {"R3", "/m/b"}, {"R4", "/m/a"}}, "four runs");
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ClaimOptions c;
  c.worker = "w:1";
  c.batch_id = *batch;
  c.prefer_model = "/m/b";
  std::vector<std::string> order;
  std::vector<VerifyJob> held;
  for (int i = 0; i < 4; ++i) {
    auto job = (*q)->Claim(c);
    ASSERT_TRUE(job.ok() && job->has_value()) << job.status().message();
    order.push_back((*job)->run_id);
    held.push_back(**job);
    EXPECT_EQ((*job)->attempts, 1);
    c.prefer_model = (*job)->model;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"R1", "R3", "R2", "R4"}));
  auto none = (*q)->Claim(c);  // all four held under live leases
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto p = (*q)->Progress(*batch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->total, 4);
  EXPECT_EQ(p->claimed, 4);
  EXPECT_EQ(p->description, "four runs");
  auto renewed = (*q)->Renew(held[0], 60000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
  for (size_t i = 0; i < held.size(); ++i) {
    auto done = (*q)->Finish(held[i], VerdictFor(held[i], i == 2 ? "diverged" : "bitwise"));
    ASSERT_TRUE(done.ok()) << done.status().message();
    EXPECT_TRUE(*done);
  }
  auto again = (*q)->Finish(held[0], VerdictFor(held[0], "bitwise"));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // finished already: nothing written twice
  p = (*q)->Progress(*batch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->done, 4);
  EXPECT_EQ(p->claimed + p->queued, 0);
  auto results = (*q)->BatchResults(*batch);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 4u);
  EXPECT_EQ((*results)[0].run_id, "R1");  // in the order of the jobs, not of the claims
  EXPECT_EQ((*results)[1].run_id, "R2");
  EXPECT_EQ((*results)[1].verdict, "diverged");
  EXPECT_EQ((*results)[2].verdict, "bitwise");
  EXPECT_EQ((*results)[2].batch_id, *batch);
  EXPECT_DOUBLE_EQ((*results)[2].seconds, 0.25);
  auto r2 = (*q)->RunVerifications("R2");
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->size(), 1u);
  EXPECT_EQ((*r2)[0].verdict, "diverged");
  auto latest = (*q)->LatestVerdicts();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->size(), 4u);
  auto unknown = (*q)->Progress("NOSUCHBATCH");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
}

// A claim whose lease ended is taken by the next worker; the first claim can then neither
// renew nor finish, and a released job is claimable at once.
TEST_P(StoreVerifyQueue, AnEndedLeaseIsClaimedAgainAndTheOldClaimWritesNothing) {
  auto store = OpenOrDie(Location("lease.db"));
  ASSERT_TRUE(store);
  auto q = store->OpenVerifyQueue();
  ASSERT_TRUE(q.ok());
  auto batch = (*q)->Enqueue({{"R1", "/m"}, {"R2", "/m"}}, "two");
  ASSERT_TRUE(batch.ok());
  ClaimOptions dead;
  dead.worker = "dead:1";
  dead.batch_id = *batch;
  dead.lease_ms = -60000;  // a lease that ended a minute ago: the worker died
  auto first = (*q)->Claim(dead);
  ASSERT_TRUE(first.ok() && first->has_value());
  ClaimOptions live = dead;
  live.worker = "live:2";
  live.lease_ms = 60000;
  auto second = (*q)->Claim(live);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->job_id, (*first)->job_id);  // the ended claim first, as enqueued
  EXPECT_EQ((*second)->attempts, 2);
  auto renewed = (*q)->Renew(**first, 60000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);
  auto late = (*q)->Finish(**first, VerdictFor(**first, "diverged"));
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(*late);
  auto done = (*q)->Finish(**second, VerdictFor(**second, "bitwise"));
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  auto rows = (*q)->RunVerifications("R1");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].verdict, "bitwise");
  // Released: claimable again at once, by anyone.
  auto third = (*q)->Claim(live);
  ASSERT_TRUE(third.ok() && third->has_value());
  ASSERT_TRUE((*q)->Release(**third).ok());
  auto fourth = (*q)->Claim(live);
  ASSERT_TRUE(fourth.ok() && fourth->has_value());
  EXPECT_EQ((*fourth)->job_id, (*third)->job_id);
  auto p = (*q)->Progress(*batch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->reclaimed, 2);
}

// Read-only: verdicts readable, writes refused; `trace rm` takes a run's verdicts along.
TEST_P(StoreVerifyQueue, ReadOnlyStoresReadVerdictsAndDeletedRunsTakeTheirsAlong) {
  const std::string loc = Location("ro.db");
  std::string run_id;
  {
    auto store = OpenOrDie(loc);
    ASSERT_TRUE(store);
    auto w = store->BeginRun({});
    ASSERT_TRUE(w.ok());
    run_id = (*w)->run_id();
    ASSERT_TRUE((*w)->End({}).ok());
    auto q = store->OpenVerifyQueue();
    ASSERT_TRUE(q.ok());
    auto batch = (*q)->Enqueue({{run_id, "/m"}}, "one");
    ASSERT_TRUE(batch.ok());
    ClaimOptions c;
    c.worker = "w:1";
    auto job = (*q)->Claim(c);
    ASSERT_TRUE(job.ok() && job->has_value());
    ASSERT_TRUE((*q)->Finish(**job, VerdictFor(**job, "tokens")).ok());
  }
  {
    StoreOptions ro;
    ro.read_only = true;
    auto store = Store::Open(loc, ro);
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto q = (*store)->OpenVerifyQueue();
    ASSERT_TRUE(q.ok());
    auto rows = (*q)->RunVerifications(run_id);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].verdict, "tokens");
    auto refused = (*q)->Enqueue({{run_id, "/m"}}, "x");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("read-only"), std::string::npos);
  }
  auto store = OpenOrDie(loc);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->DeleteRun(run_id).ok());
  auto q = store->OpenVerifyQueue();
  ASSERT_TRUE(q.ok());
  auto rows = (*q)->RunVerifications(run_id);
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(rows->empty());
  auto latest = (*q)->LatestVerdicts();
  ASSERT_TRUE(latest.ok());
  EXPECT_TRUE(latest->empty());
}

}  // namespace
}  // namespace trace::store
