// libFuzzer builds only: writes the target's computed seeds (TraceFuzzSeeds) into the
// directory named by $TRACE_FUZZ_SEED_DIR before libFuzzer reads its corpus directories,
// so a run started with that directory as its first corpus begins from them
// (scripts/fuzz.sh does this). Files are named by content hash, as libFuzzer names its own.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* dir = std::getenv("TRACE_FUZZ_SEED_DIR");
  if (dir == nullptr || *dir == '\0') return 0;
  for (const std::string& seed : TraceFuzzSeeds()) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (unsigned char c : seed) h = (h ^ c) * 0x100000001b3ull;
    char name[32];
    std::snprintf(name, sizeof name, "/seed-%016llx", static_cast<unsigned long long>(h));
    std::ofstream(std::string(dir) + name, std::ios::binary) << seed;
  }
  return 0;
}
