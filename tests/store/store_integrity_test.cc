// Store integrity tests: row checksums, runs whose rows do not add up, byte-flipped
// store files (never read back changed or shortened), migration of a version 1 store,
// read-only opening that changes nothing, and fsck.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "store/fsck.h"
#include "store/store.h"
#include "testkit/shell.h"
#include "testkit/store_test_util.h"
#include "tests/store/sql_test_util.h"

namespace trace::store {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;
using testing::MakeConversation;
using testing::MakeFullEvent;
using testing::MakeFullHeader;
using testing::Sql;
using testing::TempDir;
using ::trace::testing::ReadWholeFile;

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.insert(e.path().filename());
  return names;
}

StoreOptions ReadOnly() {
  StoreOptions o;
  o.read_only = true;
  return o;
}

// Two ended runs (a conversation with blobs and prompt prefixes, plus every other kind)
// and one left open; returns their ids. The store is closed (WAL checkpointed) on return.
std::vector<std::string> WriteRuns(const std::string& path) {
  std::vector<std::string> ids;
  auto store = Store::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return ids;
  for (int k = 0; k < 3; ++k) {
    auto w = (*store)->BeginRun(MakeFullHeader(k + 1));
    EXPECT_TRUE(w.ok());
    if (!w.ok()) return ids;
    ids.push_back((*w)->run_id());
    for (const auto& e : MakeConversation(3 + k, 12, k).calls) EXPECT_TRUE((*w)->Append(e).ok());
    for (auto kind : {proto::Event::kToolCall, proto::Event::kToolResult, proto::Event::kNote,
                      proto::Event::kClockRead, proto::Event::kOutput}) {
      EXPECT_TRUE((*w)->Append(MakeFullEvent(kind, k * 10 + kind)).ok());
    }
    if (k < 2) {
      EXPECT_TRUE((*w)->End({}).ok());
    } else {
      EXPECT_TRUE((*w)->Flush().ok());
    }
  }
  return ids;
}

TEST(StoreChecksum, AChangedEventRowIsAnErrorNamingRunAndSeq) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  // A change that still decodes: only the checksum can tell.
  Sql(path,
      "UPDATE events SET wall_time_ns = wall_time_ns + 1 WHERE run_id='" + ids[0] + "' AND seq=2");
  auto store = Store::Open(path, ReadOnly());
  ASSERT_TRUE(store.ok());
  auto events = (*store)->LoadEvents(ids[0]);
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), StatusCode::kCorruption);
  EXPECT_NE(events.status().message().find("run " + ids[0] + " seq 2: row checksum mismatch"),
            std::string::npos)
      << events.status().message();
  auto one = (*store)->ReadEvent(ids[0], 2);
  EXPECT_FALSE(one.ok());
  // Rows that do not depend on it (seq 3's prompt is stored as a prefix of seq 2's) and
  // other runs read fine.
  EXPECT_FALSE((*store)->ReadEvent(ids[0], 3).ok());
  EXPECT_TRUE((*store)->ReadEvent(ids[0], 4).ok());
  EXPECT_TRUE((*store)->LoadEvents(ids[1]).ok());
}

TEST(StoreChecksum, AChangedSummaryRowIsReportedNotBelieved) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  Sql(path, "UPDATE runs SET model_calls = 99 WHERE run_id='" + ids[1] + "'");
  auto store = Store::Open(path, ReadOnly());
  ASSERT_TRUE(store.ok());
  auto summary = (*store)->GetRunSummary(ids[1]);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("summary row checksum mismatch"), std::string::npos)
      << summary.status().message();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  int flagged = 0;
  for (const auto& r : *runs) flagged += !r.problem.empty();
  EXPECT_EQ(flagged, 1);
  EXPECT_FALSE((*store)->LoadEvents(ids[1]).ok());
  EXPECT_FALSE((*store)->LoadHeader(ids[1]).ok());
}

TEST(StoreCounts, MissingRowsAreAnErrorNeverAShorterRun) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  // Rows gone from the middle of one run and the end of another (each remaining row is
  // intact: only the count can tell).
  Sql(path, "DELETE FROM events WHERE run_id='" + ids[0] + "' AND seq IN (3, 4)");
  Sql(path, "DELETE FROM events WHERE run_id='" + ids[1] + "' AND seq >= 6");
  auto store = Store::Open(path, ReadOnly());
  ASSERT_TRUE(store.ok());
  auto a = (*store)->LoadEvents(ids[0]);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("seq 3: events 3..4 are missing"), std::string::npos)
      << a.status().message();
  auto b = (*store)->LoadEvents(ids[1]);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("are missing (the run counts"), std::string::npos)
      << b.status().message();
  // The iterator reports the gap once and goes on with the rows after it.
  auto it = (*store)->ReadEvents(ids[0]);
  ASSERT_TRUE(it.ok());
  EventRecord rec;
  std::vector<uint64_t> good, bad;
  while ((*it)->Next(&rec)) (rec.status.ok() ? good : bad).push_back(rec.seq);
  EXPECT_EQ(bad, std::vector<uint64_t>{3});
  EXPECT_EQ(good.front(), 1u);
  EXPECT_EQ(good[2], 5u);
}

// Flips one random byte of a store file at a time (fixed seed). Whatever the flip hit,
// every run reads back either exactly as written or as an error; and when anything differs
// (a run gone, an error), fsck says the store is damaged. Never a changed event, a
// shorter run or a different count read back as fine.
TEST(StoreByteFlips, NeverReadBackChangedOrShortenedAndFsckNoticesDamage) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_FALSE(fs::exists(path + "-wal"));  // everything is in the one file
  std::map<std::string, std::vector<proto::Event>> original;
  std::map<std::string, proto::RunHeader> headers;
  std::map<std::string, int64_t> counts;
  {
    auto store = Store::Open(path, ReadOnly());
    ASSERT_TRUE(store.ok());
    for (const auto& id : ids) {
      original[id] = *(*store)->LoadEvents(id);
      headers[id] = *(*store)->LoadHeader(id);
      counts[id] = (*store)->GetRunSummary(id)->model_calls;
    }
  }
  const std::string pristine = ReadWholeFile(path);
  google::protobuf::SetLogHandler(nullptr);  // damaged rows are our errors, not log lines
  std::mt19937 rng(20251129);
  int errors = 0, identical = 0;
  constexpr int kTrials = 200;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::string bytes = pristine;
    size_t at = std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng);
    bytes[at] = static_cast<char>(bytes[at] ^ std::uniform_int_distribution<int>(1, 255)(rng));
    std::string flipped = dir.file("flipped-" + std::to_string(trial) + ".db");
    std::ofstream(flipped, std::ios::binary) << bytes;
    SCOPED_TRACE("trial " + std::to_string(trial) + ", byte " + std::to_string(at));

    bool anything_wrong = false;
    auto store = Store::Open(flipped, ReadOnly());
    if (!store.ok()) {
      anything_wrong = true;
    } else {
      auto listed = (*store)->ListRuns();
      std::set<std::string> listed_ids;
      if (!listed.ok()) {
        anything_wrong = true;
      } else {
        for (const auto& r : *listed) {
          listed_ids.insert(r.run_id);
          if (!r.problem.empty()) {
            anything_wrong = true;
          } else if (original.count(r.run_id)) {
            // A summary that passes its checksum is the one written.
            EXPECT_EQ(r.model_calls, counts[r.run_id]);
            EXPECT_EQ(r.events, static_cast<int64_t>(original[r.run_id].size()));
          }
        }
      }
      for (const auto& id : ids) {
        if (!listed_ids.count(id)) anything_wrong = true;
        auto events = (*store)->LoadEvents(id);
        auto header = (*store)->LoadHeader(id);
        if (!events.ok() || !header.ok()) {
          anything_wrong = true;
          continue;
        }
        EXPECT_TRUE(MessageDifferencer::Equals(*header, headers[id])) << id;
        ASSERT_EQ(events->size(), original[id].size()) << id;
        for (size_t i = 0; i < events->size(); ++i) {
          EXPECT_TRUE(MessageDifferencer::Equals((*events)[i], original[id][i]))
              << id << " seq " << i + 1;
        }
      }
    }
    if (anything_wrong) {
      ++errors;
      auto report = CheckStore(flipped);
      EXPECT_TRUE(!report.ok() || !report->clean()) << "damage that fsck did not notice";
    } else {
      ++identical;
    }
    fs::remove(flipped);
  }
  // Both outcomes occur (a flip in free space or an unused header byte changes nothing).
  EXPECT_GT(errors, 0);
  EXPECT_GT(identical, 0);
  std::printf("byte flips: %d of %d trials reported damage, %d read back identical\n", errors,
              kTrials, identical);
}

TEST(StoreMigration, AVersion1StoreIsReadAsItIsAndMigratedWhenOpenedWritable) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  std::vector<proto::Event> before;
  {
    auto store = Store::Open(path, ReadOnly());
    before = *(*store)->LoadEvents(ids[0]);
  }
  // What trace 0.1 wrote: no checksum columns, schema version 1.
  Sql(path,
      "ALTER TABLE events DROP COLUMN checksum; ALTER TABLE runs DROP COLUMN checksum; "
      "UPDATE meta SET value='1' WHERE key='schema_version'");
  const std::string v1_bytes = ReadWholeFile(path);
  {
    auto store = Store::Open(path, ReadOnly());
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ((*store)->schema_version(), 1);
    auto events = (*store)->LoadEvents(ids[0]);
    ASSERT_TRUE(events.ok()) << events.status().message();
    ASSERT_EQ(events->size(), before.size());
    auto report = CheckStore(path);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->clean());
    ASSERT_FALSE(report->notes.empty());
    EXPECT_NE(report->notes[0].find("no checksums"), std::string::npos);
  }
  EXPECT_EQ(ReadWholeFile(path), v1_bytes) << "reading changed the file";
  {
    auto store = Store::Open(path);  // writable: migrates
    ASSERT_TRUE(store.ok()) << store.status().message();
    EXPECT_EQ((*store)->schema_version(), kSchemaVersion);
    auto events = (*store)->LoadEvents(ids[0]);
    ASSERT_TRUE(events.ok()) << events.status().message();
    ASSERT_EQ(events->size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_TRUE(MessageDifferencer::Equals((*events)[i], before[i]));
    }
    // A migrated run goes on being written.
    EXPECT_TRUE((*store)->DeleteRun(ids[1]).ok());
  }
  // The migration computed checksums for the old rows: a change is now caught.
  Sql(path,
      "UPDATE events SET wall_time_ns = wall_time_ns + 1 WHERE run_id='" + ids[0] + "' AND seq=1");
  auto store = Store::Open(path, ReadOnly());
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->LoadEvents(ids[0]).ok());
}

TEST(StoreReadOnly, AnEmptyFileIsNotTurnedIntoAStore) {
  TempDir dir;
  std::string path = dir.file("empty.db");
  { std::ofstream(path).flush(); }
  auto s = Store::Open(path, ReadOnly());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("empty file, not a trace store"), std::string::npos);
  StoreOptions no_create;
  no_create.create_if_missing = false;  // what a command that may write but must not create uses
  EXPECT_FALSE(Store::Open(path, no_create).ok());
  EXPECT_EQ(fs::file_size(path), 0u);
  EXPECT_EQ(Listing(dir.path()), std::set<std::string>{"empty.db"});
}

TEST(StoreReadOnly, ANewerStoreIsRefusedBeforeAnythingSwitchesItToWal) {
  TempDir dir;
  std::string path = dir.file("newer.db");
  Sql(path,
      "PRAGMA journal_mode=DELETE; CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); "
      "INSERT INTO meta VALUES('schema_version', '99')");
  const std::string bytes = ReadWholeFile(path);
  ASSERT_EQ(bytes[18], 1);  // rollback journal, not WAL (2)
  for (bool read_only : {false, true}) {
    StoreOptions o;
    o.read_only = read_only;
    auto s = Store::Open(path, o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.status().message().find("schema version 99 is newer"), std::string::npos);
  }
  EXPECT_EQ(ReadWholeFile(path), bytes);
  EXPECT_EQ(Listing(dir.path()), std::set<std::string>{"newer.db"});
}

// Drops root's power to ignore permissions (CI runs as root) in a forked child, so a
// read-only directory really is read-only. Returns the child's exit status.
template <typename Body>
int RunAsUnprivileged(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(99);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(StoreReadOnly, AStoreInAReadOnlyDirectoryReadsFineAndNothingIsCreated) {
  TempDir dir;
  std::string sub = dir.file("ro");
  std::string path = sub + "/traces.db";
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(sub.c_str(), 0555), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  }
  const auto before = Listing(sub);
  int rc = RunAsUnprivileged([&] {
    if (::access(sub.c_str(), W_OK) == 0) return 98;  // still writable: not a real test
    auto store = Store::Open(path, ReadOnly());
    if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().message().c_str()), 1;
    auto runs = (*store)->ListRuns();
    if (!runs.ok() || runs->size() != 3) return 2;
    for (const auto& id : ids) {
      auto events = (*store)->LoadEvents(id);
      if (!events.ok()) return std::fprintf(stderr, "%s\n", events.status().message().c_str()), 3;
    }
    auto report = CheckStore(path);
    if (!report.ok() || !report->clean()) return 4;
    // Writing is refused with a clear error, not a crash.
    auto writable = Store::Open(path);
    if (writable.ok()) return 5;
    std::fprintf(stderr, "writable open: %s\n", writable.status().message().c_str());
    return 0;
  });
  ::chmod(sub.c_str(), 0755);
  if (rc == 99) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(Listing(sub), before);
}

TEST(StoreFsck, ACleanStoreIsCleanAndADamagedOneSaysWhatCanBeSalvaged) {
  TempDir dir;
  std::string path = dir.file("t.db");
  auto ids = WriteRuns(path);
  ASSERT_EQ(ids.size(), 3u);
  auto clean = CheckStore(path);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  EXPECT_TRUE(clean->clean());
  EXPECT_EQ(clean->runs.size(), 3u);
  EXPECT_GT(clean->blobs_checked, 0);
  EXPECT_GT(clean->events_checked, 20);

  Sql(path, "UPDATE events SET payload = x'0a05deadbeef' WHERE run_id='" + ids[0] +
                "' AND seq=5; DELETE FROM events WHERE run_id='" + ids[1] + "' AND seq=2;" +
                "UPDATE blobs SET data = x'00' WHERE sha256 = (SELECT sha256 FROM blob_refs "
                "WHERE run_id='" +
                ids[2] + "' LIMIT 1)");
  auto report = CheckStore(path);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->clean());
  EXPECT_TRUE(report->sqlite_problems.empty());  // the file structure is fine
  EXPECT_EQ(report->damaged_runs(), 3);
  const FsckRun* a = nullptr;
  for (const auto& r : report->runs) {
    if (r.run_id == ids[0]) a = &r;
  }
  ASSERT_NE(a, nullptr);
  ASSERT_FALSE(a->problems.empty());
  EXPECT_NE(a->problems[0].find("seq 5"), std::string::npos) << a->problems[0];
  EXPECT_EQ(a->readable_events, a->counted_events - 1);
  EXPECT_NE(a->salvage.find("events readable (seqs 1..4, 6.."), std::string::npos) << a->salvage;
  EXPECT_FALSE(report->blob_problems.empty());

  auto one = CheckStore(path, FsckOptions{ids[0].substr(0, 20)});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->runs.size(), 1u);
  EXPECT_EQ(one->damaged_runs(), 1);
}

}  // namespace
}  // namespace trace::store
