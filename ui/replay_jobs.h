// Replays started from `trace ui`: each runs replayer::ReplayRun on a thread of its own
// and publishes its progress (calls and tokens done) and, at the end, its report
// (`trace replay --json`) or its error. The server streams a job's changes to the page as
// server-sent events; a reader blocks in WaitChange until the next change.
//
// Ownership: ReplayJobs borrows the Store (must outlive it) and owns its threads, one per
// running replay (a finished one is joined at the next Start); the destructor waits for
// running replays to finish. Thread safety: every method may be
// called from any thread. Errors: Start refuses (Unavailable) while max_running replays
// run, and (NotFound) a run the store does not have.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "replayer/replayer.h"
#include "store/store.h"

namespace trace::ui {

struct ReplayJobState {
  std::string id;  // "r1", "r2", ... in start order
  std::string run_id;
  std::vector<int> calls;  // the model calls replayed; empty: all
  uint64_t version = 0;    // grows with every change
  replayer::ReplayProgress progress;
  bool done = false;
  nlohmann::json report;  // done and replayed: `trace replay --json`
  std::string error;      // done and failed: why (one line)
};

// {"replay","run_id","done","calls_done",...,"report","error"}: the API's and the
// progress stream's view of a job.
nlohmann::json ReplayStateJson(const ReplayJobState& job);

class ReplayJobs {
 public:
  ReplayJobs(store::Store* store, replayer::ReplayOptions base, int max_running);
  ~ReplayJobs();

  // Starts replaying `run_id` (a full id): the job's id.
  Result<std::string> Start(const std::string& run_id, std::vector<int> calls);
  std::optional<ReplayJobState> Get(const std::string& id) const;
  // The job once its version is above `seen` (or it is done), or as it is after `timeout`;
  // nothing for an unknown id.
  std::optional<ReplayJobState> WaitChange(const std::string& id, uint64_t seen,
                                           std::chrono::milliseconds timeout) const;

 private:
  void Run(const std::string& id);

  store::Store* store_;
  replayer::ReplayOptions base_;
  int max_running_;
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::map<std::string, ReplayJobState> jobs_;
  int running_ = 0;
  int started_ = 0;
  std::map<std::string, std::thread> threads_;  // by job id, until joined
};

}  // namespace trace::ui
