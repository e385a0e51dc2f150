// The sampler of the numerics contract (docs/numerics.md, "Sampling"): stateless, so a
// draw is a function of (logits, params, seed, step, mask) alone and replays exactly.
//
// Ownership: pure functions over caller-owned spans. Thread safety: reentrant.
// Errors: ValidateSamplingParams rejects a negative temperature, top_p outside (0, 1]
// and top_k < 0 with a message naming the field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::engine {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // (0, 1]
  int32_t top_k = 0;         // 0: no limit
  int32_t max_tokens = 256;
  std::vector<std::string> stop;  // stop sequences (on decoded text)
};

Status ValidateSamplingParams(const SamplingParams& params);

// Philox4x32-10 keyed by (seed, step): the uniform in [0, 1) used for draw `step`.
float PhiloxUniform(uint64_t seed, uint64_t step);

struct SampleResult {
  int32_t token = -1;
  float logit = 0.0f;        // the chosen token's raw logit
  float logprob = 0.0f;      // log-probability under the sampling distribution
                             // (after temperature, before top-k/top-p cut)
  int32_t runner_up = -1;    // the highest-logit other token
  float runner_up_logit = 0.0f;
};

// `allowed`, when non-empty, is a mask over the vocabulary (constrained decoding):
// tokens with allowed[id] == 0 are never drawn and do not enter the softmax.
SampleResult Sample(std::span<const float> logits, const SamplingParams& params,
                    uint64_t seed, uint64_t step, std::span<const uint8_t> allowed = {});

}  // namespace trace::engine
