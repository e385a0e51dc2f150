// Fuzz target: Tokenizer::LoadFromString on mutated tokenizer.json text. Properties: no
// crash; an error is one line naming the file; a tokenizer that loads encodes and decodes
// without crashing and gives ids in range.
#include <cstdio>
#include <cstdlib>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/tokenizer_fuzz_driver.h"
#include "tests/tokenizer/test_util.h"

std::vector<std::string> TokenizerFuzzSeeds() {
  return {trace::engine::testing::MakeLlama3StyleTokenizerJson(true),
          trace::engine::testing::MakeLlama3StyleTokenizerJson(false)};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto loaded = trace::engine::Tokenizer::LoadFromString(text, "fuzz.json");
  if (!loaded.ok()) {
    const std::string msg = loaded.status().ToString();
    if (msg.find('\n') != std::string::npos || msg.find("fuzz.json") == std::string::npos) {
      std::fprintf(stderr, "bad error message: %s\n", msg.c_str());
      std::abort();
    }
    return 0;
  }
  const auto& t = **loaded;
  for (const char* s :
       {"Hello world, it's 123456 <|eot_id|> a <tag> b \xF0\x9F\x98\x80 \xFF", ""}) {
    const auto ids = t.Encode(s);
    for (int32_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) {
        std::fprintf(stderr, "id %d out of range\n", id);
        std::abort();
      }
    }
    (void)t.Decode(ids);
  }
  return 0;
}
