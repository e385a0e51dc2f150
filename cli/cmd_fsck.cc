// `trace fsck [RUN] [--json] [--quick]`: check a store (or one run) and say what can be
// salvaged. Read-only: changes nothing, so it may run while a run is being recorded.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "store/fsck.h"

namespace trace::cli::cmd_fsck {
namespace {

struct Options {
  std::string run;
  bool json = false;
  bool quick = false;
};

nlohmann::json ReportJson(const store::FsckReport& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : r.runs) {
    runs.push_back({{"run_id", run.run_id},
                    {"ok", run.ok()},
                    {"status", run.status},
                    {"counted_events", run.counted_events},
                    {"rows", run.rows},
                    {"readable_events", run.readable_events},
                    {"readable_seqs", run.readable_seqs},
                    {"header_ok", run.header_ok},
                    {"problems", run.problems},
                    {"salvage", run.salvage}});
  }
  return {{"store", r.path},
          {"clean", r.clean()},
          {"schema_version", r.schema_version},
          {"file_bytes", r.file_bytes},
          {"sqlite_problems", r.sqlite_problems},
          {"events_checked", r.events_checked},
          {"blobs_checked", r.blobs_checked},
          {"blob_problems", r.blob_problems},
          {"unreferenced_blobs", r.unreferenced_blobs},
          {"unreferenced_blob_bytes", r.unreferenced_blob_bytes},
          {"orphan_problems", r.orphan_problems},
          {"damaged_runs", r.damaged_runs()},
          {"runs", runs},
          {"notes", r.notes},
          {"salvage", r.salvage}};
}

// Problems quote what they found in the store (run ids, statuses, damaged rows' contents),
// and a store may come from anywhere (trace pull): every string escaped (base/escape.h).
void PrintText(const store::FsckReport& r) {
  const auto shown = [](const std::string& s) { return EscapeForDisplay(s, kNoLimit); };
  std::printf("store %s: schema %d, %zu runs, %lld events, %lld blobs checked, %.1f KiB\n",
              EscapePathForDisplay(r.path).c_str(), r.schema_version, r.runs.size(),
              static_cast<long long>(r.events_checked), static_cast<long long>(r.blobs_checked),
              static_cast<double>(r.file_bytes) / 1024.0);
  for (const auto& n : r.notes) std::printf("note: %s\n", shown(n).c_str());
  if (r.sqlite_problems.empty()) {
    std::printf("sqlite integrity: ok\n");
  } else {
    std::printf("sqlite integrity: DAMAGED\n");
    for (const auto& p : r.sqlite_problems) std::printf("  %s\n", shown(p).c_str());
    std::printf("  salvage: %s\n", shown(r.salvage).c_str());
  }
  for (const auto& run : r.runs) {
    if (run.ok()) continue;
    std::printf("run %s (%s): DAMAGED\n", shown(run.run_id).c_str(), shown(run.status).c_str());
    for (const auto& p : run.problems) std::printf("  %s\n", shown(p).c_str());
    std::printf("  salvage: %s\n", shown(run.salvage).c_str());
  }
  if (!r.blob_problems.empty()) {
    std::printf("blobs: DAMAGED\n");
    for (const auto& p : r.blob_problems) std::printf("  %s\n", shown(p).c_str());
  }
  for (const auto& p : r.orphan_problems) std::printf("orphan rows: %s\n", shown(p).c_str());
  if (r.unreferenced_blobs > 0) {
    std::printf("note: %lld blobs (%.1f KiB) are used by no run (freed by the next `trace rm`)\n",
                static_cast<long long>(r.unreferenced_blobs),
                static_cast<double>(r.unreferenced_blob_bytes) / 1024.0);
  }
  if (r.clean()) {
    std::printf("result: clean (%zu of %zu runs ok)\n", r.runs.size(), r.runs.size());
  } else {
    std::printf("result: DAMAGED (%d of %zu runs damaged%s)\n", r.damaged_runs(), r.runs.size(),
                r.sqlite_problems.empty() && r.blob_problems.empty() && r.orphan_problems.empty()
                    ? ""
                    : "; the store's structure too");
  }
}

int Run(const Options& options) {
  SilenceProtobufLog();
  store::FsckOptions fo;
  fo.run = options.run;
  fo.full_sqlite_check = !options.quick;
  auto report = store::CheckStore(ResolveStorePath(), fo);
  if (!report.ok()) return ReportError(report.status());
  if (options.json) {
    PrintJson(std::cout, ReportJson(*report), 2);
  } else {
    PrintText(*report);
  }
  return report->clean() ? kExitOk : kExitMismatch;
}

void Setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "fsck",
      "Check the store (or one run): SQLite's integrity check, every row's checksum, that each\n"
      "run's events add up to its count and RunEnd, every blob's SHA-256; and for what is\n"
      "damaged, what can be salvaged. Read-only. Exits 0 when clean, 1 when damage was\n"
      "found, 2 when the store cannot be opened");
  cmd->add_option("run", options->run, "Check only this run (id or unique prefix)")
      ->type_name("RUN");
  cmd->add_flag("--json", options->json, "Print the report as JSON");
  cmd->add_flag("--quick", options->quick,
                "SQLite's quick_check instead of the full integrity_check (large stores)");
  cmd->callback([options, exit_code] { *exit_code = Run(*options); });
}

TRACE_REGISTER_COMMAND(65, Setup);

}  // namespace
}  // namespace trace::cli::cmd_fsck
