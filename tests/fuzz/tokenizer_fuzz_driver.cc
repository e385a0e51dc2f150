// Seeded corpus + mutation driver for the tokenizer fuzz targets (see the header).
//   TARGET [--seconds S] [--seed N]
#include "tests/fuzz/tokenizer_fuzz_driver.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

const char* const kTokens[] = {"null",     "[]",       "{}",        "\"BPE\"", "\"WordPiece\"",
                               "-1",       "1e9",      "true",      "\"\"",    "\"<|im_end|>\"",
                               "\xCC\x81", "\xF0\x9F", "\xFF",      "'s",      "\r\n",
                               "<think>",  "0",        "\"Regex\"", "\"(\"",   "\\u0000"};

std::string Mutate(const std::string& input, const std::vector<std::string>& seeds, Rng& rng) {
  std::string s = input;
  const size_t steps = 1 + rng.Below(4);
  for (size_t k = 0; k < steps; ++k) {
    switch (rng.Below(7)) {
      case 0:  // flip a bit
        if (!s.empty()) s[rng.Below(s.size())] ^= static_cast<char>(1u << rng.Below(8));
        break;
      case 1:  // random byte
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(rng.Below(s.size() + 1)),
                 static_cast<char>(rng.Below(256)));
        break;
      case 2:  // erase a range
        if (!s.empty()) {
          const size_t at = rng.Below(s.size());
          s.erase(at, 1 + rng.Below(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 3:  // insert an interesting token
        s.insert(rng.Below(s.size() + 1), kTokens[rng.Below(sizeof(kTokens) / sizeof(*kTokens))]);
        break;
      case 4:  // truncate
        s.resize(rng.Below(s.size() + 1));
        break;
      case 5: {  // splice with another seed
        const std::string& other = seeds[rng.Below(seeds.size())];
        if (!other.empty()) {
          const size_t from = rng.Below(other.size());
          s.insert(rng.Below(s.size() + 1), other.substr(from, 1 + rng.Below(64)));
        }
        break;
      }
      default:  // duplicate a range
        if (!s.empty()) {
          const size_t at = rng.Below(s.size());
          s.insert(rng.Below(s.size() + 1), s.substr(at, 1 + rng.Below(32)));
        }
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--seed N]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<std::string> seeds = TokenizerFuzzSeeds();
  for (const std::string& s : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  Rng rng{seed};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  size_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string input = Mutate(seeds[rng.Below(seeds.size())], seeds, rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++runs;
  }
  std::printf("%zu seeds, %zu mutated inputs, no failures\n", seeds.size(), runs);
  return 0;
}
