#include "ui/replay_jobs.h"

#include "replayer/report.h"

namespace trace::ui {

ReplayJobs::ReplayJobs(store::Store* store, replayer::ReplayOptions base, int max_running)
    : store_(store), base_(std::move(base)), max_running_(max_running) {}

ReplayJobs::~ReplayJobs() {
  for (auto& [id, t] : threads_) t.join();
}

Result<std::string> ReplayJobs::Start(const std::string& run_id, std::vector<int> calls) {
  TRACE_RETURN_IF_ERROR(store_->GetRunSummary(run_id).status());
  std::lock_guard<std::mutex> lock(mu_);
  // The threads of finished replays: done is set as their last step, so each join returns
  // at once.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (jobs_[it->first].done) {
      it->second.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  if (running_ >= max_running_) {
    return Unavailable("a replay is already running (at most " + std::to_string(max_running_) +
                       " at once); start another when it has finished");
  }
  ReplayJobState job;
  job.id = std::to_string(++started_);
  job.id.insert(job.id.begin(), 'r');
  job.run_id = run_id;
  job.calls = std::move(calls);
  const std::string id = job.id;
  jobs_[id] = std::move(job);
  ++running_;
  threads_.emplace(id, std::thread([this, id] { Run(id); }));
  return id;
}

void ReplayJobs::Run(const std::string& id) {
  replayer::ReplayOptions options = base_;
  replayer::EngineCache cache;  // this replay's own: jobs never share an engine
  options.cache = &cache;
  std::string run_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_id = jobs_[id].run_id;
    options.calls = jobs_[id].calls;
  }
  options.progress = [this, &id](const replayer::ReplayProgress& p) {
    std::lock_guard<std::mutex> lock(mu_);
    ReplayJobState& job = jobs_[id];
    job.progress = p;
    ++job.version;
    changed_.notify_all();
  };
  Result<replayer::RunReport> report = replayer::ReplayRun(*store_, run_id, options);
  std::lock_guard<std::mutex> lock(mu_);
  ReplayJobState& job = jobs_[id];
  if (report.ok()) {
    job.report = replayer::ReplayJson(*report);
  } else {
    job.error = report.status().message();
  }
  job.done = true;
  ++job.version;
  --running_;
  changed_.notify_all();
}

std::optional<ReplayJobState> ReplayJobs::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::optional<ReplayJobState> ReplayJobs::WaitChange(const std::string& id, uint64_t seen,
                                                     std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  changed_.wait_for(lock, timeout, [&] { return it->second.version > seen || it->second.done; });
  return it->second;
}

nlohmann::json ReplayStateJson(const ReplayJobState& job) {
  nlohmann::json out = {{"replay", job.id},
                        {"run_id", job.run_id},
                        {"done", job.done},
                        {"calls_done", job.progress.calls_done},
                        {"calls_total", job.progress.calls_total},
                        {"tokens_done", job.progress.tokens_done},
                        {"tokens_total", job.progress.tokens_total},
                        {"seconds", job.progress.seconds}};
  if (job.done) {
    out["report"] = job.report.is_null() ? nlohmann::json() : job.report;
    out["error"] = job.error.empty() ? nlohmann::json() : nlohmann::json(job.error);
  }
  return out;
}

}  // namespace trace::ui
