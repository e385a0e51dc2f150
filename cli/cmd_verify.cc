// `trace verify`: replays a selection of recorded runs on this machine and build and says,
// per run, how far it still reproduces (docs/verify.md). The runs become a batch of jobs in
// the store's verify queue; local worker processes (`trace worker`) replay them, or, with
// --enqueue, workers on other machines do. The verdicts stay in the store (`trace ls`,
// `trace show`). Exit 0: every run met --require; 1: some did not; 2: error.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "base/escape.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "replayer/report.h"
#include "replayer/verify_batch.h"
#include "store/store.h"
#include "store/verify_queue.h"

extern char** environ;

namespace trace::cli::cmd_verify {
namespace {

struct VerifyArgs {
  std::vector<std::string> runs;
  std::string label;
  std::string since;
  std::string model;
  size_t limit = 0;
  int workers = 1;
  EngineFlags engine;  // --device, --threads (cli/engine_flags.h)
  double lease_s = 30;
  bool enqueue = false;
  bool wait = false;
  std::string batch;
  std::string require = "bitwise";
  bool json = false;
  std::string html;
};

// "2026-12-01", "2026-12-01T10:00:00Z", or an age: "90m", "24h", "7d".
Result<int64_t> ParseSince(const std::string& text) {
  if (text.empty()) return int64_t{0};
  char unit = text.back();
  if (unit == 'm' || unit == 'h' || unit == 'd') {
    char* end = nullptr;
    const long long n = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() + text.size() - 1 && n >= 0 && n <= 100000) {
      const int64_t per = unit == 'm' ? 60 : unit == 'h' ? 3600 : 86400;
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      return (now - n * per) * 1'000'000'000;
    }
  }
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%d", &tm);
  if (rest != nullptr && *rest == 'T') rest = strptime(rest + 1, "%H:%M:%S", &tm);
  if (rest == nullptr || !(*rest == '\0' || (rest[0] == 'Z' && rest[1] == '\0'))) {
    return InvalidArgument("--since '" + EscapeForDisplay(text) +
                           "' is not a date (2026-12-01, 2026-12-01T10:00:00Z) or an age "
                           "(90m, 24h, 7d)");
  }
  return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000;
}

// Starts `n` local `trace worker` processes on the batch; their pids.
Result<std::vector<pid_t>> StartWorkers(const VerifyArgs& args, const std::string& batch,
                                        int threads) {
  std::vector<std::string> argv = {"/proc/self/exe",
                                   "--quiet",
                                   "--store",
                                   ResolveStorePath(),
                                   "worker",
                                   "--batch",
                                   batch,
                                   "--exit-when-empty",
                                   "--device",
                                   args.engine.device,
                                   "--threads",
                                   std::to_string(threads),
                                   "--lease",
                                   std::to_string(args.lease_s)};
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < args.workers; ++i) {
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargv.data(), environ);
    if (rc != 0) {
      return IOError("cannot start a worker process: " + std::string(std::strerror(rc)));
    }
    pids.push_back(pid);
  }
  return pids;
}

// Follows the batch until every job is done (or, with local workers, until they all
// exited), with a progress line and an ETA on a terminal.
Status FollowBatch(store::VerifyQueue& queue, const std::string& batch, std::vector<pid_t>* pids) {
  const bool show = isatty(STDERR_FILENO) && !Globals().quiet;
  const auto started = std::chrono::steady_clock::now();
  int failed_workers = 0;
  while (true) {
    TRACE_ASSIGN_OR_RETURN(store::BatchProgress p, queue.Progress(batch));
    if (show) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const double rate = secs > 0 ? static_cast<double>(p.done) / secs : 0;
      const double left = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0;
      std::fprintf(stderr, "\rverify: %lld/%lld runs, %lld in progress, ~%.0f s left   ",
                   static_cast<long long>(p.done), static_cast<long long>(p.total),
                   static_cast<long long>(p.claimed), left);
      std::fflush(stderr);
    }
    if (p.done >= p.total) break;
    if (pids != nullptr) {
      for (auto it = pids->begin(); it != pids->end();) {
        int status = 0;
        if (waitpid(*it, &status, WNOHANG) == *it) {
          if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) ++failed_workers;
          it = pids->erase(it);
        } else {
          ++it;
        }
      }
      if (pids->empty()) {
        if (show) std::fprintf(stderr, "\n");
        return Internal("the local workers stopped with " + std::to_string(p.total - p.done) +
                        " of " + std::to_string(p.total) + " runs left (" +
                        std::to_string(failed_workers) + " failed); `trace worker --batch " +
                        batch + "` goes on with them");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (show) std::fprintf(stderr, "\n");
  if (pids != nullptr) {
    for (pid_t pid : *pids) waitpid(pid, nullptr, 0);
  }
  return Status::Ok();
}

nlohmann::json VerdictJson(const store::Verification& v, const std::string& model) {
  return {{"run_id", v.run_id}, {"verdict", v.verdict}, {"first_divergence", v.first_divergence},
          {"model", model},     {"machine", v.machine}, {"build", v.build},
          {"worker", v.worker}, {"seconds", v.seconds}, {"verification_id", v.id}};
}

void PrintText(const std::string& batch, const replayer::VerifySummary& s,
               const std::vector<std::string>& recording) {
  std::printf("verify: batch %s, %lld runs", batch.c_str(), static_cast<long long>(s.runs));
  for (size_t i = 0; i < s.machines.size(); ++i) {
    std::printf("%s%s", i ? ", " : " on ", EscapeForDisplay(s.machines[i]).c_str());
  }
  std::printf("\n");
  for (const char* verdict : {"bitwise", "tokens", "recorded_only", "diverged", "error"}) {
    auto it = s.by_verdict.find(verdict);
    std::printf("  %-14s %lld\n", verdict,
                static_cast<long long>(it == s.by_verdict.end() ? 0 : it->second));
  }
  std::printf("by model:\n");
  for (const auto& [model, counts] : s.by_model) {
    std::string line;
    for (const auto& [verdict, n] : counts) {
      line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + verdict;
    }
    std::printf("  %s: %s\n", EscapeForDisplay(model.empty() ? "(none)" : model).c_str(),
                line.c_str());
  }
  if (!s.by_fingerprint_difference.empty()) {
    std::printf("differences from the recordings:\n");
    for (const auto& [field, n] : s.by_fingerprint_difference) {
      std::printf("  %s: %lld runs\n", EscapeForDisplay(field).c_str(), static_cast<long long>(n));
    }
  }
  for (const store::Verification* v : s.diverged) {
    std::printf("diverged %s: %s\n", v->run_id.c_str(),
                EscapeForDisplay(v->first_divergence).c_str());
  }
  for (const store::Verification* v : s.errors) {
    std::printf("error %s: %s\n", v->run_id.c_str(), EscapeForDisplay(v->first_divergence).c_str());
  }
  for (const std::string& id : recording) {
    std::printf("skipped %s: still being recorded\n", id.c_str());
  }
}

std::string RenderHtml(const std::string& batch, const std::vector<store::Verification>& rows,
                       const std::map<std::string, std::string>& model_of) {
  using replayer::HtmlEscape;
  std::string o =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>trace verify " +
      HtmlEscape(batch) +
      "</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
      ".bitwise{color:#060}.tokens{color:#660}.diverged,.error{color:#a00}</style></head><body>"
      "<h1>trace verify, batch " +
      HtmlEscape(batch) +
      "</h1><table id=\"verdicts\"><tr><th>run</th><th>verdict</th><th>model</th>"
      "<th>machine</th><th>first divergence / error</th><th>seconds</th></tr>";
  for (const store::Verification& v : rows) {
    auto m = model_of.find(v.run_id);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", v.seconds);
    o += "<tr class=\"" + HtmlEscape(v.verdict) + "\"><td>" + HtmlEscape(v.run_id) + "</td><td>" +
         HtmlEscape(v.verdict) + "</td><td>" +
         HtmlEscape(m == model_of.end() ? std::string() : m->second) + "</td><td>" +
         HtmlEscape(v.machine) + "</td><td>" + HtmlEscape(v.first_divergence) + "</td><td>" + secs +
         "</td></tr>";
  }
  return o + "</table></body></html>\n";
}

int Run(const VerifyArgs& args) {
  if (args.require != "bitwise" && args.require != "tokens") {
    return ReportError(
        InvalidArgument("--require '" + args.require + "' is not one of bitwise, tokens"));
  }
  if (args.workers < 1 || args.workers > 256) {
    return ReportError(InvalidArgument("--workers must be 1..256"));
  }
  if (!(args.lease_s >= 1 && args.lease_s <= 86400)) {
    return ReportError(InvalidArgument("--lease must be 1..86400 seconds"));
  }
  if (!args.batch.empty() && (args.enqueue || !args.runs.empty() || !args.label.empty() ||
                              !args.since.empty() || !args.model.empty() || args.limit)) {
    return ReportError(
        InvalidArgument("--batch reports on a batch made earlier: it takes no "
                        "run selection and no --enqueue"));
  }
  Result<EngineSetup> setup = ResolveEngineFlags(args.engine, EngineUse::kVerify);
  if (!setup.ok()) return ReportError(setup.status());
  auto since = ParseSince(args.since);
  if (!since.ok()) return ReportError(since.status());
  auto store = store::Store::Open(ResolveStorePath(), store::StoreOptions{});
  if (!store.ok()) return ReportError(store.status());
  auto queue = (*store)->OpenVerifyQueue();
  if (!queue.ok()) return ReportError(queue.status());

  std::string batch = args.batch;
  std::vector<std::string> recording;
  std::vector<pid_t> pids;
  const bool local = batch.empty() && !args.enqueue;
  if (batch.empty()) {
    replayer::RunSelection sel;
    sel.runs = args.runs;
    sel.label = args.label;
    sel.since_ns = *since;
    sel.model = args.model;
    sel.limit = args.limit;
    auto selected = replayer::SelectRunsToVerify(**store, sel);
    if (!selected.ok()) return ReportError(selected.status());
    recording = selected->recording;
    if (selected->jobs.empty()) {
      return ReportError(
          NotFound("no run to verify in " + (*store)->path() + " matches the selection"));
    }
    std::string description = std::to_string(selected->jobs.size()) + " runs";
    auto made = (*queue)->Enqueue(selected->jobs, description);
    if (!made.ok()) return ReportError(made.status());
    batch = *made;
    if (args.enqueue) {
      if (args.json && !args.wait) {
        PrintJson(std::cout, nlohmann::json{{"batch", batch}, {"jobs", selected->jobs.size()}}, 2);
      } else if (!Globals().quiet) {
        std::fprintf(stderr,
                     "verify: batch %s: %zu runs queued; `trace worker --batch %s` "
                     "replays them\n",
                     batch.c_str(), selected->jobs.size(), batch.c_str());
      }
      if (!args.json && !args.wait) std::printf("%s\n", batch.c_str());
      if (!args.wait) return kExitOk;
    }
  }
  if (local) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int threads =
        setup->engine.threads > 0 ? setup->engine.threads : std::max(1, cores / args.workers);
    auto started = StartWorkers(args, batch, threads);
    if (!started.ok()) return ReportError(started.status());
    pids = *started;
  }
  if (local || args.wait || !args.batch.empty()) {
    const bool follow = local || args.wait;
    if (follow) {
      Status st = FollowBatch(**queue, batch, local ? &pids : nullptr);
      if (!st.ok()) return ReportError(st);
    }
  }
  auto progress = (*queue)->Progress(batch);
  if (!progress.ok()) return ReportError(progress.status());
  auto rows = (*queue)->BatchResults(batch);
  if (!rows.ok()) return ReportError(rows.status());
  std::map<std::string, std::string> model_of;
  for (const store::Verification& v : *rows) {
    auto header = (*store)->LoadHeader(v.run_id);
    if (header.ok()) model_of[v.run_id] = header->model().model_dir();
  }
  const replayer::VerifySummary summary = replayer::Summarize(*rows, model_of);
  if (!args.html.empty()) {
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << RenderHtml(batch, *rows, model_of);
    if (!out.good()) return ReportError(IOError("cannot write --html file " + args.html));
  }
  if (args.json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const store::Verification& v : *rows) runs.push_back(VerdictJson(v, model_of[v.run_id]));
    nlohmann::json by_model = nlohmann::json::object();
    for (const auto& [model, counts] : summary.by_model) by_model[model] = counts;
    PrintJson(std::cout,
              nlohmann::json{{"batch", batch},
                             {"store", (*store)->path()},
                             {"jobs", progress->total},
                             {"done", progress->done},
                             {"reclaimed", progress->reclaimed},
                             {"runs", runs},
                             {"summary",
                              {{"by_verdict", summary.by_verdict},
                               {"by_model", by_model},
                               {"by_fingerprint_difference", summary.by_fingerprint_difference},
                               {"machines", summary.machines}}},
                             {"skipped_recording", recording}},
              2);
  } else {
    PrintText(batch, summary, recording);
    if (progress->done < progress->total) {
      std::printf("%lld of %lld runs not verified yet\n",
                  static_cast<long long>(progress->total - progress->done),
                  static_cast<long long>(progress->total));
    }
  }
  bool all_met = progress->done >= progress->total;
  for (const store::Verification& v : *rows) {
    all_met = all_met && replayer::MeetsRequirement(v.verdict, args.require);
  }
  return all_met ? kExitOk : kExitMismatch;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify",
      "Replay recorded runs on this machine and build and report which still reproduce.\n"
      "After a change of engine build, driver, GPU, model file or machine: every selected\n"
      "run is replayed (by --workers local processes, or with --enqueue by `trace worker`s\n"
      "anywhere that share the store) and its verdict (bitwise, tokens, diverged,\n"
      "recorded_only, error) is kept in the store for `trace ls` and `trace show`.\n"
      "Exit 0: every run met --require; 1: some did not (or are not done); 2: error.");
  cmd->add_option("runs", args->runs, "Run ids or unique prefixes (default: every run)")
      ->type_name("RUN");
  cmd->add_option("--label", args->label, "Only runs with this label");
  cmd->add_option("--since", args->since,
                  "Only runs started since a date (2026-12-01, 2026-12-01T10:00:00Z) or an "
                  "age (24h, 7d)")
      ->type_name("WHEN");
  cmd->add_option("--model", args->model,
                  "Only runs of this model (the folder they recorded, or its name)")
      ->type_name("DIR");
  cmd->add_option("--limit", args->limit, "Only the newest N runs of the selection")
      ->type_name("N");
  cmd->add_option("--workers", args->workers,
                  "Local worker processes (default 1; each gets cores/N threads unless "
                  "--threads)")
      ->type_name("N");
  AddEngineFlags(cmd, EngineUse::kVerify, &args->engine);
  cmd->add_option("--lease", args->lease_s,
                  "Seconds a worker's claim lasts without renewal (default 30)")
      ->type_name("SECONDS");
  cmd->add_flag("--enqueue", args->enqueue,
                "Only queue the runs as a batch and print its id: `trace worker` processes\n"
                "(on any machine sharing the store) replay them");
  cmd->add_flag("--wait", args->wait,
                "With --enqueue or --batch: follow the batch until every run is verified");
  cmd->add_option("--batch", args->batch, "Report on (with --wait: follow) a batch made earlier")
      ->type_name("ID");
  cmd->add_option("--require", args->require,
                  "Verdict every run must reach for exit 0: bitwise (default) | tokens");
  cmd->add_flag("--json", args->json, "Print the verdicts and the summary as JSON");
  cmd->add_option("--html", args->html, "Also write the verdicts as a self-contained HTML page")
      ->type_name("FILE");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(41, Setup);

}  // namespace
}  // namespace trace::cli::cmd_verify
