// What `trace verify` keeps in the trace store (docs/verify.md, docs/trace-format.md): the
// verdicts of replays (table `verifications`: one row per replay of a run on some machine,
// older rows kept) and the job queue that spreads a batch of replays over workers (tables
// `verify_batches` and `verify_jobs`). The same rows on SQLite and PostgreSQL; the queue is
// the store, not a scheduler of our own: a worker claims a job under a lease (PostgreSQL:
// `SELECT ... FOR UPDATE SKIP LOCKED`; SQLite: its write lock), renews the lease while it
// replays, and finishes the job and writes its verdict in one transaction that succeeds only
// while it still holds the claim. A worker that dies stops renewing; once its lease ends the
// job is claimed again. So a job is never lost, and its verdict is written exactly once.
//
// Ownership: Store::OpenVerifyQueue returns a VerifyQueue the caller owns, with its own
// database connection. Thread safety: one thread at a time per VerifyQueue; open one per
// thread (the worker's lease renewal has its own). Errors: Status naming the store and the
// batch, job or run; a store opened read-only answers the reads and refuses the writes; a
// store of schema version 2 (before these tables) reads as having no verdicts and no jobs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::store {

// One replay of a run on one machine.
struct Verification {
  int64_t id = 0;  // assigned by the store, increasing
  std::string run_id;
  std::string batch_id;  // the batch it answered ("" for none)
  // The level reached: "bitwise" | "tokens" | "diverged" | "recorded_only" | "error"
  // (replayer::LevelKey, or "error" when the replay could not run).
  std::string verdict;
  std::string first_divergence;  // one line for people; "" when none (or the error)
  std::string report_json;       // the replay's JSON report ("" for an error)
  std::string machine;           // the machine kind: the engine's device description
  std::string fingerprint_json;  // this machine and build, as a run header records them
  std::string build;             // "VERSION (GIT_REVISION)"
  std::string worker;            // "host:pid" of the process that replayed it
  int64_t time_ns = 0;           // when it finished (wall clock, ns since the epoch)
  double seconds = 0.0;          // the replay's duration
};

// A run to verify, and the model it needs (jobs of one model are claimed together).
struct JobSpec {
  std::string run_id;
  std::string model;  // the recorded model folder (the grouping key; "" for none)
};

// A job as a worker holds it.
struct VerifyJob {
  int64_t job_id = 0;
  std::string batch_id;
  std::string run_id;
  std::string model;
  std::string claim;  // this claim's token: Renew and Finish succeed only while it holds
  int attempts = 0;   // claims so far, this one included
};

struct ClaimOptions {
  std::string worker;        // "host:pid", stored with the claim
  int64_t lease_ms = 30000;  // the claim ends this long after the last renewal
  std::string batch_id;      // only this batch's jobs; "" any batch
  std::string model;         // only jobs of this model; "" any
  std::string prefer_model;  // jobs of this model first (the one the worker has loaded)
};

struct BatchProgress {
  std::string batch_id;
  std::string description;
  int64_t created_ns = 0;
  int64_t total = 0;
  int64_t queued = 0;   // never claimed, or their lease ended
  int64_t claimed = 0;  // held by a live lease
  int64_t done = 0;
  int64_t reclaimed = 0;  // jobs claimed more than once (a worker died or stalled)
};

class VerifyQueue {
 public:
  virtual ~VerifyQueue() = default;

  // A new batch (a ULID) with one job per spec, in one transaction.
  virtual Result<std::string> Enqueue(const std::vector<JobSpec>& jobs,
                                      const std::string& description) = 0;
  // The next job: queued, or claimed under a lease that has ended; jobs of
  // options.prefer_model first, then by model, then in the order enqueued. nullopt when
  // there is none to take now (jobs may still be held by other workers).
  virtual Result<std::optional<VerifyJob>> Claim(const ClaimOptions& options) = 0;
  // Extends the lease; false when the claim was lost (the lease ended and another worker
  // took the job).
  virtual Result<bool> Renew(const VerifyJob& job, int64_t lease_ms) = 0;
  // Marks the job done and inserts `v` (its id is assigned), in one transaction, if the
  // claim still holds; false (nothing written) when it was lost.
  virtual Result<bool> Finish(const VerifyJob& job, const Verification& v) = 0;
  // Gives the job back (a worker stopping before it replayed it): queued again at once.
  virtual Status Release(const VerifyJob& job) = 0;

  // NotFound for an unknown batch.
  virtual Result<BatchProgress> Progress(const std::string& batch_id) = 0;
  // The verdicts written for the batch, in the order of its jobs.
  virtual Result<std::vector<Verification>> BatchResults(const std::string& batch_id) = 0;
  // Every verdict of a run, newest first.
  virtual Result<std::vector<Verification>> RunVerifications(const std::string& run_id) = 0;
  // The newest verdict per (run, machine) of every run that has one, keyed by run id, each
  // run's machines in name order.
  virtual Result<std::map<std::string, std::vector<Verification>>> LatestVerdicts() = 0;
};

// "host:pid" of this process, as workers name themselves.
std::string ThisWorkerName();

}  // namespace trace::store
