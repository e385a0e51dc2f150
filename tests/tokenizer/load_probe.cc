// Measures one way of reading a tokenizer.json, for comparing the streaming reader with a
// whole-document DOM (the test oracle, dom_oracle.h, which is how the loader read before;
// docs/tokenizer.md: the figures). Not a test.
//
//   tokenizer_load_probe streaming|dom PATH/tokenizer.json [REPS]
//
// Reads PATH and loads it from the string REPS times (default 1), printing each load's wall
// and CPU milliseconds; run it under /usr/bin/time -f '%e %U %M' for peak RSS.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/dom_oracle.h"

namespace {

double Seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_load_probe streaming|dom PATH [REPS]\n");
    return 2;
  }
  const std::string way = argv[1];
  const std::string path = argv[2];
  const int reps = argc > 3 ? std::atoi(argv[3]) : 1;
  std::ostringstream contents;
  contents << std::ifstream(path, std::ios::binary).rdbuf();
  const std::string text = contents.str();
  for (int i = 0; i < reps; ++i) {
    const double wall = Seconds(CLOCK_MONOTONIC);
    const double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID);
    auto loaded = way == "dom" ? trace::engine::testing::DomOracleLoadFromString(text, path)
                               : trace::engine::Tokenizer::LoadFromString(text, path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    std::printf("%s load: %.1f ms wall, %.1f ms cpu, vocab %d\n", way.c_str(),
                (Seconds(CLOCK_MONOTONIC) - wall) * 1e3,
                (Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu) * 1e3, (*loaded)->vocab_size());
  }
  return 0;
}
