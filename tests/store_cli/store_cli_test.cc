// Runs build/bin/trace against stores built here: ls, show, export, rm and their errors.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "store/export.h"
#include "store/store.h"
#include "tests/common/trace_cli.h"
#include "tests/store/store_test_util.h"

namespace trace::store {
namespace {

using testing::MakeConversation;
using testing::MakeFullEvent;
using testing::TempDir;

using ::trace::testing::CliResult;
using ::trace::testing::ReadWholeFile;

// Runs `trace --store STORE ARGS...`, capturing stdout, stderr and the exit code.
CliResult Trace(const TempDir& dir, const std::string& store,
                const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--store", store};
  all.insert(all.end(), args.begin(), args.end());
  return ::trace::testing::RunTrace(dir, all);
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
  EXPECT_NE(r.out.find("incomplete"), std::string::npos);
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
  EXPECT_EQ(j[0]["status"], "incomplete");
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
  EXPECT_EQ(j["status"], "incomplete");
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

  r = Trace(dir_, path_, {"rm", "01JE", "01JD0000000000000000000AAA"});
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

}  // namespace
}  // namespace trace::store
