// `trace ls`: one line per recorded run, newest first.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/json_print.h"
#include "base/wall_clock.h"
#include "cli/command.h"
#include "store/store.h"
#include "store/verify_queue.h"
#include "ui/run_json.h"

namespace trace::cli::cmd_ls {
namespace {

std::string FormatTime(int64_t ns) {
  return UtcTimeText(ns);
}

std::string FormatDuration(int64_t ns) {
  char buf[32];
  double s = static_cast<double>(ns) / 1e9;
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  static_cast<int>(s) % 3600 / 60);
  }
  return buf;
}

std::string FormatBytes(int64_t b) {
  char buf[32];
  if (b < 1024) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  } else if (b < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  }
  return buf;
}

// After the listing: one error line per run whose summary row failed its checksum.
int ReportDamaged(const std::vector<store::RunSummary>& runs) {
  std::fflush(stdout);
  int damaged = 0;
  for (const auto& r : runs) {
    if (r.problem.empty()) continue;
    ReportError(Corruption("run " + r.run_id + " in " + ResolveStorePath() + ": " + r.problem));
    ++damaged;
  }
  return damaged ? kExitError : kExitOk;
}

struct Options {
  bool json = false;
  size_t limit = 0;
};

int Run(const Options& options) {
  SilenceProtobufLog();
  store::StoreOptions open;
  open.read_only = true;
  auto st = store::Store::Open(ResolveStorePath(), open);
  if (!st.ok()) return ReportError(st.status());
  auto runs = (*st)->ListRuns(options.limit);
  if (!runs.ok()) return ReportError(runs.status());
  // The newest verdict of `trace verify` per run and machine kind (none before any verify).
  std::map<std::string, std::vector<store::Verification>> verdicts;
  {
    auto queue = (*st)->OpenVerifyQueue();
    if (!queue.ok()) return ReportError(queue.status());
    auto latest = (*queue)->LatestVerdicts();
    if (!latest.ok()) return ReportError(latest.status());
    verdicts = std::move(*latest);
  }
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *runs) {
      out.push_back(ui::RunSummaryJson(r));
      nlohmann::json& row = out.back();
      row["verifications"] = nlohmann::json::array();
      if (auto v = verdicts.find(r.run_id); v != verdicts.end()) {
        for (const store::Verification& x : v->second) {
          row["verifications"].push_back(ui::VerificationJson(x));
        }
      }
    }
    PrintJson(std::cout, out, 2);
    return ReportDamaged(*runs);
  }
  // A VERIFIED column once `trace verify` has run on this store: the newest verdict per
  // machine kind, comma-separated in machine order.
  const bool verified_column = !verdicts.empty();
  std::printf("%-26s  %-20s  %8s  %5s  %7s  %-10s  %9s  ", "RUN", "STARTED", "DURATION", "CALLS",
              "TOKENS", "STATUS", "SIZE");
  if (verified_column) std::printf("%-13s  ", "VERIFIED");
  std::printf("%s\n", "COMMAND");
  for (const auto& r : *runs) {
    std::string status(store::RunStatusName(r.status));
    if (!r.problem.empty()) {
      status = "damaged";
    } else if (r.status == store::RunStatus::kComplete && r.exit_code != 0) {
      status += "(" + std::to_string(r.exit_code) + ")";
    } else if (r.status == store::RunStatus::kCrashed && r.signal != 0) {
      status += "(" + std::to_string(r.signal) + ")";
    }
    // A re-run names its parent first: "rerun of 01JD...: python3 agent.py".
    std::string shown = r.command;
    if (!r.parent_run_id.empty()) {
      shown = (r.rerun_mode == "fork" ? "fork of " : "rerun of ") + r.parent_run_id.substr(0, 10) +
              (r.diverged_at_call ? " (diverged at call " + std::to_string(r.diverged_at_call) + ")"
                                  : std::string()) +
              ": " + r.command;
    }
    const std::string command = EscapeForDisplay(shown, 80);  // one table row, always
    std::printf("%-26s  %-20s  %8s  %5lld  %7lld  %-10s  %9s  ",
                EscapeForDisplay(r.run_id, 40).c_str(), FormatTime(r.start_time_ns).c_str(),
                FormatDuration(ui::RunDurationNs(r)).c_str(), static_cast<long long>(r.model_calls),
                static_cast<long long>(r.sampled_tokens), status.c_str(),
                FormatBytes(r.stored_bytes).c_str());
    if (verified_column) {
      std::string shown_verdicts = "-";
      if (auto v = verdicts.find(r.run_id); v != verdicts.end()) {
        shown_verdicts.clear();
        for (const store::Verification& x : v->second) {
          shown_verdicts += (shown_verdicts.empty() ? "" : ",") + x.verdict;
        }
      }
      std::printf("%-13s  ", EscapeForDisplay(shown_verdicts, 40).c_str());
    }
    std::printf("%s\n", command.c_str());
  }
  return ReportDamaged(*runs);
}

void Setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("ls", "List recorded runs, newest first");
  cmd->add_flag("--json", options->json, "Print a JSON array instead of a table");
  cmd->add_option("-n,--limit", options->limit, "Show at most N runs (0: all)")->type_name("N");
  cmd->callback([options, exit_code] { *exit_code = Run(*options); });
}

TRACE_REGISTER_COMMAND(30, Setup);

}  // namespace
}  // namespace trace::cli::cmd_ls
