// The CI driver of the wire-format fuzz targets (tests/fuzz/api_fuzz_target.h): runs the
// target over its seeds, then over a FIXED number of mutations of them (byte edits, JSON
// punctuation and keywords of the formats, splices of other seeds), so a run's outcome does
// not depend on the machine's speed. Deterministic for a given --seed.
//
//   TARGET [--runs N] [--seed S]
#include <cstring>
#include <random>

#include "tests/fuzz/api_fuzz_target.h"

int main(int argc, char** argv) {
  size_t runs = 20000;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  std::vector<std::string> corpus = TraceFuzzSeeds();
  for (const std::string& s : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  // Pieces that make a mutation land on structure the parsers care about.
  const std::vector<std::string> words = {"{",
                                          "}",
                                          "[",
                                          "]",
                                          "\"",
                                          ":",
                                          ",",
                                          "null",
                                          "true",
                                          "false",
                                          "-1",
                                          "0",
                                          "1e400",
                                          "\"\"",
                                          "\"type\"",
                                          "\"text\"",
                                          "\"role\"",
                                          "\"content\"",
                                          "\"input\"",
                                          "\"tools\"",
                                          "\"id\"",
                                          "\"item_reference\"",
                                          "\"function_call\"",
                                          "\"tool_use\"",
                                          "\"tool_result\"",
                                          "\"\\u0000\"",
                                          "\"\\ud800\"",
                                          "data: ",
                                          "event: ",
                                          "\n\n",
                                          "\xff",
                                          "{\"a\": [1, {}]}"};
  std::mt19937_64 rng(seed);
  for (size_t run = 0; run < runs; ++run) {
    std::string s = corpus[rng() % corpus.size()];
    const int mutations = 1 + static_cast<int>(rng() % 6);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 5) {
        case 0:
          if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(at, 1 + rng() % 16);
          break;
        case 2:
          s.insert(at, words[rng() % words.size()]);
          break;
        case 3: {
          const std::string& other = corpus[rng() % corpus.size()];
          size_t from = rng() % (other.size() + 1);
          s.insert(at, other.substr(from, rng() % 64));
          break;
        }
        case 4:  // duplicate a span: repeated items, nesting
          if (!s.empty() && at < s.size()) s.insert(at, s.substr(at, rng() % 32));
          break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::printf("%zu seeds, %zu mutated inputs, no failure\n", corpus.size(), runs);
  return 0;
}
