// The `trace` binary with hostile input: every error it prints is one line on stderr, and
// `trace show` of a run whose argv, tool calls, outputs and notes hold terminal control
// sequences prints only printable lines.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "tests/common/temp_dir.h"
#include "tests/common/trace_cli.h"
#include "tests/errors/hostile.h"
#include "tests/tokenizer/test_util.h"

namespace trace {
namespace {

using testing::HostileBytes;
using testing::HostileText;
using testing::IsOneSafeLine;
using testing::kEscapedStart;
using testing::TempDir;

using testing::CliResult;

// Runs `trace --store DIR/traces.db ARGS...`.
CliResult Trace(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--store", dir.file("traces.db")};
  all.insert(all.end(), args.begin(), args.end());
  return testing::RunTrace(dir, all);
}

// stderr holds exactly one line, a safe one, that quotes the hostile value escaped.
void ExpectOneErrorLine(const CliResult& r, bool echoes = true) {
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n');
  const std::string line = r.err.substr(0, r.err.size() - 1);
  EXPECT_TRUE(IsOneSafeLine(line)) << line.substr(0, 300);
  if (echoes) {
    EXPECT_NE(line.find(kEscapedStart), std::string::npos) << line.substr(0, 300);
  }
}

TEST(ErrorMessagesCli, UnknownRunId) {
  TempDir dir;
  ASSERT_TRUE(store::Store::Open(dir.file("traces.db")).ok());
  for (const char* cmd : {"show", "export", "replay"}) {
    SCOPED_TRACE(cmd);
    ExpectOneErrorLine(Trace(dir, {cmd, HostileText()}));
  }
}

TEST(ErrorMessagesCli, HostileTokenizerJson) {
  TempDir dir;
  auto j = nlohmann::json::parse(engine::testing::MakeLlama3StyleTokenizerJson());
  j["model"]["vocab"][HostileText()] = 7;
  std::ofstream(dir.file("tokenizer.json")) << j.dump();
  ExpectOneErrorLine(Trace(dir, {"tokenize", "--model", dir.path(), "hello"}));
  // Not JSON at all: raw bytes after the parser's "last read".
  std::ofstream(dir.file("tokenizer.json"), std::ios::trunc) << "{\"a\": \"" + HostileBytes();
  ExpectOneErrorLine(Trace(dir, {"tokenize", "--model", dir.path(), "hello"}), false);
}

TEST(ErrorMessagesCli, ShowPrintsOnlyPrintableLines) {
  TempDir dir;
  const std::string h = HostileText();
  std::string run_id;
  {
    auto st = store::Store::Open(dir.file("traces.db"));
    ASSERT_TRUE(st.ok());
    proto::RunHeader header;
    header.add_argv("python3");
    header.add_argv(h);
    header.set_cwd("/work/" + h);
    header.set_label(h);
    auto w = (*st)->BeginRun(header);
    ASSERT_TRUE(w.ok());
    run_id = (*w)->run_id();
    std::vector<proto::Event> events(6);
    events[0].mutable_tool_call()->set_name(h);
    events[0].mutable_tool_call()->set_call_id(h);
    events[0].mutable_tool_call()->set_arguments_json("{\"q\": \"" + h + "\"}");
    events[1].mutable_tool_result()->set_name(h);
    events[1].mutable_tool_result()->set_content(h);
    events[2].mutable_output()->set_data(HostileBytes());  // bytes field: anything goes
    events[3].mutable_note()->set_topic(h);
    events[3].mutable_note()->set_text(h);
    events[4].mutable_context_chunk()->set_source(h);
    events[4].mutable_context_chunk()->set_content(h);
    events[5].mutable_clock_read()->set_clock(h);
    events[5].mutable_clock_read()->set_text(h);
    for (auto& e : events) ASSERT_TRUE((*w)->Append(e).ok());
    proto::RunEnd end;
    end.set_how(proto::RunEnd::EXITED);
    end.set_reason(h);
    ASSERT_TRUE((*w)->End(end).ok());
  }
  const CliResult r = Trace(dir, {"show", run_id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++n;
    EXPECT_TRUE(IsOneSafeLine(line, 1 << 20)) << line.substr(0, 200);
  }
  EXPECT_GT(n, 10);
  EXPECT_NE(r.out.find(kEscapedStart), std::string::npos);
  const CliResult ls = Trace(dir, {"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(std::count(ls.out.begin(), ls.out.end(), '\n'), 2) << ls.out;  // header + 1 run
}

}  // namespace
}  // namespace trace
