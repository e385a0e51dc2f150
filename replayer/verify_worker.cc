#include "replayer/verify_worker.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "base/escape.h"
#include "base/wall_clock.h"
#include "replayer/report.h"

namespace trace::replayer {
namespace {

// The machine kind verdicts are grouped by: the kernel path and the processor that ran it
// ("cpu avx512 AMD EPYC", "cuda NVIDIA H100 80GB HBM3"), not the thread count.
std::string MachineKind(const engine::EngineDeviceFingerprint& f) {
  if (!f.gpu_name.empty()) return "cuda " + f.gpu_name;
  return "cpu " + f.kernel_path + (f.cpu_model.empty() ? "" : " " + f.cpu_model);
}

std::string FingerprintJson(const RunReport& r) {
  const engine::EngineDeviceFingerprint& f = r.device_fingerprint;
  nlohmann::json j = {{"device", f.device},
                      {"description", f.description},
                      {"kernel_path", f.kernel_path},
                      {"cpu_model", f.cpu_model},
                      {"cpu_flags", f.cpu_flags},
                      {"cpu_cores", f.cpu_cores},
                      {"os", f.os},
                      {"numerics", r.numerics}};
  if (!f.gpu_name.empty()) {
    j["gpu_name"] = f.gpu_name;
    j["gpu_compute_capability"] = f.gpu_compute_capability;
    j["gpu_driver_version"] = f.gpu_driver_version;
    j["cuda_runtime_version"] = f.cuda_runtime_version;
    j["cublas_version"] = f.cublas_version;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Renews a job's lease every third of the lease, on a connection of its own, until Stop.
class LeaseKeeper {
 public:
  LeaseKeeper(store::VerifyQueue* queue, store::VerifyJob job, int64_t lease_ms)
      : queue_(queue), job_(std::move(job)), lease_ms_(lease_ms) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~LeaseKeeper() { Stop(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    const auto period = std::chrono::milliseconds(std::max<int64_t>(1, lease_ms_ / 3));
    while (!cv_.wait_for(lock, period, [this] { return stopping_; })) {
      // A failed or lost renewal changes nothing here: Finish tells whether the claim held.
      (void)queue_->Renew(job_, lease_ms_);
    }
  }

  store::VerifyQueue* queue_;
  store::VerifyJob job_;
  int64_t lease_ms_;
  std::mutex mu_;  // guards: stopping_
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

bool Stopping(const WorkerOptions& o) {
  return o.stop != nullptr && o.stop->load(std::memory_order_relaxed);
}

}  // namespace

std::string DivergenceLine(const Divergence& d) {
  return "call " + std::to_string(d.call) + ", token " + std::to_string(d.step + 1) +
         ": recorded " + QuoteForDisplay(d.recorded_text) + " (" +
         std::to_string(d.recorded_token) + "), replayed " + QuoteForDisplay(d.replayed_text) +
         " (" + std::to_string(d.replayed_token) + ")";
}

store::Verification VerifyRun(store::Store& store, const std::string& run_id,
                              const ReplayOptions& options) {
  store::Verification v;
  v.run_id = run_id;
  v.build = std::string(TRACE_VERSION) + " (" + TRACE_GIT_REVISION + ")";
  v.worker = store::ThisWorkerName();
  const auto started = std::chrono::steady_clock::now();
  ReplayOptions replay = options;
  replay.calls.clear();
  Result<RunReport> report = [&]() -> Result<RunReport> {
    // The recorded folder on purpose: a model file changed since the recording is what a
    // verification is for, reported as a difference and a divergence, not refused.
    TRACE_ASSIGN_OR_RETURN(proto::RunHeader header, store.LoadHeader(run_id));
    if (replay.model_dir.empty()) replay.model_dir = header.model().model_dir();
    return ReplayRun(store, run_id, replay);
  }();
  v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  v.time_ns = WallClockNs();
  if (!report.ok()) {
    v.verdict = "error";
    v.first_divergence = report.status().message();
    v.machine = options.device;
    return v;
  }
  v.verdict = LevelKey(report->level);
  if (const Divergence* d = report->first_divergence()) v.first_divergence = DivergenceLine(*d);
  v.report_json =
      ReplayJson(*report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  v.machine = MachineKind(report->device_fingerprint);
  v.fingerprint_json = FingerprintJson(*report);
  return v;
}

Result<WorkerStats> RunWorker(store::Store& store, const WorkerOptions& options) {
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::VerifyQueue> queue, store.OpenVerifyQueue());
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<store::VerifyQueue> renewals, store.OpenVerifyQueue());
  EngineCache cache;
  ReplayOptions replay = options.replay;
  replay.cache = &cache;
  store::ClaimOptions claim = options.claim;
  WorkerStats stats;
  while (!Stopping(options)) {
    TRACE_ASSIGN_OR_RETURN(std::optional<store::VerifyJob> job, queue->Claim(claim));
    if (!job) {
      if (options.exit_when_empty) {
        if (claim.batch_id.empty()) break;
        TRACE_ASSIGN_OR_RETURN(store::BatchProgress p, queue->Progress(claim.batch_id));
        if (p.done >= p.total) break;
      }
      // Jobs held by other workers (or none yet): look again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(options.poll_ms));
      continue;
    }
    claim.prefer_model = job->model;  // the model now loaded: its runs first
    store::Verification v;
    if (options.make_constraints) replay.constraints = options.make_constraints();
    {
      LeaseKeeper keeper(renewals.get(), *job, claim.lease_ms);
      v = VerifyRun(store, job->run_id, replay);
    }
    v.worker = claim.worker;
    TRACE_ASSIGN_OR_RETURN(bool written, queue->Finish(*job, v));
    written ? ++stats.jobs_done : ++stats.claims_lost;
    if (options.on_job) options.on_job(*job, v, written);
  }
  stats.model_loads = cache.loads();
  return stats;
}

}  // namespace trace::replayer
