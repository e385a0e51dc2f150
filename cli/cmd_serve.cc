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
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key_file;
  std::string api_key_on_command_line;  // refused: `ps` shows it to every user
  HttpFlags http;
  std::optional<std::string> record_label;
  std::optional<uint64_t> seed;
};

int Run(const ServeArgs& a) {
  Result<recorder::SessionOptions> session = SessionFromEngineFlags(a.engine, EngineUse::kServe);
  if (!session.ok()) return ReportError(session.status());
  recorder::SessionOptions& o = *session;
  o.host = a.host;
  o.port = a.port;
  if (!a.api_key_on_command_line.empty()) {
    return ReportError(InvalidArgument(
        "--api-key puts the key in `ps` output, shell history and the recorded command line; "
        "use --api-key-file FILE or the TRACE_API_KEY environment variable"));
  }
  Result<std::string> key = recorder::ResolveApiKey(a.api_key_file);
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
  cmd->add_option("--host", args->host,
                  "Address to listen on (default 127.0.0.1). Requests must name a loopback\n"
                  "host or this one in their Host header (0.0.0.0: any)");
  cmd->add_option("--port", args->port, "Port (default 8000; 0: a free one)");
  cmd->add_option("--api-key-file", args->api_key_file,
                  "Require 'Authorization: Bearer KEY' (or 'x-api-key: KEY'), KEY being this\n"
                  "file's first line; else $TRACE_API_KEY; neither: no check")
      ->type_name("FILE");
  cmd->add_option("--api-key", args->api_key_on_command_line)->group("");  // refused, see Run
  AddHttpFlags(cmd, &args->http);
  cmd->add_option("--record", args->record_label,
                  "Record everything served as one run with this label");
  cmd->add_option("--seed", args->seed, "Run seed for calls without a request seed");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(11, Setup);

}  // namespace
}  // namespace trace::cli::cmd_serve
