// Differential fuzz target: every input is loaded by Tokenizer::LoadFromString (streaming
// SAX reader) and by the whole-document DOM oracle (tests/tokenizer/dom_oracle.h: the
// reading as it was, then the same table-building code); both must give the same Status,
// code and message, or tokenizers with identical tables and encodings
// (tests/tokenizer/load_diff.h).
// Seeds: the Llama-3-style tokenizer.json and small documents aimed at the streaming
// loader's special cases (duplicated keys at every level, vocab values and merge elements
// of every JSON type, "model" and "vocab" in other places). As a ctest it also runs a fixed
// number of mutations with label unit (tests/fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/tokenizer/load_diff.h"

std::vector<std::string> TraceFuzzSeeds() {
  return trace::engine::testing::LoadDiffSeeds();
}

namespace {

// With TRACE_LOAD_DIFF_STATS set, how many inputs were compared and how many loaded is
// printed at exit (the figures docs/tokenizer.md quotes).
struct Stats {
  unsigned long long inputs = 0, loaded = 0, not_json = 0;
  ~Stats() {
    if (std::getenv("TRACE_LOAD_DIFF_STATS") == nullptr) return;
    std::fprintf(stderr,
                 "tokenizer_load_diff_fuzz: %llu inputs compared: %llu loaded, %llu not valid "
                 "JSON, %llu other errors\n",
                 inputs, loaded, not_json, inputs - loaded - not_json);
  }
} g_stats;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bool loaded = false;
  std::string error;
  const std::string difference = trace::engine::testing::CompareLoads(text, &loaded, &error);
  if (!difference.empty()) trace::fuzz::Fail(difference);
  ++g_stats.inputs;
  if (loaded) {
    ++g_stats.loaded;
  } else if (error.find(": not valid JSON (") != std::string::npos) {
    ++g_stats.not_json;
  }
  return 0;
}
