// The sampler of the numerics contract (docs/numerics.md, "Sampling"): stateless, so a
// draw is a function of (logits, params, seed, step, mask) alone and replays exactly. Its
// parameters are engine/sampling_params.h's SamplingParams.
//
// Ownership: pure functions over caller-owned spans. Thread safety: reentrant.
// Errors: ValidateSamplingParams rejects a negative temperature, top_p outside (0, 1],
// top_k < 0, a penalty outside [-2, 2] and a bad logit_bias with a message naming the field.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/sampling_params.h"

namespace trace::engine {

Status ValidateSamplingParams(const SamplingParams& params);

// Philox4x32-10 keyed by (seed, step): the uniform in [0, 1) used for draw `step`.
// key = (seed low 32 bits, seed high 32), counter = (step low 32, step high 32, 0, 0);
// the uniform is (output word 0 >> 8) * 2^-24 (docs/numerics.md, "Sampling").
float PhiloxUniform(uint64_t seed, uint64_t step);

// The Philox4x32-10 block function of Salmon et al. (Random123), exposed for its
// known-answer test.
std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

struct SampleResult {
  int32_t token = -1;
  float logit = 0.0f;            // the chosen token's raw logit (before penalties and bias)
  float logprob = 0.0f;          // log-probability under the sampling distribution: the
                                 // adjusted logits (penalties, bias) after temperature, before
                                 // the top-k/top-p cut
  int32_t runner_up = -1;        // the highest raw-logit other eligible token
  float runner_up_logit = 0.0f;  // its raw logit
};

// The logits a draw uses: logits[t] + bias[t] - frequency_penalty * count[t] -
// presence_penalty * (count[t] > 0), in float32 in that order (docs/numerics.md, "Sampling",
// step 0), with count[t] the occurrences of t in `generated`. Ids in `generated` or the bias
// past the end of `logits` are ignored.
std::vector<float> AdjustedLogits(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> generated);

// The ids a draw may choose, ascending: allowed by `allowed` (a mask over the vocabulary;
// empty: every id; an id past its end, as a tokenizer's mask inside a model's padded
// vocabulary leaves, is not allowed), logit neither NaN nor -inf.
std::vector<int32_t> EligibleIds(std::span<const float> logits, std::span<const uint8_t> allowed);

// `allowed`, when non-empty, is a mask over the vocabulary (constrained decoding):
// tokens with allowed[id] == 0 are never drawn and do not enter the softmax.
// `generated`: the tokens this call has sampled before this draw (not the prompt), which
// the penalties count; ignored when params.AdjustsLogits() is false.
// `params` must have passed ValidateSamplingParams. NaN and -inf logits are never drawn;
// when no token can be drawn the result has token == -1.
SampleResult Sample(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                    uint64_t step, std::span<const uint8_t> allowed = {},
                    std::span<const int32_t> generated = {});

// The candidates a draw at temperature > 0 chooses among, after the top-k and top-p cuts,
// in the contract's order (scaled logit desc, token id asc). Greedy: the argmax alone.
std::vector<int32_t> SamplingCandidates(std::span<const float> logits, const SamplingParams& params,
                                        std::span<const uint8_t> allowed = {},
                                        std::span<const int32_t> generated = {});

}  // namespace trace::engine
