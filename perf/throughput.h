// The throughput measurement that `trace bench throughput` and bench/engine share, and the
// seeded random stream every bench draws from.
//
// Ownership: the caller owns the engine; Measure creates and frees its own sequences.
// Thread safety: none (one engine, one caller). Errors: Measure returns the engine's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "base/status.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::perf {

// The seeded stream every experiment draws from (base/splitmix64.h: std:: distributions differ
// between libraries), so a bench run is itself reproducible from its seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Next() { return gen_.Next(); }
  // Uniform in [lo, hi] (hi >= lo); the modulo bias is irrelevant here.
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  SplitMix64 gen_;
};

// The first index of the largest logit (-1 for an empty row; NaN never wins).
int32_t Argmax(std::span<const float> logits);

struct Timing {
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tps = 0, decode_tps = 0;  // tokens per second (all sequences together)
};

// One measurement: `prompts.size()` sequences prefilled with their prompts in one Forward,
// then `decode_tokens` greedy decode steps of all of them together. Only Forward is timed.
Status Measure(engine::Engine* engine, const std::vector<std::vector<int32_t>>& prompts,
               int decode_tokens, Timing* t);

// The sweep behind `trace bench throughput`: for each batch size B, B sequences of
// prompt_len random tokens (the same for both engines; no special token of the tokenizer)
// measured with Measure on a canonical and a fast engine alternately (so that load drifting
// on the machine hits both), `repeat` times, keeping the best prefill and the best decode.
struct SweepOptions {
  std::vector<int64_t> batches = {1, 8, 64};
  int prompt_len = 128;
  int decode_tokens = 32;
  int repeat = 1;
  uint64_t seed = 0;
};
struct SweepRow {
  int64_t batch = 0;
  Timing t[2];  // [0] the first engine (canonical), [1] the second (fast)
};
// engines: {canonical, fast}, both warmed up here first (first touch of the weights, thread
// pool start). Tokens are drawn in [0, token_upper); `tokenizer` may be null. `progress`
// (may be empty) gets a line saying what runs now. Errors: the engines', with the batch.
Result<std::vector<SweepRow>> RunThroughputSweep(
    std::array<engine::Engine*, 2> engines, const SweepOptions& options, int64_t token_upper,
    const engine::Tokenizer* tokenizer,
    const std::function<void(const std::string&)>& progress = {});

// Flops of one prefill token through every layer's matrices (2 per weight element: the
// LM head and attention's score work are not counted), and the bytes of weights one decode
// step reads (every layer matrix plus the LM head, as stored).
struct ModelCost {
  double flops_per_prefill_token = 0;
  double bytes_per_decode_step = 0;
};
ModelCost CostOf(const engine::Model& model);

}  // namespace trace::perf
