// The sampling parameters of one model call (docs/numerics.md, "Sampling"), apart from the
// sampler (engine/sampler.h) so that what reads a request (recorder/api, which has no engine)
// can fill them: a plain type with no code of the engine behind it.
//
// Ownership: a value type. Thread safety: as any value. Errors: none here; the sampler's
// ValidateSamplingParams (engine/sampler.h) checks the ranges below.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trace::engine {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // (0, 1]
  int32_t top_k = 0;         // 0: no limit
  int32_t max_tokens = 256;
  std::vector<std::string> stop;  // stop sequences (on decoded text)
  // OpenAI's penalties and logit_bias (docs/numerics.md, "Sampling", step 0): every logit is
  // adjusted before eligibility, temperature and the cuts. Penalties finite in [-2, 2].
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // (token id, bias): ids >= 0, ascending and unique; bias finite in [-100, 100]. An id at
  // or past the end of the logits is ignored (a tokenizer id outside the model's vocabulary).
  std::vector<std::pair<int32_t, float>> logit_bias;

  // Whether Sample adjusts logits at all: false keeps today's path with no copy.
  bool AdjustsLogits() const {
    return frequency_penalty != 0.0f || presence_penalty != 0.0f || !logit_bias.empty();
  }
};

}  // namespace trace::engine
