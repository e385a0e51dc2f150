// `trace rerun RUN [--live-from K] [--strict] [--json] -- CMD ARGS...`: re-run the agent's
// own code against the recording of RUN (docs/rerun.md). Presentation only: the work is
// recorder/rerun.h.
#include <iostream>

#include <nlohmann/json.hpp>

#include "base/json_print.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/server_flags.h"
#include "recorder/rerun.h"

namespace trace::cli::cmd_rerun {
namespace {

struct RerunArgs {
  EngineFlags engine;
  HttpFlags http;
  std::string run;
  int live_from = 0;
  bool strict = false;
  std::string tools = "live";
  int edit_call = 0;
  std::string edit_file;
  std::string label;
  std::optional<uint64_t> seed;
  int port = 0;
  bool json = false;
  std::vector<std::string> command;
};

int Run(const RerunArgs& args, const std::vector<std::string>& trace_argv) {
  SilenceProtobufLog();
  auto session = SessionFromEngineFlags(args.engine, EngineUse::kRerun);
  if (!session.ok()) return ReportError(session.status());
  if (args.tools != "live" && args.tools != "recorded-only") {
    return ReportError(
        InvalidArgument("--tools must be live or recorded-only, got '" + args.tools + "'"));
  }
  recorder::RerunOptions o;
  o.session = *session;
  o.session.label = args.label;
  o.session.seed = args.seed;
  o.session.port = args.port;
  o.session.trace_argv = trace_argv;
  Result<recorder::HttpLimits> limits = HttpLimitsFrom(args.http);
  if (!limits.ok()) return ReportError(limits.status());
  o.session.http_limits = *limits;
  o.run = args.run;
  o.live_from = args.live_from;
  o.strict = args.strict;
  o.tools_recorded_only = args.tools == "recorded-only";
  o.edit_call = args.edit_call;
  o.edit_body_path = args.edit_file;
  auto outcome = recorder::RerunCommand(o, args.command);
  if (!outcome.ok()) return ReportError(outcome.status().WithContext("rerun"));
  if (args.json) {
    PrintJson(std::cout, recorder::RerunReportJson(*outcome), 2);
  } else if (!Globals().quiet || outcome->exit_code != 0) {
    std::cerr << "trace: " << recorder::RerunReportText(*outcome);
  }
  return outcome->exit_code;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RerunArgs>();
  auto* cmd = app.add_subcommand(
      "rerun",
      "Re-run the agent's own code against the recording of RUN (a cassette) and record a new\n"
      "run linked to it. Each model call is matched to a recorded call with the same request\n"
      "(conversation, tools, sampling parameters; in recorded order among equal requests)\n"
      "and answered with the recorded response in the API and streaming shape the agent asks\n"
      "for, without running a model; clock reads and tool lookups (trace_client.tool) return\n"
      "the recorded values, so tools with side effects are not run again. At the first call\n"
      "that differs it reports where (call K, which message and field, a diff of the prompts)\n"
      "and goes live: that call and later ones run on the model (--model, the recorded one,\n"
      "or --upstream), tools run for real. Exit status: 0 the agent followed the recording to\n"
      "its end, 1 it diverged (or --strict stopped it), 2 error.\n"
      "Examples:\n"
      "  trace rerun 01JD -- python3 agent.py            # did my fix change the path?\n"
      "  trace rerun 01JD --strict -- python3 agent.py   # CI: fail at the first difference\n"
      "  trace rerun 01JD --live-from 3 --seed 7 -- python3 agent.py   # fork at call 3");
  cmd->add_option("run", args->run, "The recorded run: an id or a unique prefix")->required();
  cmd->add_option("--live-from", args->live_from,
                  "Fork: calls before K answer from the recording, K and later run live")
      ->type_name("K");
  cmd->add_flag("--strict", args->strict,
                "Stop the agent at the first difference and exit 1 instead of going live");
  cmd->add_option("--tools", args->tools,
                  "live (default: tools run for real once the re-run is live) | recorded-only\n"
                  "(a tool call without a recorded result is an error, never run)")
      ->type_name("MODE");
  cmd->add_option("--edit-call", args->edit_call,
                  "Fork at call K and send it with the request body in --file instead")
      ->type_name("K");
  cmd->add_option("--file", args->edit_file,
                  "With --edit-call: the JSON request body (in the API the agent uses)")
      ->type_name("BODY.json");
  cmd->add_option("--seed", args->seed,
                  "Run seed for live calls without a request seed (default: the recording's)");
  cmd->add_option("--label", args->label, "A label stored with the new run");
  cmd->add_flag("--json", args->json, "Print the report as JSON on stdout");
  AddEngineFlags(cmd, EngineUse::kRerun, &args->engine);
  cmd->add_option("--port", args->port, "Port on 127.0.0.1 (0: a free one)");
  AddHttpFlags(cmd, &args->http);
  cmd->add_option("command", args->command,
                  "The agent command, after -- (default: the recorded command)")
      ->expected(-1);
  cmd->callback([args, exit_code] { *exit_code = Run(*args, recorder::OwnCommandLine()); });
}

TRACE_REGISTER_COMMAND(42, Setup);

}  // namespace
}  // namespace trace::cli::cmd_rerun
