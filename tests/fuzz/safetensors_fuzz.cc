// Fuzz target: the safetensors header parser (engine/safetensors.h), which reads the first
// bytes of every model file. Promises: no crash or over-read; an error is one line naming
// the file; an accepted header keeps every tensor inside the data, with byte count = dtype
// size x elements, aligned to its element size.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

// A file with `header` (padded to 8 bytes, as writers do) and `data_bytes` of data.
std::string File(std::string header, size_t data_bytes) {
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\x3f');
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = trace::engine::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  if (!parsed.ok()) {
    trace::fuzz::RequireOneLine(parsed.status(), "ParseSafetensorsHeader", "fuzz.safetensors");
    return 0;
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, info] : *parsed) {
    const uint64_t element = info.dtype == trace::kernels::DType::kF32 ? 4 : 2;
    if (info.begin > info.end || info.end > data_size) {
      trace::fuzz::Fail("tensor " + name + " outside the data");
    }
    if (info.end - info.begin != static_cast<uint64_t>(info.numel()) * element) {
      trace::fuzz::Fail("tensor " + name + " byte count != dtype size x elements");
    }
    if ((8 + header_len + info.begin) % element != 0) {
      trace::fuzz::Fail("tensor " + name + " not aligned");
    }
  }
  return 0;
}
