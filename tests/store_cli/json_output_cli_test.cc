// Every `--json` output of the commands that read a store, over stores with invalid UTF-8
// in every text column (read from the store's own schema in sqlite_master, so a column
// added later is covered without touching this test): no command may abort (nlohmann's
// type_error.316 was exit 134); each prints JSON that parses, or a one-line error, and
// exits 0, 1 or 2. The runs are real: recorded by `trace record` from the example agent on
// the demo model. And `trace export` of one run is byte-stable: the same bytes, export
// after export, in every format (a protobuf map's order differs from process to process).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "testkit/shell.h"
#include "testkit/temp_dir.h"
#include "tests/common/trace_cli.h"

namespace trace {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::ReadWholeFile;
using testing::RunTrace;
using testing::TempDir;

const std::string kAgent = std::string(TRACE_SOURCE_DIR) + "/examples/support_agent/agent.py";

// Invalid UTF-8 of every kind: a byte that never occurs (FF), an overlong NUL (C0 80), a
// surrogate (ED A0 80), a truncated sequence (E2 82) and a stray continuation byte (80).
const char kInvalidHex[] = "FFC080EDA080E28280";

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Runs SQL on a store file; returns sqlite's error, empty on success.
std::string Sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    error = "cannot open " + path;
  } else {
    char* msg = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      error = msg ? msg : "error";
    }
    sqlite3_free(msg);
  }
  sqlite3_close(db);
  return error;
}

// Rows of a query, each column as text.
std::vector<std::vector<std::string>> Query(const std::string& path, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        std::vector<std::string> row;
        for (int i = 0; i < sqlite3_column_count(st); ++i) {
          const unsigned char* t = sqlite3_column_text(st, i);
          row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
        }
        rows.push_back(std::move(row));
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return rows;
}

// SQLite's rule for a column's affinity: a declared type containing CHAR, CLOB or TEXT is a
// text column.
bool IsTextColumn(std::string type) {
  std::transform(type.begin(), type.end(), type.begin(), ::toupper);
  return type.find("CHAR") != std::string::npos || type.find("CLOB") != std::string::npos ||
         type.find("TEXT") != std::string::npos;
}

struct Column {
  std::string table;
  std::string name;
};

// Every text column of every table of the store at `path`, from sqlite_master.
std::vector<Column> TextColumns(const std::string& path) {
  std::vector<Column> out;
  for (const auto& t : Query(path,
                             "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                             "'sqlite_%' ORDER BY name")) {
    for (const auto& c : Query(path, "SELECT name, type FROM pragma_table_info('" + t[0] + "')")) {
      if (IsTextColumn(c[1])) out.push_back({t[0], c[0]});
    }
  }
  return out;
}

bool CopyStore(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (const char* suffix : {"-wal", "-shm", ""}) {
    std::filesystem::remove(to + suffix, ec);
  }
  std::filesystem::copy_file(from, to, ec);
  return !ec;
}

class JsonOutputCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    model_ = dir_->file("model");
    base_ = dir_->file("recorded.db");
    CliResult r = RunTrace(*dir_, {"model", "init", "--preset", "tiny", "--seed", "1", model_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Two runs of the example agent, labelled (a label is one of the text columns).
    for (const char* label : {"first", "second"}) {
      r = RunTrace(*dir_, {"--store", base_, "record", "--model", model_, "--seed", "7", "--label",
                           label, "--", "python3", kAgent, "--turns", "1"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    for (const auto& row : Query(base_, "SELECT run_id FROM runs ORDER BY start_time_ns")) {
      runs_.push_back(row[0]);
    }
    ASSERT_EQ(runs_.size(), 2u);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Every reading command with JSON output, over the store at `store`: argv lists; the
  // documents some of them write to files are named in `files`.
  std::vector<std::vector<std::string>> Commands(const std::string& store) {
    const std::string a = runs_[0].substr(0, 20), b = runs_[1].substr(0, 20);
    const std::string out_json = dir_->file("export.json"), out_otlp = dir_->file("export.otlp");
    const std::string pushed = dir_->file("pushed.db");
    std::error_code ec;
    for (const std::string& f : {out_json, out_otlp, pushed, pushed + "-wal", pushed + "-shm"}) {
      std::filesystem::remove(f, ec);
    }
    auto with_store = [&](std::vector<std::string> args) {
      args.insert(args.begin(), {"--store", store});
      return args;
    };
    return {with_store({"ls", "--json"}),
            with_store({"show", a, "--json"}),
            with_store({"fsck", "--json"}),
            with_store({"fsck", a, "--json"}),
            with_store({"diff", a, b, "--json"}),
            with_store({"replay", a, "--json"}),
            with_store({"export", a, "--format", "json"}),
            with_store({"export", a, "--format", "json", "--no-redact", "-o", out_json, "--json"}),
            with_store({"export", a, "--format", "otlp", "-o", out_otlp, "--json"}),
            with_store({"export", a, "--format", "otlp-json"}),
            with_store({"push", a, "--to", pushed, "--json"})};
  }

  // The promise for one command's result: exit 0, 1 or 2 (never a signal, never 134);
  // stdout JSON that parses (nlohmann's parser also refuses invalid UTF-8) or, when empty,
  // a failure with one error line; every stderr line "trace: ...".
  static void CheckResult(const std::vector<std::string>& args, const CliResult& r,
                          const std::string& where) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2)
        << where << ": " << cmd << "exited " << r.exit_code << "\n"
        << r.err;
    if (r.out.empty()) {
      EXPECT_NE(r.exit_code, 0) << where << ": " << cmd << "printed nothing";
      EXPECT_EQ(Lines(r.err), 1u) << where << ": " << cmd << r.err;
    } else {
      json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(j.is_discarded()) << where << ": " << cmd << "printed no JSON:\n" << r.out;
    }
    std::istringstream err(r.err);
    for (std::string line; std::getline(err, line);) {
      EXPECT_EQ(line.rfind("trace: ", 0), 0u) << where << ": " << cmd << line;
    }
  }

  static TempDir* dir_;
  static std::string model_, base_;
  static std::vector<std::string> runs_;
};

TempDir* JsonOutputCliTest::dir_ = nullptr;
std::string JsonOutputCliTest::model_;
std::string JsonOutputCliTest::base_;
std::vector<std::string> JsonOutputCliTest::runs_;

TEST_F(JsonOutputCliTest, EveryJsonCommandSurvivesInvalidUtf8InEveryTextColumn) {
  const std::vector<Column> columns = TextColumns(base_);
  std::set<std::string> names;
  for (const Column& c : columns) names.insert(c.table + "." + c.name);
  // The schema read back is the real one (not an empty list that would pass vacuously).
  for (const char* must : {"runs.run_id", "runs.command", "runs.label", "events.run_id", "meta.key",
                           "meta.value", "blobs.sha256", "blob_refs.sha256"}) {
    EXPECT_TRUE(names.count(must)) << must;
  }

  // The undamaged store: every command works.
  for (const auto& args : Commands(base_)) {
    CliResult r = RunTrace(*dir_, args);
    CheckResult(args, r, "undamaged");
    EXPECT_TRUE(r.exit_code == 0 || (args[2] == "diff" && r.exit_code == 1)) << args[2] << r.err;
  }

  const std::string store = dir_->file("damaged.db");
  int outputs_with_fffd = 0;
  for (const Column& c : columns) {
    // Two damages per column: invalid bytes after each value (ids still resolve by prefix,
    // so the commands get as far as printing them), and each value replaced by "A\xFFB"
    // (the reproduction; OR IGNORE: in a key column, rows after the first would
    // collide and keep their value).
    for (const std::string& update :
         {"UPDATE " + c.table + " SET " + c.name + " = CAST(CAST(COALESCE(" + c.name +
              ", '') AS BLOB) || X'" + kInvalidHex + "' AS TEXT)",
          "UPDATE OR IGNORE " + c.table + " SET " + c.name + " = CAST(X'41FF42' AS TEXT)"}) {
      const std::string where = update;
      ASSERT_TRUE(CopyStore(base_, store));
      ASSERT_EQ(Sql(store, update), "") << where;
      for (const auto& args : Commands(store)) {
        CliResult r = RunTrace(*dir_, args);
        CheckResult(args, r, where);
        if (r.out.find("\xEF\xBF\xBD") != std::string::npos) ++outputs_with_fffd;
      }
    }
  }
  // The invalid bytes reached the JSON (as U+FFFD), not only error paths.
  EXPECT_GT(outputs_with_fffd, 0);

  // The reproduction, exactly: the label and the command in `ls --json`.
  ASSERT_TRUE(CopyStore(base_, store));
  ASSERT_EQ(Sql(store,
                "UPDATE runs SET label = CAST(X'41FF42' AS TEXT), command = "
                "CAST(X'70797468FF6F6E' AS TEXT)"),
            "");
  CliResult r = RunTrace(*dir_, {"--store", store, "ls", "--json"});
  ASSERT_EQ(r.exit_code, 2) << r.err;  // the summary rows' checksums say damaged
  json j = json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["label"],
            "A\xEF\xBF\xBD"
            "B");
  EXPECT_EQ(j[0]["command"], "pyth\xEF\xBF\xBDon");
  EXPECT_NE(j[0]["problem"].get<std::string>().find("checksum mismatch"), std::string::npos);
}

// The other reproduction: single random byte flips anywhere in the store file (a
// fixed seed) made `trace fsck --json` abort on 27 of 110. Now every flip gives JSON or a
// one-line error, from fsck and ls alike.
TEST_F(JsonOutputCliTest, JsonSurvivesRandomByteFlipsAnywhereInTheStore) {
  const std::string original = ReadWholeFile(base_);
  ASSERT_GT(original.size(), 4096u);
  const std::string store = dir_->file("flipped.db");
  std::mt19937_64 rng(40);
  int damaged = 0;
  for (int flip = 0; flip < 110; ++flip) {
    std::string bytes = original;
    const size_t at = rng() % bytes.size();
    bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + rng() % 255));
    std::error_code ec;
    for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(store + suffix, ec);
    {
      std::ofstream out(store, std::ios::binary | std::ios::trunc);
      out << bytes;
    }
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--store", store, "fsck", "--json"},
          std::vector<std::string>{"--store", store, "ls", "--json"}}) {
      CliResult r = RunTrace(*dir_, args);
      CheckResult(args, r, "byte " + std::to_string(at) + " flipped");
      if (args[2] == "fsck" && r.exit_code != 0) ++damaged;
    }
  }
  RecordProperty("fsck_found_damage", damaged);
}

// The same run exported again gives the same bytes, in every format, redacted or not; the
// header's environment (a protobuf map) is where exports used to differ.
TEST_F(JsonOutputCliTest, ExportOfOneRunIsByteStable) {
  const std::string path = dir_->file("stable.db");
  {
    auto st = store::Store::Open(path);
    ASSERT_TRUE(st.ok()) << st.status().message();
    proto::RunHeader h;
    h.set_run_id("01JS0000000000000000000AAA");
    h.add_argv("python3");
    h.add_argv("agent.py");
    h.set_start_time_ns(1'764'400'000'000'000'000);
    h.mutable_model()->set_architecture("qwen3");
    for (int i = 0; i < 40; ++i) {
      (*h.mutable_env())["VAR_" + std::to_string(i * 7919 % 1000)] = "value " + std::to_string(i);
      (*h.mutable_attributes())["attr." + std::to_string(i * 104729 % 997)] = std::to_string(i);
    }
    // Secret-looking names: redaction reports each, in a list.
    for (const char* name : {"Z_API_KEY", "A_TOKEN", "M_SECRET", "B_PASSWORD", "Q_TOKEN"}) {
      (*h.mutable_env())[name] = std::string("secret-value-of-") + name;
    }
    auto w = (*st)->BeginRun(h);
    ASSERT_TRUE(w.ok());
    proto::Event e;
    e.set_wall_time_ns(h.start_time_ns() + 1000);
    e.mutable_llm_call()->set_model("demo");
    e.mutable_llm_call()->set_rendered_prompt("hello A_TOKEN=secret-value-of-A_TOKEN");
    e.mutable_llm_call()->set_output_text("hi");
    ASSERT_TRUE((*w)->Append(e).ok());
    proto::RunEnd end;
    end.set_how(proto::RunEnd::EXITED);
    ASSERT_TRUE((*w)->End(end).ok());
  }
  for (const char* format : {"json", "otlp-json", "otlp"}) {
    for (bool redact : {true, false}) {
      std::string first;
      for (int k = 0; k < 3; ++k) {
        const std::string out = dir_->file("stable-" + std::to_string(k));
        std::vector<std::string> args = {"--store",  path,   "export", "01JS",
                                         "--format", format, "-o",     out};
        if (!redact) args.push_back("--no-redact");
        CliResult r = RunTrace(*dir_, args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string bytes = ReadWholeFile(out);
        ASSERT_FALSE(bytes.empty());
        if (k == 0) {
          first = bytes;
        } else if (bytes != first) {
          size_t at = 0;
          while (at < bytes.size() && at < first.size() && bytes[at] == first[at]) ++at;
          const size_t from = at > 60 ? at - 60 : 0;
          ADD_FAILURE()
              << format << (redact ? "" : " --no-redact") << ": export " << k
              << " differs from the first at byte " << at << ":\n  first: "
              << json(first.substr(from, 120)).dump(-1, ' ', false, json::error_handler_t::replace)
              << "\n  now:   "
              << json(bytes.substr(from, 120)).dump(-1, ' ', false, json::error_handler_t::replace);
        }
      }
    }
  }
  // And the recorded runs, whose headers hold the agent's real environment.
  for (const char* format : {"json", "otlp"}) {
    const std::string o1 = dir_->file("rec-1"), o2 = dir_->file("rec-2");
    for (const std::string& o : {o1, o2}) {
      CliResult r =
          RunTrace(*dir_, {"--store", base_, "export", runs_[0], "--format", format, "-o", o});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_TRUE(ReadWholeFile(o1) == ReadWholeFile(o2)) << format << ": two exports differ";
  }
}

}  // namespace
}  // namespace trace
