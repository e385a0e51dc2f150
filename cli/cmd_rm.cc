// `trace rm RUN...`: delete runs (and the stored blobs no other run uses).
#include <iostream>

#include <google/protobuf/stubs/logging.h>

#include "cli/command.h"
#include "store/store.h"

namespace trace::cli {
namespace {

int Run(const std::vector<std::string>& ids) {
  // A damaged row is reported once, by us; not also by protobuf's logger.
  google::protobuf::SetLogHandler(nullptr);
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
  for (const auto& id : resolved) {
    Status s = (*st)->DeleteRun(id);
    // Listed twice on the command line: the second delete finds nothing, which is fine.
    if (!s.ok() && s.code() != StatusCode::kNotFound) return ReportError(s);
    if (s.ok() && !Globals().quiet) std::cout << "removed " << id << "\n";
  }
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("rm", "Delete recorded runs");
  cmd->add_option("runs", *ids, "Run ids or unique prefixes")->required()->type_name("RUN");
  cmd->callback([ids, exit_code] { *exit_code = Run(*ids); });
}

TRACE_REGISTER_COMMAND(60, Setup);

}  // namespace
}  // namespace trace::cli
