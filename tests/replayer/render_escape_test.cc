// The replay report and the run diff are printed on a terminal: every recorded string in
// their text (token texts, the output before a divergence, paths, URLs, fingerprint fields,
// skip reasons, answers, token-by-token rows) is escaped by base/escape.h, and quoted
// values read back exactly. The same reports as JSON keep the raw values. (The replay of a
// divergence needs a model; these reports are built by hand, as the verifier fills them.)
#include <gtest/gtest.h>

#include <string>

#include "replayer/diff.h"
#include "replayer/report.h"
#include "tests/errors/hostile.h"

namespace trace::replayer {
namespace {

using testing::IsSafeTerminalText;

// A token or a text a model could produce: ESC sequences, BEL, C1 controls, a bidi
// override, a line separator, a quote and a backslash, and a character's first byte alone
// (a byte-level token decoded by itself is not UTF-8).
std::string Evil(const std::string& tag) {
  return tag +
         "\xe2\x80\xae\x1b[2J\x1b]0;t\x07\xc2\x85\xc2\x9b"
         "1m\xe2\x80\xa8\"q\\\xe4" +
         tag;
}
constexpr char kEvilShown[] = R"(\u202E\x1b[2J\x1b]0;t\x07\u0085\u009B1m\u2028\"q\\\xe4)";

void ExpectSafe(const std::string& text) {
  EXPECT_TRUE(IsSafeTerminalText(text)) << text;
  EXPECT_NE(text.find("\\x1b"), std::string::npos) << text;
  EXPECT_NE(text.find("\\u202E"), std::string::npos) << text;
}

TEST(RenderEscapeTest, ReplayTextEscapesEveryRecordedString) {
  RunReport r;
  r.run_id = "01JD0000000000000000000AAA";
  r.run_status = "complete";
  r.model_dir = "/models/" + Evil("dir");
  r.model_override = true;
  r.model_differences.push_back({"model.architecture", Evil("a"), Evil("b")});
  r.fingerprint_differences.push_back({"device.description", Evil("a"), Evil("b")});
  r.device = Evil("device");
  r.numerics = "canonical-v2";
  r.upstream = "http://" + Evil("up");
  r.skipped.push_back({1, 2, "the request failed (HTTP 500): " + Evil("error")});
  r.recorded_only.push_back({2, 3, "answered by the upstream http://" + Evil("up")});
  CallReport c;
  c.call = 3;
  c.event_id = "seq " + Evil("4");
  c.level = Level::kDiverged;
  Divergence d;
  d.call = 3;
  d.event_id = c.event_id;
  d.step = 5;
  d.recorded_token = 7;
  d.replayed_token = 8;
  d.recorded_text = Evil("rec");
  d.replayed_text = Evil("rep");
  d.text_before = Evil("before");
  d.replay_continuation = {8, 9};
  d.replay_continuation_text = Evil("cont");
  c.divergence = d;
  r.calls.push_back(c);
  r.level = Level::kDiverged;

  const std::string text = RenderReplayText(r);
  ExpectSafe(text);
  EXPECT_NE(text.find("recorded: token 7 \"rec" + std::string(kEvilShown) + "rec\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("replayed: token 8 \"rep" + std::string(kEvilShown) + "rep\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("output before it: \"before" + std::string(kEvilShown) + "before\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("skipped, the request failed (HTTP 500): error\\u202E\\x1b[2J"),
            std::string::npos)
      << text;
  // JSON keeps the raw text for tools (the HTML page, ui/snapshot.h, carries it as JSON and
  // inserts it as text: ui_api_test).
  EXPECT_EQ(ReplayJson(r)["first_divergence"]["recorded_token"]["text"], Evil("rec"));
}

TEST(RenderEscapeTest, DiffTextEscapesEveryRecordedString) {
  proto::RunHeader ha, hb;
  ha.set_run_id("01JD0000000000000000000AAA");
  hb.set_run_id("01JD0000000000000000000BBB");
  ha.set_cwd(Evil("a"));
  hb.set_cwd(Evil("b"));
  ha.mutable_engine()->set_version(Evil("a"));
  hb.mutable_engine()->set_version(Evil("b"));
  std::vector<proto::Event> ea(3), eb(3);
  for (auto* side : {&ea, &eb}) {
    const std::string tag = side == &ea ? "A" : "B";
    std::vector<proto::Event>& e = *side;
    e[0].set_seq(1);
    e[0].mutable_tool_result()->set_name("search");
    e[0].mutable_tool_result()->set_content(Evil(tag));
    e[1].set_seq(2);
    e[1].mutable_template_var()->set_name("v");
    e[1].mutable_template_var()->set_value(Evil(tag));
    e[2].set_seq(3);
    proto::LlmCall* c = e[2].mutable_llm_call();
    c->add_prompt_token_ids(1);
    c->add_prompt_token_ids(tag == "A" ? 2 : 3);
    c->set_rendered_prompt("user: " + Evil(tag) + "\nassistant:");
    c->add_token_ids(4);
  }
  auto d = DiffLoadedRuns(ha, ea, hb, eb, nullptr, DiffOptions{});
  ASSERT_TRUE(d.ok()) << d.status().message();
  // Token texts, as a tokenizer would give them, for the sampled-token and side-by-side
  // lines.
  d->calls[0].first_output_token = 0;
  d->calls[0].output_text_a = Evil("ta");
  d->calls[0].output_text_b = Evil("tb");
  d->calls[0].answers_differ = true;
  d->side_by_side_call = 1;
  d->side_by_side.push_back({0, 4, 5, Evil("sa"), Evil("sb"), true});

  const std::string text = RenderDiffText(*d);
  ExpectSafe(text);
  // The first differing event: the tool's result, quoted exactly.
  EXPECT_NE(text.find("tool search returned \"A" + std::string(kEvilShown) + "A\" vs \"B"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("template variable v = \"A\\u202E"), std::string::npos) << text;
  EXPECT_NE(text.find("  cwd: a\\u202E\\x1b[2J"), std::string::npos) << text;
  // The prompt diff keeps its lines and markers; each line's content is escaped.
  EXPECT_NE(text.find("\n    - user: A\\u202E\\x1b[2J"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    + user: B\\u202E\\x1b[2J"), std::string::npos) << text;
  EXPECT_NE(text.find("4 \"sa" + std::string(kEvilShown) + "sa\""), std::string::npos) << text;
  // The sources of variation quote the same escaped evidence.
  EXPECT_NE(text.find("CHANGED tools: seq 1: tool search returned \"A\\u202E"), std::string::npos)
      << text;
  // JSON: the descriptions are the same one-line text; the token texts stay raw.
  const nlohmann::json j = DiffJson(*d);
  EXPECT_EQ(j["side_by_side"]["rows"][0]["a"]["text"], Evil("sa"));
  EXPECT_TRUE(IsSafeTerminalText(j["first_difference"]["description"].get<std::string>()));
}

}  // namespace
}  // namespace trace::replayer
