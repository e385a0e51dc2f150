// `trace diff A B`: what differs between two recorded runs, where it first differs, and
// which of the eight sources of variation changed. Exit 0 when nothing differs, 1 when
// something does, 2 on error (docs/replay.md).
#include <fstream>
#include <iostream>

#include "base/json_print.h"
#include "cli/command.h"
#include "replayer/diff.h"
#include "store/store.h"
#include "ui/snapshot.h"

namespace trace::cli::cmd_diff {
namespace {

struct DiffArgs {
  std::string run_a;
  std::string run_b;
  int call = 0;
  bool json = false;
  std::string html;
};

int Run(const DiffArgs& args) {
  if (args.call < 0) {
    return ReportError(InvalidArgument("--call " + std::to_string(args.call) +
                                       " must be a 1-based model call number"));
  }
  store::StoreOptions sopts;
  sopts.create_if_missing = false;
  sopts.read_only = true;
  auto store = store::Store::Open(ResolveStorePath(), sopts);
  if (!store.ok()) return ReportError(store.status());
  replayer::DiffOptions options;
  options.call = args.call;
  auto diff = replayer::DiffRuns(**store, args.run_a, args.run_b, options);
  if (!diff.ok()) return ReportError(diff.status());
  if (!args.html.empty()) {
    Result<std::string> page = ui::DiffPage(store->get(), diff->run_a, diff->run_b);
    if (!page.ok()) return ReportError(page.status());
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << *page;
    if (!out.good()) return ReportError(IOError("cannot write --html file " + args.html));
  }
  if (args.json) {
    PrintJson(std::cout, replayer::DiffJson(*diff), 2);
  } else {
    std::cout << replayer::RenderDiffText(*diff);
  }
  return diff->identical() ? kExitOk : kExitMismatch;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand(
      "diff",
      "What differs between two runs, where it first differs, and which sources changed.\n"
      "Exit 0: no difference; 1: the runs differ; 2: error.");
  cmd->add_option("run_a", args->run_a, "Run A: id or unique prefix")->required();
  cmd->add_option("run_b", args->run_b, "Run B: id or unique prefix")->required();
  cmd->add_option("--call", args->call, "Show model call K (1-based) token by token");
  cmd->add_flag("--json", args->json, "Print the diff as JSON");
  cmd->add_option("--html", args->html,
                  "Also write the diff as trace ui shows it, a self-contained HTML page, to FILE");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(45, Setup);

}  // namespace
}  // namespace trace::cli::cmd_diff
