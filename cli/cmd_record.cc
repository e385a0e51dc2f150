// `trace record [--model DIR] [--label L] [--seed N] [--device D] -- CMD ARGS...`: serve the
// model on 127.0.0.1, run the agent against it, record everything into one run, and exit
// with the agent's status (docs/recorder.md).
#include <iostream>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/server_flags.h"
#include "recorder/session.h"

namespace trace::cli::cmd_record {
namespace {

struct RecordArgs {
  EngineFlags engine;
  HttpFlags http;
  std::string label;
  std::optional<uint64_t> seed;
  int port = 0;
  std::vector<std::string> command;
};

int Run(const RecordArgs& args, const std::vector<std::string>& trace_argv) {
  auto options = SessionFromEngineFlags(args.engine, EngineUse::kRecord);
  if (!options.ok()) return ReportError(options.status());
  options->label = args.label;
  options->seed = args.seed;
  options->port = args.port;
  options->trace_argv = trace_argv;
  Result<recorder::HttpLimits> limits = HttpLimitsFrom(args.http);
  if (!limits.ok()) return ReportError(limits.status());
  options->http_limits = *limits;
  auto outcome = recorder::RecordCommand(*options, args.command);
  if (!outcome.ok()) return ReportError(outcome.status().WithContext("record"));
  if (!Globals().quiet) std::cerr << "trace: " << recorder::SummaryParagraph(*outcome) << "\n";
  return outcome->exit_status;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RecordArgs>();
  auto* cmd = app.add_subcommand(
      "record",
      "Serve the model on 127.0.0.1, run CMD against it (OPENAI_BASE_URL, OPENAI_API_KEY,\n"
      "ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, TRACE_RUN_ID, TRACE_ENDPOINT set) and record the\n"
      "run. Serves OpenAI Chat Completions, Completions and Responses and Anthropic Messages.\n"
      "Exits with CMD's status.");
  cmd->add_option("--label", args->label, "A label stored with the run");
  cmd->add_option("--seed", args->seed, "Run seed for calls without a request seed");
  AddEngineFlags(cmd, EngineUse::kRecord, &args->engine);
  cmd->add_option("--port", args->port, "Port on 127.0.0.1 (0: a free one)");
  AddHttpFlags(cmd, &args->http);
  cmd->add_option("command", args->command, "The agent command, after --")
      ->required()
      ->expected(-1);
  cmd->callback([args, exit_code] { *exit_code = Run(*args, recorder::OwnCommandLine()); });
}

TRACE_REGISTER_COMMAND(10, Setup);

}  // namespace
}  // namespace trace::cli::cmd_record
