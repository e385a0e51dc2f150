// The `trace` binary with hostile input: every error it prints is one line on stderr, and
// `trace show` of a run whose argv, tool calls, outputs and notes hold terminal control
// sequences prints only printable lines; so do `trace diff` and `trace replay` of runs whose
// tool results, context chunks, template variables, clock texts, prompts and answers do.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "store/store.h"
#include "testkit/temp_dir.h"
#include "tests/common/trace_cli.h"
#include "tests/errors/hostile.h"
#include "tests/tokenizer/test_util.h"

namespace trace {
namespace {

using testing::HostileBytes;
using testing::HostileText;
using testing::IsOneSafeLine;
using testing::IsSafeTerminalText;
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

// What an agent's tool, retriever, template or model could hand back: short enough that
// the diff's 60-byte excerpts keep its first controls, with ESC sequences that clear the
// screen and retitle the terminal, BEL, C1 controls (NEL, CSI), a bidi override, a line
// separator, a bidi isolate, a quote and a backslash; `tag` makes the two runs differ.
std::string Evil(const std::string& tag) {
  return tag +
         "\xe2\x80\xae\x1b[2J\x1b]0;title\x07\xc2\x85\xc2\x9b"
         "1m\xe2\x80\xa8\xe2\x81\xa7\t\r\n"
         "\"q\\ " +
         tag;
}

// The first token id whose text (one token decoded alone) is exactly `text`.
int32_t TokenFor(const engine::Tokenizer& tokenizer, const std::string& text) {
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.Decode(std::span<const int32_t>(&id, 1)) == text) return id;
  }
  return -1;
}

// stdout and stderr of a text command: only printable lines, the controls shown escaped.
void ExpectSafeAndEscaped(const CliResult& r) {
  EXPECT_TRUE(IsSafeTerminalText(r.out)) << r.out.substr(0, 4000);
  EXPECT_TRUE(IsSafeTerminalText(r.err)) << r.err.substr(0, 4000);
  EXPECT_NE(r.out.find("\\x1b"), std::string::npos) << r.out.substr(0, 4000);
  EXPECT_NE(r.out.find("\\u202E"), std::string::npos) << r.out.substr(0, 4000);
}

// Two runs that differ in every kind of event, each difference a hostile string; and a
// run recorded against a hosted model whose URL, answer and failed call's error are
// hostile. `trace diff` (the first differing event, every kind's differences, the sources
// of variation, the header, prompt and request diffs, the answers, the token-by-token view
// of an ESC token and a quote token), `trace show` (with the agent's output holding bytes
// that are not UTF-8) and `trace replay`'s text print no raw control, no invalid UTF-8 and
// no bidi or line-separator code point; they show them escaped.
TEST(ErrorMessagesCli, DiffShowAndReplayPrintRecordedTextEscaped) {
  TempDir dir;
  const std::string model_dir = dir.file("model");
  ASSERT_EQ(::mkdir(model_dir.c_str(), 0755), 0);
  std::ofstream(model_dir + "/tokenizer.json") << engine::testing::MakeLlama3StyleTokenizerJson();
  auto tokenizer = engine::Tokenizer::Load(model_dir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  const int32_t esc = TokenFor(**tokenizer, "\x1b");
  const int32_t quote = TokenFor(**tokenizer, "\"");
  const int32_t plain = TokenFor(**tokenizer, "a");
  ASSERT_GE(esc, 0);
  ASSERT_GE(quote, 0);
  ASSERT_GE(plain, 0);

  std::vector<std::string> ids;
  auto st = store::Store::Open(dir.file("traces.db"));
  ASSERT_TRUE(st.ok());
  for (const std::string tag : {"A", "B"}) {
    proto::RunHeader header;
    header.add_argv("agent");
    header.add_argv(Evil(tag));
    header.set_cwd("/work/" + Evil(tag));
    (*header.mutable_env())["TASK"] = Evil(tag);
    header.mutable_engine()->set_version(Evil(tag));
    header.mutable_model()->set_architecture(Evil(tag));
    header.mutable_model()->set_model_dir(model_dir);
    auto w = (*st)->BeginRun(header);
    ASSERT_TRUE(w.ok());
    ids.push_back((*w)->run_id());
    std::vector<proto::Event> events(8);
    events[0].mutable_template_var()->set_name("user" + Evil(tag));
    events[0].mutable_template_var()->set_value(Evil(tag));
    events[1].mutable_context_chunk()->set_source("docs" + Evil(tag));
    events[1].mutable_context_chunk()->set_chunk_id("c1");
    events[1].mutable_context_chunk()->set_content(Evil(tag));
    events[2].mutable_clock_read()->set_clock("wall");
    events[2].mutable_clock_read()->set_text(Evil(tag));
    proto::LlmCall* c = events[3].mutable_llm_call();
    c->set_endpoint("/v1/chat/completions");
    for (int32_t t : {plain, plain, tag == "A" ? plain : esc}) c->add_prompt_token_ids(t);
    c->set_rendered_prompt("system: be nice\nuser: " + Evil(tag) + "\nassistant:");
    for (int32_t t : {plain, tag == "A" ? esc : quote, tag == "A" ? quote : esc}) {
      c->add_token_ids(t);
      c->add_logits_digests(static_cast<uint64_t>(t));  // the store wants every column
      c->add_logits(1.0f);
      c->add_logprobs(-0.5f);
      c->add_runner_up_ids(plain);
      c->add_runner_up_logits(0.5f);
    }
    c->set_output_text(Evil(tag));
    events[4].mutable_tool_call()->set_name("search" + Evil(tag));
    events[4].mutable_tool_call()->set_call_id("call_1");
    events[4].mutable_tool_call()->set_arguments_json(nlohmann::json({{"q", Evil(tag)}}).dump());
    events[5].mutable_tool_result()->set_name("search");
    events[5].mutable_tool_result()->set_call_id("call_1");
    events[5].mutable_tool_result()->set_content(Evil(tag));
    proto::LlmCall* u = events[6].mutable_llm_call();
    u->set_api("openai.responses");
    u->set_endpoint("/v1/responses");
    u->set_http_status(200);
    u->set_request_json(nlohmann::json({{"model", "m"}, {"input", Evil(tag)}}).dump());
    u->set_response_json(nlohmann::json({{"id", "r1"}, {"model", Evil(tag)}}).dump());
    u->set_output_text(Evil(tag));
    // Invalid UTF-8 can be recorded only in bytes fields (proto3 refuses it in strings, and
    // the tokenizer decodes a lone byte as U+FFFD): the agent's own output.
    events[7].mutable_output()->set_data("\xff\xe4" + Evil(tag));
    for (auto& e : events) {
      const auto seq = (*w)->Append(e);
      ASSERT_TRUE(seq.ok()) << seq.status().message();
    }
    proto::RunEnd end;
    end.set_how(proto::RunEnd::EXITED);
    end.set_reason(Evil(tag));
    ASSERT_TRUE((*w)->End(end).ok());
  }
  {
    // Recorded against a hosted model: replay has nothing to load and reports every call.
    proto::RunHeader header;
    (*header.mutable_attributes())["upstream"] = "http://" + Evil("up");
    auto w = (*st)->BeginRun(header);
    ASSERT_TRUE(w.ok());
    ids.push_back((*w)->run_id());
    std::vector<proto::Event> events(2);
    events[0].mutable_llm_call()->set_upstream("http://" + Evil("up"));
    events[0].mutable_llm_call()->set_api(Evil("api"));
    events[0].mutable_llm_call()->set_output_text(Evil("answer"));
    events[1].mutable_llm_call()->set_http_status(500);
    events[1].mutable_llm_call()->set_error(Evil("error"));
    for (auto& e : events) ASSERT_TRUE((*w)->Append(e).ok());
    proto::RunEnd end;
    end.set_how(proto::RunEnd::EXITED);
    ASSERT_TRUE((*w)->End(end).ok());
  }
  st->reset();

  const CliResult diff = Trace(dir, {"diff", ids[0], ids[1]});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  ExpectSafeAndEscaped(diff);
  // Quoted values read back exactly: the quote and the backslash escaped too.
  EXPECT_NE(diff.out.find("\\\"q\\\\"), std::string::npos) << diff.out;
  // The prompt diff keeps its lines and markers, each line's content escaped.
  EXPECT_NE(diff.out.find("    - user: A\\u202E\\x1b[2J"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("    + user: B\\u202E\\x1b[2J"), std::string::npos) << diff.out;
  const CliResult side = Trace(dir, {"diff", ids[0], ids[1], "--call", "1"});
  EXPECT_EQ(side.exit_code, 1) << side.err;
  ExpectSafeAndEscaped(side);
  EXPECT_NE(side.out.find("\"\\x1b\""), std::string::npos) << side.out;  // the ESC token
  EXPECT_NE(side.out.find("\"\\\"\""), std::string::npos) << side.out;   // the quote
  for (const std::string& id : ids) {
    SCOPED_TRACE(id);
    const CliResult show = Trace(dir, {"show", id});
    EXPECT_EQ(show.exit_code, 0) << show.err;
    ExpectSafeAndEscaped(show);
    if (id != ids[2]) {
      EXPECT_NE(show.out.find(R"("\xff\xe4)"), std::string::npos) << show.out;
    }
  }
  const CliResult replay = Trace(dir, {"replay", ids[2]});
  ExpectSafeAndEscaped(replay);
  EXPECT_NE(replay.out.find("recorded only"), std::string::npos) << replay.out << replay.err;
  EXPECT_NE(replay.out.find("skipped"), std::string::npos) << replay.out << replay.err;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls"}, {"fsck"}, {"replay", ids[0]}}) {
    const CliResult r = Trace(dir, args);
    EXPECT_TRUE(IsSafeTerminalText(r.out)) << args[0] << ": " << r.out.substr(0, 2000);
    EXPECT_TRUE(IsSafeTerminalText(r.err)) << args[0] << ": " << r.err.substr(0, 2000);
  }
}

}  // namespace
}  // namespace trace
