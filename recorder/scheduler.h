// The scheduler: continuous batching over one engine::Engine. Requests queue; one thread
// drives the engine, and each Forward call carries the prefill chunks and decode steps of
// every active sequence. A new request reuses the longest cached prefix among live and
// recently finished sequences (ForkSequence) and computes only the rest; by the numerics
// contract the result is bitwise what a cold, unbatched computation gives.
//
// Ownership: the Scheduler owns the Engine and its thread; a Generation is shared between
// the submitter and the scheduler, and so is a request's GenerationObserver: the scheduler
// holds its reference until the generation has finished, so whatever the observer calls
// into stays alive whatever the submitter does meanwhile (a client that goes away, a
// handler that returns early). There are no raw callbacks to dangle.
// Thread safety: Submit and every Generation method may be called from any thread; observer
// methods run on the scheduler thread and must be quick.
// Errors: an engine failure fails every active generation with the engine's Status.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "recorder/constrained.h"

namespace trace::recorder {

// One sampled token and what the replayer checks it by.
struct TokenStep {
  int32_t token = -1;
  uint64_t logits_digest = 0;  // LogitsDigest of the full raw logits row
  float logit = 0.0f;
  float logprob = 0.0f;  // the sampler's (after temperature, before the cut)
  int32_t runner_up = -1;
  float runner_up_logit = 0.0f;
  float model_logprob = 0.0f;                  // log-softmax of the raw logits (OpenAI "logprob")
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs, raw log-softmax
  // SchedulerOptions::layer_digests: Digest64 of the float32 hidden state after each layer
  // at the row whose logits this token was sampled from ([num_layers]); else empty.
  std::vector<uint64_t> layer_digests;
  // With layer_digests, on a mixture-of-experts model: the row's route, the expert ids of
  // every MoE layer in layer order (num_experts_per_tok each, ascending; -1 for a slot
  // dropped by fast numerics' capacity); else empty.
  std::vector<int32_t> route;
};

struct GenerationResult;

// What a submitter hears about its generation, on the scheduler thread. Held by shared
// ownership (GenerationRequest::observer) until after OnFinish.
class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  // Every sampled token, in order; returning true ends the generation with "stop" (the
  // submitter found a stop sequence).
  virtual bool OnToken(const TokenStep& step) = 0;
  // Once, after the Generation has finished (its Wait no longer blocks).
  virtual void OnFinish(const GenerationResult& result) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  engine::SamplingParams sampling;
  uint64_t seed = 0;
  std::unique_ptr<Constraint> constraint;  // null: unconstrained
  std::vector<int32_t> end_tokens;         // sampling one of these ends with "stop"
  int top_logprobs = 0;
  bool want_logprobs = false;
  std::shared_ptr<GenerationObserver> observer;  // null: none
};

struct GenerationResult {
  Status status;
  std::vector<TokenStep> steps;  // every token sampled, also when cancelled or failed
  // "stop" | "length" | "cancelled" (Generation::Cancel; status stays ok) | "error"
  std::string finish_reason;
  int64_t reused_prompt_tokens = 0;
  int32_t max_batch_size = 0;  // most sequences sharing a Forward with this one
  double queue_ms = 0, prefill_ms = 0, decode_ms = 0;
};

class Generation {
 public:
  // Blocks until the generation has finished.
  const GenerationResult& Wait();
  // Asks the scheduler to stop this generation (the client went away): it finishes before
  // the next engine step with finish_reason "cancelled", keeping the tokens sampled so far.
  // Safe to call at any time, any number of times, also after it finished.
  void Cancel() { cancelled_ = true; }
  bool done();

 private:
  friend class SchedulerImpl;
  void Finish(GenerationResult result);
  std::mutex mu_;               // guards: done_, result_
  std::condition_variable cv_;  // done_ became true
  bool done_ = false;
  GenerationResult result_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerOptions {
  int max_active_sequences = 64;  // 1: one request at a time (no batching)
  int max_batch_tokens = 512;     // tokens per Forward call, prefill chunks included
  int prefill_chunk = 256;        // most prompt tokens of one sequence per Forward
  int max_cached_sequences = 16;  // finished sequences kept for prefix reuse
  bool prefix_reuse = true;
  // Record per-layer hidden-state digests for every sampled token (TokenStep::layer_digests)
  // and, on an MoE model, its route (TokenStep::route), through the engine's LayerProbe and
  // RouteProbe; read-only, so logits and tokens are unchanged.
  bool layer_digests = false;
};

struct SchedulerStats {
  int64_t forward_calls = 0;
  int64_t sampled_tokens = 0;
  int64_t reused_prompt_tokens = 0;
  int64_t computed_prompt_tokens = 0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;  // finishes queued work with "cancelled" and joins
  static Result<std::unique_ptr<Scheduler>> Create(std::unique_ptr<engine::Engine> engine,
                                                   const SchedulerOptions& options);
  virtual std::shared_ptr<Generation> Submit(GenerationRequest request) = 0;
  virtual const engine::Engine& engine() const = 0;
  virtual SchedulerStats stats() const = 0;
};

}  // namespace trace::recorder
