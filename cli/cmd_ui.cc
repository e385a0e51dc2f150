// `trace ui [--host H] [--port P] [--api-key-file F] [--open]`: the web app over the store
// (ui/server.h, docs/ui.md) until Ctrl-C.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <iostream>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/replay_constraints.h"
#include "cli/server_flags.h"
#include "ui/server.h"

extern char** environ;

namespace trace::cli::cmd_ui {
namespace {

struct UiArgs {
  ListenFlags listen;  // --host, --port, --api-key-file (cli/server_flags.h)
  HttpFlags http;
  bool open = false;
  bool no_redact = false;
  std::string rules_file;
  EngineFlags engine;  // --device, --threads for replays started from the page
};

// Opens `url` in the user's browser ($BROWSER, else xdg-open); false when neither runs.
bool OpenBrowser(const std::string& url) {
  const char* browser = std::getenv("BROWSER");
  for (const std::string& program :
       {std::string(browser ? browser : ""), std::string("xdg-open")}) {
    if (program.empty()) continue;
    pid_t pid = 0;
    char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>(url.c_str()), nullptr};
    if (posix_spawnp(&pid, program.c_str(), nullptr, nullptr, argv, environ) == 0) return true;
  }
  return false;
}

int Run(const UiArgs& a) {
  SilenceProtobufLog();
  if (a.no_redact && !a.rules_file.empty()) {
    return ReportError(InvalidArgument("--redact-rules and --no-redact contradict each other"));
  }
  Result<std::string> key = ListenKey(a.listen);
  if (!key.ok()) return ReportError(key.status());
  Result<recorder::HttpLimits> limits = HttpLimitsFrom(a.http);
  if (!limits.ok()) return ReportError(limits.status());
  Result<EngineSetup> engine = ResolveEngineFlags(a.engine, EngineUse::kVerify);
  if (!engine.ok()) return ReportError(engine.status());

  ui::UiApiOptions api;
  if (a.no_redact) {
    api.redaction.reset();
  } else if (!a.rules_file.empty()) {
    if (Status s = api.redaction->AddRulesFile(a.rules_file); !s.ok()) return ReportError(s);
  }
  api.replay.device = engine->engine.device;
  api.replay.threads = engine->engine.threads;
  api.replay.constraints = MakeConstraintFactory();

  recorder::ServerOptions http;
  http.host = a.listen.host;
  http.port = a.listen.port;
  http.api_key = *key;
  http.limits = *limits;

  // Block the stop signals in every thread (the server's included); this one waits.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  store::StoreOptions open;
  open.read_only = true;
  open.create_if_missing = false;
  auto store = store::Store::Open(ResolveStorePath(), open);
  if (!store.ok()) return ReportError(store.status());
  ui::UiServer server(store->get(), std::move(api), http);
  if (Status s = server.Start(); !s.ok()) return ReportError(s.WithContext("trace ui"));
  std::cout << "trace ui: " << server.url() << " (store " << (*store)->path()
            << (key->empty() ? "" : "; the page asks for the API key") << "; Ctrl-C stops)"
            << std::endl;
  if (a.open && !OpenBrowser(server.url())) {
    std::cerr << "trace ui: no browser to open (set $BROWSER or install xdg-open); open "
              << server.url() << " yourself" << std::endl;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.Stop();
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<UiArgs>();
  auto* cmd = app.add_subcommand(
      "ui",
      "Browse the store in a web browser: the runs, each run's timeline and what the model\n"
      "saw in each call (prompt, tokens and their margins), replays with progress, diffs and\n"
      "forks (docs/ui.md). Read-only; serves on 127.0.0.1 until Ctrl-C.");
  AddListenFlags(cmd, &args->listen, 8765);
  AddHttpFlags(cmd, &args->http);
  cmd->add_flag("--open", args->open, "Open the page in the browser ($BROWSER, else xdg-open)");
  cmd->add_flag("--no-redact", args->no_redact,
                "Show runs as stored; by default secrets are redacted as `trace export` does");
  cmd->add_option("--redact-rules", args->rules_file,
                  "Also redact what FILE's rules match: lines 'NAME REGEX' (PCRE2)")
      ->type_name("FILE");
  AddEngineFlags(cmd, EngineUse::kVerify, &args->engine);
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(38, Setup);

}  // namespace
}  // namespace trace::cli::cmd_ui
