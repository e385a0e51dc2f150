// Fuzz target: ParseOrderedJson (base/ordered_json.h), the linear-time parse every request
// body, tool-call argument and tokenizer_config.json goes through, against nlohmann's own
// ordered_json parse, which it replaced. Promise: the same value for every input (types,
// member order, a repeated key's first place and last value, the same bytes), or both
// refuse it; an input holding a NUL byte, which nlohmann's lexer takes for the end of the
// input, is refused. The fuzz targets of the request parsers ran on nlohmann's parse before the
// change; this one is what carries their counts over to it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/ordered_json.h"
#include "tests/base/same_json.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

std::vector<std::string> TraceFuzzSeeds() {
  std::string wide = "{";
  for (int i = 0; i < 20; ++i)
    wide += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  return {
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})",
      R"({"a": 1, "b": {"c": [1, 2.5, -0.0, 1e400, true, null]}, "a": {"x": "\u00e9\ud83d\ude00"}})",
      R"([{"k": 1, "k": [1, {"k": 2}]}, 18446744073709551615, -9223372036854775808, "s\"t"])",
      wide + "\"k3\": [" + wide + "\"k19\": {}}], \"k0\": null}",
  };
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json ours = trace::ParseOrderedJson(text);
  // nlohmann's lexer ends the input at a NUL byte; ParseOrderedJson refuses text holding
  // one (never valid JSON), so it is compared with nlohmann's answer to "not JSON".
  const bool has_nul = text.find('\0') != std::string_view::npos;
  const nlohmann::ordered_json theirs =
      has_nul ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
              : nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!trace::testing::SameJson(ours, theirs)) {
    trace::fuzz::Fail(
        "ParseOrderedJson differs from nlohmann's parse: " +
        ours.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + " vs " +
        theirs.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }
  return 0;
}
