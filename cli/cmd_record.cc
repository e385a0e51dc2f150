// `trace record [--model DIR] [--label L] [--seed N] [--device D] -- CMD ARGS...`: serve the
// model on 127.0.0.1, run the agent against it, record everything into one run, and exit
// with the agent's status (docs/recorder.md).
#include <iostream>

#include "cli/command.h"
#include "cli/server_flags.h"
#include "recorder/session.h"

namespace trace::cli {
namespace {

struct EngineFlags {
  std::string model_dir;
  std::string upstream;
  std::string device = "cpu";
  std::string numerics = "canonical";
  int threads = 0;
  int max_batch = 64;
  bool layer_digests = false;
  std::vector<std::string> served_model_names;
};

struct RecordArgs {
  EngineFlags engine;
  HttpFlags http;
  std::string label;
  std::optional<uint64_t> seed;
  int port = 0;
  std::vector<std::string> command;
};

Result<recorder::SessionOptions> SessionFrom(const EngineFlags& f) {
  recorder::SessionOptions o;
  o.model_dir = f.model_dir;
  o.upstream = f.upstream;
  o.store_path = ResolveStorePath();
  o.engine.device = f.device;
  o.engine.threads = f.threads;
  if (!kernels::ParseNumerics(f.numerics, &o.engine.numerics)) {
    return InvalidArgument("--numerics must be canonical or fast, got '" + f.numerics + "'");
  }
  if (f.max_batch < 1) return InvalidArgument("--max-batch must be at least 1");
  o.scheduler.max_active_sequences = f.max_batch;
  o.scheduler.layer_digests = f.layer_digests;
  o.served_model_names = f.served_model_names;
  if (Globals().quiet) o.log = [](const std::string&) {};
  return o;
}

int Run(const RecordArgs& args, const std::vector<std::string>& trace_argv) {
  auto options = SessionFrom(args.engine);
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
  cmd->add_option("--model", args->engine.model_dir,
                  "Model folder (default: the built-in demo model)")
      ->type_name("DIR");
  cmd->add_option(
         "--upstream", args->engine.upstream,
         "Forward to this base URL (https://api.openai.com/v1, https://api.anthropic.com/v1,\n"
         "any compatible http://host:port/v1) instead of the local engine. Key from\n"
         "$TRACE_UPSTREAM_API_KEY, else $OPENAI_API_KEY / $ANTHROPIC_API_KEY (by API);\n"
         "never recorded")
      ->type_name("URL");
  cmd->add_option("--label", args->label, "A label stored with the run");
  cmd->add_option("--seed", args->seed, "Run seed for calls without a request seed");
  cmd->add_option("--device", args->engine.device, "cpu | cuda | cuda:N");
  cmd->add_option("--numerics", args->engine.numerics, "canonical | fast");
  cmd->add_option("--threads", args->engine.threads, "Engine threads (0: all cores)");
  cmd->add_option("--max-batch", args->engine.max_batch,
                  "Most sequences batched together (1: one request at a time)");
  cmd->add_flag("--layer-digests", args->engine.layer_digests,
                "Also record a digest of every layer's hidden state per sampled token (and on\n"
                "a mixture-of-experts model the experts it was routed to in every layer), so\n"
                "`trace replay` can name the first differing layer (costs a little)");
  cmd->add_option("--served-model-name", args->engine.served_model_names,
                  "Serve the model only under this name (repeatable; the first is OPENAI_MODEL).\n"
                  "Default: any model name the agent asks for, recorded as asked")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--port", args->port, "Port on 127.0.0.1 (0: a free one)");
  AddHttpFlags(cmd, &args->http);
  cmd->add_option("command", args->command, "The agent command, after --")
      ->required()
      ->expected(-1);
  cmd->callback([args, exit_code] { *exit_code = Run(*args, recorder::OwnCommandLine()); });
}

TRACE_REGISTER_COMMAND(10, Setup);

}  // namespace
}  // namespace trace::cli
