// `trace rm RUN...`: delete runs (and the stored blobs no other run uses).
#include <iostream>

#include "base/escape.h"
#include "cli/command.h"
#include "store/store.h"

namespace trace::cli::cmd_rm {
namespace {

struct Options {
  std::vector<std::string> ids;
  bool force = false;
};

int Run(const Options& options) {
  const std::vector<std::string>& ids = options.ids;
  SilenceProtobufLog();
  store::StoreOptions open;
  open.create_if_missing = false;
  auto st = store::Store::Open(ResolveStorePath(), open);
  if (!st.ok()) return ReportError(st.status());
  // Resolve every id first: one bad id deletes nothing.
  std::vector<std::string> resolved;
  int failures = 0;
  for (const auto& id : ids) {
    auto full = (*st)->ResolveRunId(id);
    if (!full.ok()) {
      ReportError(full.status());
      ++failures;
    } else {
      resolved.push_back(*full);
    }
  }
  if (failures) return kExitError;
  store::DeleteOptions del;
  del.force = options.force;
  // Every run must be deletable (not still being recorded) before any is deleted.
  del.dry_run = true;
  for (const auto& id : resolved) {
    if (Status s = (*st)->DeleteRun(id, del); !s.ok()) {
      ReportError(s);
      ++failures;
    }
  }
  if (failures) return kExitError;
  del.dry_run = false;
  for (const auto& id : resolved) {
    Status s = (*st)->DeleteRun(id, del);
    // Listed twice on the command line: the second delete finds nothing, which is fine.
    if (!s.ok() && s.code() != StatusCode::kNotFound) return ReportError(s);
    if (s.ok() && !Globals().quiet) std::cout << "removed " << EscapeForDisplay(id) << "\n";
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "rm",
      "Delete recorded runs. A run still being recorded (no RunEnd, its recorder alive or\n"
      "not checkable from this host) is refused unless --force");
  cmd->add_option("runs", options->ids, "Run ids or unique prefixes")->required()->type_name("RUN");
  cmd->add_flag("--force", options->force,
                "Also delete runs that may still be being recorded (the recorder then fails)");
  cmd->callback([options, exit_code] { *exit_code = Run(*options); });
}

TRACE_REGISTER_COMMAND(60, Setup);

}  // namespace
}  // namespace trace::cli::cmd_rm
