// `trace serve [--model DIR] [--host H] [--port P] [--api-key-file F] [--record LABEL]`: the
// recorder's OpenAI-compatible server standalone, optionally recording everything it serves as one
// run; stops on SIGINT/SIGTERM (docs/recorder.md).
#include <iostream>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/server_flags.h"
#include "recorder/secrets.h"
#include "recorder/session.h"

namespace trace::cli::cmd_serve {
namespace {

struct ServeArgs {
  EngineFlags engine;  // cli/engine_flags.h
  ListenFlags listen;  // --host, --port, --api-key-file (cli/server_flags.h)
  HttpFlags http;
  std::optional<std::string> record_label;
  std::optional<uint64_t> seed;
};

int Run(const ServeArgs& a) {
  Result<recorder::SessionOptions> session = SessionFromEngineFlags(a.engine, EngineUse::kServe);
  if (!session.ok()) return ReportError(session.status());
  recorder::SessionOptions& o = *session;
  o.host = a.listen.host;
  o.port = a.listen.port;
  Result<std::string> key = ListenKey(a.listen);
  if (!key.ok()) return ReportError(key.status());
  o.api_key = *key;
  Result<recorder::HttpLimits> limits = HttpLimitsFrom(a.http);
  if (!limits.ok()) return ReportError(limits.status());
  o.http_limits = *limits;
  o.seed = a.seed;
  o.label = a.record_label.value_or("");
  o.trace_argv = recorder::OwnCommandLine();
  Status st = recorder::Serve(o, a.record_label.has_value(), [](const std::string& origin) {
    std::cout << "serving on " << origin << "/v1" << std::endl;
  });
  if (!st.ok()) return ReportError(st.WithContext("serve"));
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve the model API (OpenAI Chat Completions, Completions and Responses; Anthropic\n"
      "Messages) and the trace event API until Ctrl-C.");
  AddEngineFlags(cmd, EngineUse::kServe, &args->engine);
  AddListenFlags(cmd, &args->listen, 8000);
  AddHttpFlags(cmd, &args->http);
  cmd->add_option("--record", args->record_label,
                  "Record everything served as one run with this label");
  cmd->add_option("--seed", args->seed, "Run seed for calls without a request seed");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(11, Setup);

}  // namespace
}  // namespace trace::cli::cmd_serve
