// `trace worker`: serves a store's verify queue (docs/verify.md): claims jobs, replays each
// run on this machine with its model kept loaded, writes the verdicts. Any number of
// workers on any number of machines share a PostgreSQL store; SQLite serves the workers of
// one machine. SIGTERM or SIGINT: the job in hand is finished, then the worker stops.
// Exit 0 when it stopped (queue empty with --exit-when-empty, or a signal), 2 on an error.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include "base/escape.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/replay_constraints.h"
#include "replayer/verify_worker.h"
#include "store/store.h"

namespace trace::cli::cmd_worker {
namespace {

struct WorkerArgs {
  EngineFlags engine;  // --device, --threads (cli/engine_flags.h)
  std::string batch;
  std::string model;
  double lease_s = 30;
  bool exit_when_empty = false;
  bool json = false;
};

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
}

int Run(const WorkerArgs& args) {
  if (!(args.lease_s >= 1 && args.lease_s <= 86400)) {
    return ReportError(InvalidArgument("--lease must be 1..86400 seconds"));
  }
  Result<EngineSetup> setup = ResolveEngineFlags(args.engine, EngineUse::kVerify);
  if (!setup.ok()) return ReportError(setup.status());
  auto store = store::Store::Open(ResolveStorePath(), store::StoreOptions{});
  if (!store.ok()) return ReportError(store.status());

  replayer::WorkerOptions o;
  o.claim.worker = store::ThisWorkerName();
  o.claim.lease_ms = static_cast<int64_t>(args.lease_s * 1000);
  o.claim.batch_id = args.batch;
  o.claim.model = args.model;
  o.replay.device = setup->engine.device;
  o.replay.threads = setup->engine.threads;
  o.make_constraints = MakeConstraintFactory;
  o.exit_when_empty = args.exit_when_empty;
  o.stop = &g_stop;
  const bool quiet = Globals().quiet;
  o.on_job = [&](const store::VerifyJob& job, const store::Verification& v, bool written) {
    if (args.json) {
      nlohmann::json j = {{"job", job.job_id},    {"batch", job.batch_id},
                          {"run_id", job.run_id}, {"verdict", v.verdict},
                          {"written", written},   {"first_divergence", v.first_divergence},
                          {"seconds", v.seconds}, {"attempt", job.attempts}};
      PrintJson(std::cout, j, -1);
      std::cout << std::flush;
    } else if (!quiet) {
      std::fprintf(
          stderr, "worker: run %s %s%s%s\n", job.run_id.c_str(), v.verdict.c_str(),
          v.first_divergence.empty() ? "" : (": " + EscapeForDisplay(v.first_divergence)).c_str(),
          written ? "" : " (lease lost: another worker took the job; not written)");
    }
  };
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sa.sa_flags = SA_RESTART;  // the store's I/O goes on; the loop checks the flag between jobs
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  auto stats = replayer::RunWorker(**store, o);
  if (!stats.ok()) return ReportError(stats.status());
  if (!quiet && !args.json) {
    std::fprintf(stderr, "worker: %lld verdicts written, %lld claims lost, %d model loads\n",
                 static_cast<long long>(stats->jobs_done),
                 static_cast<long long>(stats->claims_lost), stats->model_loads);
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<WorkerArgs>();
  auto* cmd = app.add_subcommand(
      "worker",
      "Replay the runs queued by `trace verify --enqueue` and write their verdicts.\n"
      "Run any number of workers against one PostgreSQL store (or one machine's SQLite store):\n"
      "each claims a job under a lease it renews while replaying; a worker that dies loses\n"
      "its lease and its job is claimed again, never lost and never reported twice.\n"
      "SIGTERM finishes the job in hand, then stops. Exit 0 when stopped; 2 on an error.");
  AddEngineFlags(cmd, EngineUse::kVerify, &args->engine);
  cmd->add_option("--batch", args->batch, "Only this batch's jobs (default: any batch)")
      ->type_name("ID");
  cmd->add_option("--model", args->model,
                  "Only jobs of this model folder (as the runs recorded it)")
      ->type_name("DIR");
  cmd->add_option("--lease", args->lease_s,
                  "Seconds a claim lasts without renewal (default 30; renewed every third)")
      ->type_name("SECONDS");
  cmd->add_flag("--exit-when-empty", args->exit_when_empty,
                "Stop when there is nothing left to claim (with --batch: when the batch is "
                "done);\ndefault: wait for more jobs until SIGTERM");
  cmd->add_flag("--json", args->json, "One JSON line per job on stdout");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(43, Setup);

}  // namespace
}  // namespace trace::cli::cmd_worker
