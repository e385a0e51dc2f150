// The continuous-batching experiment behind `trace bench determinism`: one prompt completed
// greedily many times, each run a small server simulation in which random other requests
// arrive before or after it, prefill in random chunks and decode a random number of tokens,
// all in shared Engine::Forward batches (prefill and decode mixed, items in random order).
// It counts the distinct completions, finds where they diverged, and measures, per batch
// size, how far the measured prompt's logits moved from the same step computed alone.
//
// Everything random (the other requests, their lengths, contents, arrival times and prefill
// chunking, the order of items in a batch) comes from a SplitMix64 stream keyed by the seed
// and the run index, so an experiment is itself reproducible.
//
// `trace bench determinism` runs it in named steps: LoadModelFolder (perf/model_folder.h),
// PrepareDeterminism, RunDeterminism, then prints the result with ViewStep and TokensBefore.
//
// Ownership: a DeterminismSetup owns its model, tokenizer and engine; the experiment creates
// and frees its own sequences. Thread safety: none (one engine, one caller). Errors:
// PrepareDeterminism names the missing tokenizer or the empty prompt, or returns the engine's;
// RunDeterminism returns the engine's, with the run it happened in.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "perf/model_folder.h"

namespace trace::perf {

// A candidate of a logits row, and one step of the measured request: the token it chose
// (greedy: argmax, lowest id on ties) and the best few candidates (logit desc, id asc).
struct Candidate {
  int32_t id = -1;
  float logit = 0.0f;
};
struct StepRecord {
  int32_t token = -1;
  std::vector<Candidate> top;
};

// The k best candidates of a row, best first (logit desc, id asc; NaN skipped).
std::vector<Candidate> TopCandidates(std::span<const float> logits, size_t k);
// max |a - b| over a row; 0 when bitwise equal, +inf when a NaN/inf appears on one side only.
double MaxAbsDiff(std::span<const float> a, std::span<const float> b);
bool BitwiseEqual(std::span<const float> a, std::span<const float> b);

struct DeterminismOptions {
  int runs = 100;          // completions of the prompt, each batched with others
  int max_tokens = 32;     // tokens per completion
  uint64_t seed = 0;       // seed of the other requests
  int max_others = 15;     // each run adds 0..max_others other requests
  int other_max_len = 48;  // longest prompt of another request
  // For the tests of the divergence report: at every measured step computed in a batch of
  // B > 1 sequences, lift the runner-up's logit above the best by this * B.
  float test_perturb = 0;
};

// Per batch size (sequences in the Forward call that computed one of the measured steps):
// how far its logits moved from the same step computed alone (batch size 1).
struct BatchStat {
  int64_t forwards = 0;             // measured steps computed at this batch size
  int64_t compared = 0;             // ... of which on the reference path (comparable)
  int64_t first_step_forwards = 0;  // first steps (prefill) at this batch size
  double max_diff = 0;              // over every compared step
  double max_diff_first = 0;        // over first steps only
  bool bitwise = true;              // every compared row bitwise equal
};

struct RunResult {
  std::vector<int32_t> tokens;    // the measured completion
  std::vector<StepRecord> steps;  // one per measured step
  int64_t first_step_batch = 0;   // sequences in the Forward of the first step
  int64_t others = 0;             // other requests in this run
  int64_t max_batch = 0;
};

// A distinct completion and the runs that produced it (in order of first appearance).
struct CompletionVariant {
  std::vector<int32_t> tokens;
  std::vector<int> runs;
};
// Where variant `variant` first left variant 0: the first step whose token differs between
// their first runs (base_run of variant 0, run of the other).
struct Divergence {
  size_t variant = 0;
  int base_run = 0, run = 0;
  size_t step = 0;
};

struct DeterminismResult {
  RunResult reference;          // the prompt alone, every step at batch size 1
  std::vector<RunResult> runs;  // one per batched run
  std::vector<CompletionVariant> variants;
  std::vector<Divergence> divergences;                   // one per variant after the first
  std::map<int64_t, BatchStat> by_batch;                 // batch size -> logits vs batch size 1
  int64_t largest_batch_min = 0, largest_batch_max = 0;  // over the runs' largest batches
  double max_diff_first = 0, max_diff = 0;
  bool bitwise = true;  // every compared step bitwise equal to batch size 1
  double seconds = 0;
};

// The token a run chose at `step`, -1 when it had already stopped.
int32_t TokenAt(const DeterminismResult& result, int run, size_t step);

// The tokens `run` had produced before `step` (all of them when it stopped earlier).
std::vector<int32_t> TokensBefore(const DeterminismResult& result, int run, size_t step);

// One step of a run as a report shows it: what the run chose and, when `other_token` (what the
// run it is compared with chose there) differs, that token among this step's candidates.
struct StepView {
  const StepRecord* record = nullptr;  // null: the run had stopped before this step
  bool eos = false;                    // the chosen token ends a completion
  const Candidate* other = nullptr;    // other_token in record->top (null: equal or not there)
  // The best logit minus c's (the chosen token's lead over candidate c).
  double MarginTo(const Candidate& c) const {
    return static_cast<double>(record->top[0].logit) - c.logit;
  }
};
StepView ViewStep(const DeterminismResult& result, const std::vector<int32_t>& eos, int run,
                  size_t step, int32_t other_token);

// Step 1: what the experiment runs on. The loaded model folder, `prompt_text` encoded by its
// tokenizer (needed), the end-of-sequence ids (config and tokenizer), the range of random
// tokens, and an engine with `engine_options` whose context fits the longest request.
struct DeterminismSetup {
  LoadedModel loaded;
  std::unique_ptr<engine::Engine> engine;
  std::vector<int32_t> prompt;  // the measured prompt's token ids
  std::vector<int32_t> eos;     // ends a completion
  int32_t token_upper = 0;      // other requests draw tokens in [0, token_upper)
};
Result<DeterminismSetup> PrepareDeterminism(LoadedModel loaded, const std::string& prompt_text,
                                            engine::EngineOptions engine_options,
                                            const DeterminismOptions& options);

// Step 2: the reference (the prompt alone) and options.runs batched runs on setup's engine,
// then the summary: distinct completions, where they diverged, logits per batch size. Other
// requests draw tokens in [0, token_upper) that the tokenizer does not mark special.
// `progress(run, seconds)` (may be empty) is called before each run, with run -1 for the
// reference.
Result<DeterminismResult> RunDeterminism(DeterminismSetup& setup, const DeterminismOptions& options,
                                         const std::function<void(int, double)>& progress = {});

}  // namespace trace::perf
