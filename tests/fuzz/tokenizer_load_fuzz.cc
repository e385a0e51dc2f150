// Fuzz target: Tokenizer::LoadFromString on mutated tokenizer.json text. Promises: no
// crash; an error is one line naming the file; a tokenizer that loads encodes and decodes
// without crashing and gives ids in range.
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/tokenizer/test_util.h"

std::vector<std::string> TraceFuzzSeeds() {
  return {trace::engine::testing::MakeLlama3StyleTokenizerJson(true),
          trace::engine::testing::MakeLlama3StyleTokenizerJson(false)};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto loaded = trace::engine::Tokenizer::LoadFromString(text, "fuzz.json");
  if (!loaded.ok()) {
    trace::fuzz::RequireOneLine(loaded.status(), "LoadFromString", "fuzz.json");
    return 0;
  }
  const auto& t = **loaded;
  for (const char* s :
       {"Hello world, it's 123456 <|eot_id|> a <tag> b \xF0\x9F\x98\x80 \xFF", ""}) {
    const auto ids = t.Encode(s);
    for (int32_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) {
        trace::fuzz::Fail("id " + std::to_string(id) + " out of range");
      }
    }
    (void)t.Decode(ids);
  }
  return 0;
}
