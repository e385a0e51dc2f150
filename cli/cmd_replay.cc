// `trace replay RUN`: re-executes every recorded model call and reports the level reached
// (bitwise / tokens / diverged) and the first divergent token. Exit 0 when the run
// reproduced at the level asked (--require), 1 when not, 2 on error (docs/replay.md).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "base/json_print.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/replay_constraints.h"
#include "replayer/replayer.h"
#include "replayer/report.h"
#include "store/store.h"
#include "ui/snapshot.h"

namespace trace::cli::cmd_replay {
namespace {

struct ReplayArgs {
  std::string run;
  EngineFlags engine;  // --model, --device, --numerics, --threads (cli/engine_flags.h)
  int batch = 1;
  std::string calls;
  std::string require = "bitwise";
  bool json = false;
  std::string html;
};

void PrintProgress(const replayer::ReplayProgress& p) {
  double rate = p.seconds > 0 ? static_cast<double>(p.tokens_done) / p.seconds : 0.0;
  double left = rate > 0 ? static_cast<double>(p.tokens_total - p.tokens_done) / rate : 0.0;
  std::fprintf(stderr, "\rreplay: call %d/%d, %lld/%lld tokens, %.0f tok/s, ~%.0f s left   ",
               p.calls_done, p.calls_total, static_cast<long long>(p.tokens_done),
               static_cast<long long>(p.tokens_total), rate, left);
  if (p.calls_done == p.calls_total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int Run(const ReplayArgs& args) {
  if (args.require != "bitwise" && args.require != "tokens") {
    return ReportError(
        InvalidArgument("--require '" + args.require + "' is not one of bitwise, tokens"));
  }
  if (args.batch < 1 || args.batch > 256) {
    return ReportError(
        InvalidArgument("--batch " + std::to_string(args.batch) + " is outside 1..256"));
  }
  Result<EngineSetup> setup = ResolveEngineFlags(args.engine, EngineUse::kReplay);
  if (!setup.ok()) return ReportError(setup.status());
  replayer::ReplayOptions options;
  options.device = setup->engine.device;
  options.numerics = args.engine.numerics;  // checked; empty: the recorded mode
  options.model_dir = setup->model_dir;
  options.batch = args.batch;
  options.threads = setup->engine.threads;
  if (!args.calls.empty()) {
    auto calls = replayer::ParseCallList(args.calls);
    if (!calls.ok()) return ReportError(calls.status());
    options.calls = *calls;
  }
  options.constraints = MakeConstraintFactory();
  if (isatty(STDERR_FILENO) && !Globals().quiet) options.progress = PrintProgress;

  store::StoreOptions sopts;
  sopts.create_if_missing = false;
  sopts.read_only = true;
  auto store = store::Store::Open(ResolveStorePath(), sopts);
  if (!store.ok()) return ReportError(store.status());
  auto report = replayer::ReplayRun(**store, args.run, options);
  if (!report.ok()) return ReportError(report.status());

  if (!args.html.empty()) {
    Result<std::string> page =
        ui::ReplayPage(store->get(), report->run_id, replayer::ReplayJson(*report));
    if (!page.ok()) return ReportError(page.status());
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << *page;
    if (!out.good()) return ReportError(IOError("cannot write --html file " + args.html));
  }
  if (args.json) {
    PrintJson(std::cout, replayer::ReplayJson(*report), 2);
  } else {
    std::cout << replayer::RenderReplayText(*report);
  }
  replayer::Level required =
      args.require == "tokens" ? replayer::Level::kTokens : replayer::Level::kBitwise;
  return report->level <= required ? kExitOk : kExitMismatch;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay",
      "Re-execute every model call of a recorded run and report the first divergent token.\n"
      "Exit 0: reproduced at the --require level; 1: not; 2: error.");
  cmd->add_option("run", args->run, "Run id or unique prefix")->required();
  AddEngineFlags(cmd, EngineUse::kReplay, &args->engine);
  cmd->add_option("--batch", args->batch,
                  "Replay each call alongside N-1 random companion sequences (default 1)");
  cmd->add_option("--calls", args->calls, "Model calls to replay, 1-based: 1,3,5-7");
  cmd->add_option("--require", args->require, "Level for exit 0: bitwise (default) | tokens");
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  cmd->add_option("--html", args->html,
                  "Also write the run and this replay as trace ui shows them, a "
                  "self-contained\nHTML page, to FILE");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(40, Setup);

}  // namespace
}  // namespace trace::cli::cmd_replay
