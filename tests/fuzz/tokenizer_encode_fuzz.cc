// Fuzz target: Encode/Decode on Qwen3's tokenizer and the Llama-3-style one. Properties:
// ids in range; decode(encode(s)) == NFC(s) for Qwen3 (s itself for the Llama-3-style one,
// which has no normalizer; s sanitised) when s holds no added-token text ('<'); the
// streaming decoder agrees with Decode.
#include <cstdio>
#include <cstdlib>

#include "engine/tokenizer/tokenizer.h"
#include "testkit/corpus.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/tokenizer/test_util.h"

namespace {

using trace::engine::Tokenizer;

const std::vector<std::unique_ptr<Tokenizer>>& Tokenizers() {
  static const auto* tokenizers = [] {
    auto* v = new std::vector<std::unique_ptr<Tokenizer>>();
    auto qwen = Tokenizer::Load(trace::engine::testing::Qwen3Dir() + "/tokenizer.json");
    auto llama = Tokenizer::LoadFromString(trace::engine::testing::MakeLlama3StyleTokenizerJson(),
                                           "llama3-style");
    if (!qwen.ok() || !llama.ok()) {
      std::fprintf(stderr, "cannot load tokenizers: %s %s\n", qwen.status().ToString().c_str(),
                   llama.status().ToString().c_str());
      std::abort();
    }
    v->push_back(std::move(qwen).value());
    v->push_back(std::move(llama).value());
    return v;
  }();
  return *tokenizers;
}

void Check(bool ok, const char* what, const std::string& input) {
  if (ok) return;
  trace::fuzz::Fail(std::string("property failed: ") + what +
                    "; input hex=" + trace::engine::testing::HexEncode(input));
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return trace::engine::testing::GenerateCorpus(99, 300);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (const auto& t : Tokenizers()) {
    const std::vector<int32_t> ids = t->Encode(input);
    for (int32_t id : ids) Check(id >= 0 && id < t->vocab_size(), "id in range", input);
    const std::string decoded = t->Decode(ids);
    if (input.find('<') == std::string::npos) {
      // Qwen3 normalises to NFC; the Llama-3-style tokenizer has no normalizer.
      const std::string valid = trace::engine::SanitizeUtf8(input);
      const bool nfc = &t == &Tokenizers().front();
      Check(decoded == (nfc ? trace::engine::NormalizeNfc(valid) : valid),
            "decode(encode(s)) == normalized(s)", input);
    }
    trace::engine::IncrementalDecoder stream(*t);
    std::string streamed = stream.Push(ids);
    streamed += stream.Flush();
    Check(streamed == decoded, "incremental decode == decode", input);
    Check(t->Encode(decoded) == t->Encode(decoded), "encode is deterministic", input);
  }
  return 0;
}
