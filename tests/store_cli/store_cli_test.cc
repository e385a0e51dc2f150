// Runs build/bin/trace against stores built here: ls, show, export, rm, fsck and their
// errors; reading commands on damaged, empty, newer and read-only stores.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "store/export.h"
#include "store/store.h"
#include "testkit/store_test_util.h"
#include "tests/common/trace_cli.h"

namespace trace::store {
namespace {

using testing::MakeConversation;
using testing::MakeFullEvent;
using testing::TempDir;

using ::trace::testing::CliResult;
using ::trace::testing::ReadWholeFile;

// Runs `[PREFIX] trace --store STORE ARGS...`, capturing stdout, stderr and the exit code.
CliResult Trace(const TempDir& dir, const std::string& store, const std::vector<std::string>& args,
                const std::string& prefix = "") {
  std::vector<std::string> all = {"--store", store};
  all.insert(all.end(), args.begin(), args.end());
  return ::trace::testing::RunTrace(dir, all, prefix);
}

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

class StoreCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("traces.db");
    auto st = Store::Open(path_);
    ASSERT_TRUE(st.ok());
    store_ = std::move(*st);
    // Three runs; the first two share the prefix 01JD0000000000000000000A.
    const char* ids[] = {"01JD0000000000000000000AAA", "01JD0000000000000000000ABB",
                         "01JE0000000000000000000CCC"};
    for (int k = 0; k < 3; ++k) {
      proto::RunHeader h;
      h.set_run_id(ids[k]);
      h.add_argv("python3");
      h.add_argv("agent.py");
      h.add_argv("--task=" + std::to_string(k));
      h.set_cwd("/work");
      h.set_start_time_ns(1'764'400'000'000'000'000 + k * 1'000'000'000ll);
      h.mutable_model()->set_architecture("qwen3");
      auto w = store_->BeginRun(h);
      ASSERT_TRUE(w.ok());
      std::vector<proto::Event> events;
      auto conv = MakeConversation(2 + k, 16, k);
      for (auto& e : conv.calls) {
        e.set_wall_time_ns(h.start_time_ns() + 1'000'000 * (events.size() + 1));
        events.push_back(e);
      }
      proto::Event call;
      call.set_wall_time_ns(h.start_time_ns() + 50'000'000);
      call.mutable_tool_call()->set_name("lookup_order");
      call.mutable_tool_call()->set_arguments_json(R"({"id": 17})");
      events.push_back(call);
      proto::Event result;
      result.set_wall_time_ns(h.start_time_ns() + 60'000'000);
      result.mutable_tool_result()->set_name("lookup_order");
      result.mutable_tool_result()->set_content("order 17: shipped");
      events.push_back(result);
      for (auto kind : {proto::Event::kClockRead, proto::Event::kOutput, proto::Event::kNote,
                        proto::Event::kContextChunk, proto::Event::kTemplateVar}) {
        proto::Event e = MakeFullEvent(kind, k + 1);
        e.set_wall_time_ns(h.start_time_ns() + 70'000'000);
        events.push_back(e);
      }
      for (auto& e : events) {
        auto seq = (*w)->Append(e);
        ASSERT_TRUE(seq.ok());
        e.set_seq(*seq);
      }
      if (k < 2) {
        proto::RunEnd end;
        end.set_how(proto::RunEnd::EXITED);
        end.set_exit_code(k);
        proto::Event e;
        e.set_wall_time_ns(h.start_time_ns() + 2'500'000'000ll);
        *e.mutable_run_end() = end;
        auto seq = (*w)->Append(e);
        ASSERT_TRUE(seq.ok());
        e.set_seq(*seq);
        events.push_back(e);
      }
      ASSERT_TRUE((*w)->Flush().ok());
      written_[ids[k]] = events;
    }
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
  std::map<std::string, std::vector<proto::Event>> written_;
};

TEST_F(StoreCliTest, LsListsRunsNewestFirstWithSummaryColumns) {
  auto r = Trace(dir_, path_, {"ls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(Lines(r.out), 4u) << r.out;
  EXPECT_NE(r.out.find("RUN"), std::string::npos);
  size_t c = r.out.find("01JE0000000000000000000CCC"), b = r.out.find("01JD0000000000000000000ABB"),
         a = r.out.find("01JD0000000000000000000AAA");
  ASSERT_NE(a, std::string::npos);
  EXPECT_LT(c, b);
  EXPECT_LT(b, a);
  EXPECT_NE(r.out.find("recording"), std::string::npos);  // its writer (this test) runs
  EXPECT_NE(r.out.find("complete(1)"), std::string::npos);
  EXPECT_NE(r.out.find("python3 agent.py --task=0"), std::string::npos);
  EXPECT_NE(r.out.find("2025-11-29"), std::string::npos);

  r = Trace(dir_, path_, {"ls", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[2]["run_id"], "01JD0000000000000000000AAA");
  EXPECT_EQ(j[2]["model_calls"], 2);
  EXPECT_EQ(j[2]["sampled_tokens"], 32);
  EXPECT_EQ(j[2]["status"], "complete");
  EXPECT_EQ(j[2]["duration_ns"], 2'500'000'000ll);
  EXPECT_EQ(j[0]["status"], "recording");
  EXPECT_EQ(j[0]["recorder_pid"], getpid());
  EXPECT_GT(j[0]["stored_bytes"].get<int64_t>(), 0);

  r = Trace(dir_, path_, {"ls", "--limit", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u);
}

TEST_F(StoreCliTest, ShowPrintsATimeline) {
  auto r = Trace(dir_, path_, {"show", "01JD0000000000000000000AB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("run 01JD0000000000000000000ABB  complete"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llm_call"), std::string::npos);
  EXPECT_NE(r.out.find("prompt 4"), std::string::npos);  // prompt token counts
  EXPECT_NE(r.out.find("lookup_order {\"id\": 17}"), std::string::npos);
  EXPECT_NE(r.out.find("order 17: shipped"), std::string::npos);
  EXPECT_NE(r.out.find("exited 1"), std::string::npos);
  const auto& first = written_["01JD0000000000000000000ABB"][0].llm_call();
  EXPECT_NE(r.out.find(first.output_text().substr(0, 40)), std::string::npos);

  r = Trace(dir_, path_, {"show", "--json", "01je"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["run_id"], "01JE0000000000000000000CCC");
  EXPECT_EQ(j["status"], "recording");
  ASSERT_EQ(j["events"].size(), written_["01JE0000000000000000000CCC"].size());
  EXPECT_EQ(j["events"][0]["kind"], "llm_call");
  EXPECT_EQ(j["events"][0]["sampled_tokens"], 16);
}

TEST_F(StoreCliTest, ExportJsonIsLossless) {
  const std::string id = "01JD0000000000000000000AAA";
  std::string out_file = dir_.file("export.json");
  // Lossless means not redacted (redaction is the default; tests/exporters covers it).
  auto r = Trace(
      dir_, path_,
      {"export", "01JD0000000000000000000AA", "--format", "json", "--no-redact", "-o", out_file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(ReadWholeFile(out_file));
  EXPECT_EQ(j["format"], "trace-run");
  EXPECT_EQ(j["redaction"]["applied"], false);
  EXPECT_EQ(j["header"]["run_id"], id);
  const auto& want = written_[id];
  ASSERT_EQ(j["events"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    proto::Event back;
    ASSERT_TRUE(JsonToMessage(j["events"][i].dump(), &back).ok());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(want[i], back))
        << "event " << i << " differs after export";
  }
  proto::RunHeader header;
  ASSERT_TRUE(JsonToMessage(j["header"].dump(), &header).ok());
  EXPECT_EQ(header.argv_size(), 3);
  // stdout gives the same document.
  r = Trace(dir_, path_, {"export", id, "--no-redact"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, ReadWholeFile(out_file));
  r = Trace(dir_, path_, {"export", id, "--format", "xml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("export format 'xml'"), std::string::npos);
}

TEST_F(StoreCliTest, RmDeletesRunsAndRefusesBadIdsWithoutDeleting) {
  auto r = Trace(dir_, path_, {"rm", "01JE", "nosuchrun"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "trace: no run matches 'nosuchrun' in " + path_ + "\n");
  EXPECT_EQ(store_->ListRuns()->size(), 3u);

  // 01JE...CCC has no RunEnd and its writer (this test process) is alive: refused, and
  // nothing else listed is deleted either.
  r = Trace(dir_, path_, {"rm", "01JE", "01JD0000000000000000000AAA"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("run 01JE0000000000000000000CCC in " + path_ +
                       " is still being recorded (pid " + std::to_string(getpid())),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  EXPECT_EQ(store_->ListRuns()->size(), 3u);

  r = Trace(dir_, path_, {"rm", "--force", "01JE", "01JD0000000000000000000AAA"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("removed 01JE0000000000000000000CCC"), std::string::npos);
  auto runs = store_->ListRuns();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].run_id, "01JD0000000000000000000ABB");
  EXPECT_TRUE(store_->LoadEvents("01JD0000000000000000000ABB").ok());
}

TEST_F(StoreCliTest, ErrorsAreOneLineNamingTheRunOrFileWithExitCode2) {
  auto r = Trace(dir_, path_, {"show", "01JZ"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "trace: no run matches '01JZ' in " + path_ + "\n");
  EXPECT_TRUE(r.out.empty());

  r = Trace(dir_, path_, {"show", "01JD"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u);
  EXPECT_NE(r.err.find("ambiguous"), std::string::npos);
  EXPECT_NE(r.err.find("01JD0000000000000000000AAA, 01JD0000000000000000000ABB"), std::string::npos)
      << r.err;

  r = Trace(dir_, path_, {"export", "01JD"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ambiguous"), std::string::npos);

  std::string missing = dir_.file("nope/traces.db");
  r = Trace(dir_, missing, {"ls"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "trace: " + missing + ": no such store file\n");
  EXPECT_FALSE(std::filesystem::exists(missing));  // reading never creates a store

  std::string junk = dir_.file("junk.db");
  {
    std::ofstream(junk) << "this is not a database, just some text that goes on "
                        << std::string(2000, 'z');
  }
  for (const char* cmd : {"ls", "show", "export", "rm"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) != "ls") args.push_back("01JD");
    r = Trace(dir_, junk, args);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_EQ(Lines(r.err), 1u) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find(junk + ": not a trace store"), std::string::npos) << cmd << ": " << r.err;
  }
}

TEST_F(StoreCliTest, ShowReportsACorruptRowAndPrintsTheRest) {
  const std::string id = "01JD0000000000000000000AAA";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  std::string sql =
      "UPDATE events SET payload=x'ffffffff', encoding=0 WHERE run_id='" + id + "' AND seq=3";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto r = Trace(dir_, path_, {"show", id});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run " + id + " seq 3:"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err), 1u);
  EXPECT_NE(r.out.find("order 17: shipped"), std::string::npos);  // seq 4 still shown
  EXPECT_NE(r.out.find("exited 0"), std::string::npos);
  r = Trace(dir_, path_, {"export", id});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run " + id + " seq 3:"), std::string::npos);
  EXPECT_TRUE(r.out.empty());
}

TEST_F(StoreCliTest, FsckSaysCleanThenNamesDamageAndWhatCanBeSalvaged) {
  auto r = Trace(dir_, path_, {"fsck"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("sqlite integrity: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: clean (3 of 3 runs ok)"), std::string::npos) << r.out;

  const std::string id = "01JD0000000000000000000ABB";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  std::string sql = "UPDATE events SET wall_time_ns = wall_time_ns + 1 WHERE run_id='" + id +
                    "' AND seq=4; DELETE FROM events WHERE run_id='" + id + "' AND seq=6";
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  r = Trace(dir_, path_, {"fsck"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // damage found
  EXPECT_NE(r.out.find("run " + id + " (complete): DAMAGED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq 4: row checksum mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq 6: events 6 are missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("salvage: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: DAMAGED (1 of 3 runs damaged)"), std::string::npos) << r.out;

  r = Trace(dir_, path_, {"fsck", "01JD0000000000000000000AB", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["clean"], false);
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["run_id"], id);
  EXPECT_EQ(j["runs"][0]["readable_events"], j["runs"][0]["counted_events"].get<int>() - 2);
  EXPECT_NE(j["runs"][0]["readable_seqs"].get<std::string>().find("1..3, 5, 7.."),
            std::string::npos)
      << j.dump(2);

  // Reading commands refuse the damaged run in one line, exit 2: never a shorter run.
  r = Trace(dir_, path_, {"export", id});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("run " + id + " seq 4: row checksum mismatch"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(StoreCliTest, AChangedSummaryRowMakesLsSayDamagedAndExit2) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE runs SET events = events - 1 WHERE "
                         "run_id='01JD0000000000000000000AAA'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto r = Trace(dir_, path_, {"ls"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("damaged"), std::string::npos) << r.out;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(
      r.err.find("run 01JD0000000000000000000AAA in " + path_ + ": summary row checksum mismatch"),
      std::string::npos)
      << r.err;
}

TEST_F(StoreCliTest, ReadingCommandsNeverCreateOrConvertAnything) {
  // A 0-byte file stays a 0-byte file (and no -wal/-shm appears beside it).
  std::string empty = dir_.file("empty.db");
  { std::ofstream(empty).flush(); }
  for (const char* cmd : {"ls", "show", "export", "fsck"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) == "show" || std::string(cmd) == "export") args.push_back("01JD");
    auto r = Trace(dir_, empty, args);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("empty file, not a trace store"), std::string::npos) << cmd << r.err;
    EXPECT_EQ(std::filesystem::file_size(empty), 0u) << cmd;
    EXPECT_FALSE(std::filesystem::exists(empty + "-wal")) << cmd;
    EXPECT_FALSE(std::filesystem::exists(empty + "-shm")) << cmd;
  }
  // A store of a newer trace: refused before anything switches it to WAL.
  std::string newer = dir_.file("newer.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA journal_mode=DELETE; CREATE TABLE meta(key TEXT PRIMARY KEY, "
                         "value TEXT); INSERT INTO meta VALUES('schema_version', '7')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const std::string before = ReadWholeFile(newer);
  for (const char* cmd : {"ls", "fsck", "rm"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) == "rm") args.push_back("01JD");
    auto r = Trace(dir_, newer, args);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("schema version 7 is newer"), std::string::npos) << cmd << r.err;
  }
  EXPECT_EQ(ReadWholeFile(newer), before);
  EXPECT_FALSE(std::filesystem::exists(newer + "-wal"));
}

// Root ignores permissions; the commands run as nobody there (CI runs as root).
TEST_F(StoreCliTest, AStoreInAReadOnlyDirectoryCanBeReadByEveryReadingCommand) {
  store_.reset();  // closed: no -wal/-shm left beside it
  std::string sub = dir_.file("ro");
  std::filesystem::create_directories(sub);
  std::string ro = sub + "/traces.db";
  std::filesystem::copy_file(path_, ro);
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(ro.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(sub.c_str(), 0555), 0);
  std::string prefix;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(ro.c_str(), 65534, 65534), 0);
    if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "no setpriv";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  auto run = [&](const std::vector<std::string>& args) { return Trace(dir_, ro, args, prefix); };
  for (std::vector<std::string> args : {std::vector<std::string>{"ls"},
                                        {"show", "01JD0000000000000000000AAA"},
                                        {"export", "01JD0000000000000000000AAA"},
                                        {"fsck"}}) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args[0];
  }
  auto r = run({"rm", "--force", "01JD0000000000000000000AAA"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(sub)) names.insert(e.path().filename());
  EXPECT_EQ(names, std::set<std::string>{"traces.db"});
  ::chmod(sub.c_str(), 0755);
}

// `trace fsck` of a file it cannot check says, in one line naming the file, what is wrong
// with it, and exits 2; it never tells the user to run `trace fsck`.
TEST_F(StoreCliTest, FsckOfAnUnreadableFileNamesTheFileAndWhatIsWrong) {
  store_.reset();
  auto expect_one_line = [&](const std::string& file, const std::string& what,
                             const std::string& prefix = "") {
    for (bool json : {false, true}) {
      std::vector<std::string> args = {"fsck"};
      if (json) args.push_back("--json");
      auto r = Trace(dir_, file, args, prefix);
      EXPECT_EQ(r.exit_code, 2) << file << ": " << r.out << r.err;
      EXPECT_TRUE(r.out.empty()) << r.out;
      EXPECT_EQ(Lines(r.err), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("trace: " + file + ": ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("run `trace fsck`"), std::string::npos) << r.err;
    }
  };
  // A directory.
  const std::string folder = dir_.file("a-folder.db");
  std::filesystem::create_directories(folder);
  expect_one_line(folder, "is a directory");
  // A file that is not SQLite at all.
  const std::string junk = dir_.file("junk.db");
  { std::ofstream(junk) << "plain text, not a database " << std::string(5000, 'x'); }
  expect_one_line(junk, "not a trace store (not an SQLite database file)");
  // An SQLite file whose first page (the schema) is destroyed: SQLite's own salvage.
  const std::string broken = dir_.file("broken.db");
  std::filesystem::copy_file(path_, broken);
  {
    std::fstream f(broken, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f << std::string(400, '\xa5');
  }
  expect_one_line(broken, "sqlite3 " + broken + " .recover");
  // A file this process may not read (mode 000). Root reads anything: the command runs as
  // nobody there, as in the read-only directory test above.
  const std::string locked = dir_.file("locked.db");
  std::filesystem::copy_file(path_, locked);
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  std::string prefix;
  if (::geteuid() == 0) {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "no setpriv";
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  expect_one_line(locked, "cannot read the store: Permission denied (mode 0000", prefix);
  // The other reading commands say the same.
  auto r = Trace(dir_, locked, {"ls", "--json"}, prefix);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "trace: " + locked +
                       ": cannot read the store: Permission denied (mode 0000, owner uid " +
                       std::to_string(::geteuid()) + ")\n");
}

// A reader of a store whose file is read-only (0400) leaves no -wal/-shm beside it; and when
// such files are there read-only (left by an older trace), writing names the file and what
// to do instead of SQLite's "attempt to write a readonly database". Root writes anything:
// the commands run as nobody there, on files nobody owns.
TEST_F(StoreCliTest, AReadOnlyStoreOrItsWalAndShmAreNamedWhenWritingFails) {
  store_.reset();  // closed: no -wal/-shm beside it
  const std::string sub = dir_.file("owned");
  std::filesystem::create_directories(sub);
  const std::string db = sub + "/traces.db";
  std::filesystem::copy_file(path_, db);
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  std::string prefix;
  if (::geteuid() == 0) {
    if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "no setpriv";
    ASSERT_EQ(::chown(sub.c_str(), 65534, 65534), 0);
    ASSERT_EQ(::chown(db.c_str(), 65534, 65534), 0);
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  auto listing = [&]() {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(sub)) {
      names.insert(e.path().filename());
    }
    return names;
  };
  // Reading a 0400 store, as its owner, in a folder it may write.
  ASSERT_EQ(::chmod(db.c_str(), 0400), 0);
  for (const char* cmd : {"ls", "fsck"}) {
    auto r = Trace(dir_, db, {cmd}, prefix);
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    EXPECT_EQ(listing(), std::set<std::string>{"traces.db"}) << cmd << " left files";
  }
  // Writing the 0400 store: named, with what to do.
  auto r = Trace(dir_, db, {"rm", "--force", "01JD0000000000000000000AAA"}, prefix);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(db + " is read-only to this process (" + db + " mode 0400"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("chmod u+w " + db), std::string::npos) << r.err;

  // Read-only -wal and -shm beside a writable store (what a reader of a 0400 store left
  // before): a reader of the writable store makes them, then they are made read-only.
  ASSERT_EQ(::chmod(db.c_str(), 0600), 0);
  r = Trace(dir_, db, {"ls"}, prefix);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(listing(), (std::set<std::string>{"traces.db", "traces.db-shm", "traces.db-wal"}));
  ASSERT_EQ(::chmod((db + "-wal").c_str(), 0400), 0);
  ASSERT_EQ(::chmod((db + "-shm").c_str(), 0400), 0);
  r = Trace(dir_, db, {"rm", "--force", "01JD0000000000000000000AAA"}, prefix);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.find("attempt to write a readonly database"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(db + "-wal " + db + "-shm are read-only to this process"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("chmod u+w " + db + "-wal " + db + "-shm"), std::string::npos) << r.err;
  // Doing what it says makes the store writable again.
  ASSERT_EQ(::chmod((db + "-wal").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((db + "-shm").c_str(), 0600), 0);
  r = Trace(dir_, db, {"rm", "--force", "01JD0000000000000000000AAA"}, prefix);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// The recorded model folder cannot be looked at (a symlink loop fails even for root):
// replay says so in one line and diff does without token texts; neither aborts.
TEST_F(StoreCliTest, AnInaccessibleModelFolderIsAnErrorNotAnAbort) {
  std::string loop = dir_.file("loop");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  for (const char* id : {"01JF0000000000000000000DDD", "01JF0000000000000000000EEE"}) {
    proto::RunHeader h;
    h.set_run_id(id);
    h.mutable_model()->set_model_dir(loop + "/model");
    auto w = store_->BeginRun(h);
    ASSERT_TRUE(w.ok());
    for (const auto& e : MakeConversation(1, 4).calls) ASSERT_TRUE((*w)->Append(e).ok());
    ASSERT_TRUE((*w)->End({}).ok());
  }
  auto r = Trace(dir_, path_, {"replay", "01JF0000000000000000000DDD"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("not accessible"), std::string::npos) << r.err;
  r = Trace(dir_, path_, {"diff", "01JF0000000000000000000DDD", "01JF0000000000000000000EEE"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.exit_code << ": " << r.err;
}

}  // namespace
}  // namespace trace::store
