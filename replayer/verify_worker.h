// A `trace verify` worker (docs/verify.md): claims jobs from a store's verify queue
// (store/verify_queue.h), replays each run on this machine with the model kept loaded
// between runs of the same model (EngineCache), renews its lease from a thread of its own
// while it replays, and writes the verdict and the job's end in one transaction. A job
// whose claim was lost meanwhile (the lease ran out and another worker took it) is dropped
// without writing: every job gets exactly one verdict.
//
// Ownership: RunWorker borrows the store for the duration of the call. Thread safety: one
// RunWorker per thread; any number of workers, in any processes or machines, may serve one
// store. Errors: a store that cannot be read or written stops the worker with its Status; a
// run that cannot be replayed (corrupt, model missing) is not an error of the worker but
// the verdict "error", with the reason as its first_divergence.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "replayer/replayer.h"
#include "store/store.h"
#include "store/verify_queue.h"

namespace trace::replayer {

struct WorkerOptions {
  store::ClaimOptions claim;  // worker name, lease, batch, model (prefer_model is managed)
  ReplayOptions replay;       // device, threads; model_dir and calls unused
  // A fresh constraint factory per job (it keys its grammars on the tokenizer, which the
  // engine cache may replace between jobs).
  std::function<ConstraintFactory()> make_constraints;
  // Stop once there is nothing left to claim: with claim.batch_id set, when every job of
  // the batch is done (jobs held by other workers are waited for: one whose worker died is
  // claimed here when its lease ends); without, as soon as a claim finds nothing.
  bool exit_when_empty = true;
  int64_t poll_ms = 50;  // how often an idle worker looks for work again
  // Set from a signal handler (SIGTERM): the worker finishes the job it holds, then stops.
  const std::atomic<bool>* stop = nullptr;
  // Called after each job with its verdict (written: false when the claim was lost).
  std::function<void(const store::VerifyJob&, const store::Verification&, bool written)> on_job;
};

struct WorkerStats {
  int64_t jobs_done = 0;    // verdicts written
  int64_t claims_lost = 0;  // replayed, but the lease had passed to another worker
  int model_loads = 0;
};

Result<WorkerStats> RunWorker(store::Store& store, const WorkerOptions& options);

// The verdict of one replay of `run_id` on this machine: the replay's level, its first
// divergence, the report as JSON and this machine's fingerprint; "error" with the reason
// when the run could not be replayed. The run's recorded model folder is replayed against
// even when it no longer hashes as recorded (that is a finding, not an error).
store::Verification VerifyRun(store::Store& store, const std::string& run_id,
                              const ReplayOptions& options);

// A divergence in one line: "call 2, token 5: recorded ' the' (279), replayed ' a' (264)".
std::string DivergenceLine(const Divergence& d);

}  // namespace trace::replayer
