// Measures one way of loading a tokenizer.json, for comparing the streaming loader with
// the old DOM loader it replaced (docs/tokenizer.md: the figures). Not a test.
//
//   tokenizer_load_probe streaming|dom PATH/tokenizer.json [REPS]
//
// Loads PATH (with its tokenizer_config.json) REPS times (default 1) and prints each load's
// wall and CPU milliseconds; run it under /usr/bin/time -f '%e %U %M' for peak RSS.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/legacy_dom_tokenizer.h"

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
  for (int i = 0; i < reps; ++i) {
    const double wall = Seconds(CLOCK_MONOTONIC);
    const double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID);
    auto loaded = way == "dom" ? trace::engine::legacy_dom::LegacyDomLoad(path)
                               : trace::engine::Tokenizer::Load(path);
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
