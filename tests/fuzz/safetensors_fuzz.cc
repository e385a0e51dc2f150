// Fuzz target for the safetensors header parser (engine/safetensors.h). Built with g++ it
// runs as a ctest: a small driver feeds it a seeded corpus and random mutations of it for a
// bounded time. The target aborts when an accepted header breaks the parser's promises
// (every tensor inside the data, byte count = dtype size x elements, aligned).
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = trace::engine::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  if (!parsed.ok()) {
    if (parsed.status().message().find('\n') != std::string::npos) std::abort();  // one line
    return 0;
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, info] : *parsed) {
    const uint64_t element = info.dtype == trace::kernels::DType::kF32 ? 4 : 2;
    if (info.begin > info.end || info.end > data_size) std::abort();
    if (info.end - info.begin != static_cast<uint64_t>(info.numel()) * element) std::abort();
    if ((8 + header_len + info.begin) % element != 0) std::abort();
  }
  return 0;
}

#ifndef TRACE_LIBFUZZER
namespace {

std::string File(std::string header, size_t data_bytes) {
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x3f');
}

std::vector<std::string> SeedCorpus() {
  return {
      File(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
      File(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],)"
           R"("data_offsets":[0,12]},"b":{"dtype":"F16","shape":[1],"data_offsets":[12,14]}})",
           14),
      File(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 0),
      File(R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8),
      File("{}", 0),
  };
}

std::string Mutate(std::string s, std::mt19937_64& rng) {
  const int ops = 1 + static_cast<int>(rng() % 4);
  static const char* kTokens[] = {"\"",      "[",        "]",    "{",    "}",
                                  ",",       ":",        "-1",   "1e30", "18446744073709551615",
                                  "\"F32\"", "\"BF16\"", "null", "0"};
  for (int i = 0; i < ops; ++i) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0:
        if (!s.empty()) s[pos] = static_cast<char>(rng());
        break;
      case 1:
        s.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]);
        break;
      case 2:
        if (!s.empty()) s.erase(pos, 1 + rng() % 8);
        break;
      case 3:
        s.resize(rng() % (s.size() + 1));  // truncation
        break;
      case 4:
        if (s.size() >= 8) s[rng() % 8] = static_cast<char>(rng());  // header length
        break;
      case 5:
        if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
          s[pos] = static_cast<char>('0' + rng() % 10);
        }
        break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20261129);
  std::vector<std::string> corpus = SeedCorpus();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t runs = 0;
  for (const auto& s : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 256; ++i, ++runs) {
      std::string input = Mutate(corpus[rng() % corpus.size()], rng);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
      // Keep accepted mutants: they reach deeper into the header checks.
      if (corpus.size() < 4096 &&
          trace::engine::ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(input.data()),
                                                input.size(), "")
              .ok()) {
        corpus.push_back(std::move(input));
      }
    }
  }
  std::printf("safetensors_fuzz: %llu inputs, corpus %zu, no failures\n",
              static_cast<unsigned long long>(runs), corpus.size());
  return 0;
}
#endif
