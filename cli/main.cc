// The `trace` binary: parses global options and dispatches to the registered commands.
#include <google/protobuf/stubs/logging.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include "base/build_info.h"
#include "base/escape.h"
#include "cli/command.h"

namespace trace::cli {
namespace {

struct Entry {
  int order;
  CommandSetup setup;
};

std::vector<Entry>& Registry() {
  static std::vector<Entry> entries;
  return entries;
}

GlobalOptions& MutableGlobals() {
  static GlobalOptions globals;
  return globals;
}

}  // namespace

CommandRegistration::CommandRegistration(int order, CommandSetup setup) {
  Registry().push_back({order, std::move(setup)});
}

const GlobalOptions& Globals() {
  return MutableGlobals();
}

std::string ResolveStorePath() {
  if (!Globals().store_path.empty()) return Globals().store_path;
  if (const char* env = std::getenv("TRACE_STORE"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/trace/traces.db";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/trace/traces.db";
}

void SilenceProtobufLog() {
  google::protobuf::SetLogHandler(nullptr);
}

int ReportError(const Status& status) {
  // Parsers escape the values they quote; this is the net for any message that still holds
  // a raw control character or invalid UTF-8 (escaping is idempotent, so no harm otherwise).
  std::cerr << "trace: " << EscapeForDisplay(status.message(), kNoLimit) << "\n";
  return kExitError;
}

}  // namespace trace::cli

int main(int argc, char** argv) {
  using namespace trace::cli;
  // Past a file size limit (ulimit -f) a write should fail (the store then says so, and
  // `trace record` answers 503) rather than the process die of SIGXFSZ. The agent gets
  // the default back (recorder/child.cc).
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "trace: record and replay LLM agent runs.\n"
      "  trace record -- CMD   run an agent against a local model and record everything\n"
      "  trace replay RUN      re-execute every model call; report the first divergent token\n"
      "  trace diff A B        what differs between two runs, and where it starts",
      "trace"};
  app.set_version_flag("--version", std::string("trace ") + TRACE_VERSION + " (" +
                                        TRACE_GIT_REVISION + ", " + TRACE_COMPILER + ")");
  app.add_option("--store", MutableGlobals().store_path,
                 "Trace store: a SQLite file (PATH or sqlite://PATH) or a PostgreSQL database "
                 "(postgresql://USER[:PASSWORD]@HOST[:PORT]/DB) (default: $TRACE_STORE, else "
                 "$XDG_DATA_HOME/trace/traces.db)")
      ->type_name("STORE");
  app.add_flag("-q,--quiet", MutableGlobals().quiet, "Print less");
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand name

  std::sort(Registry().begin(), Registry().end(),
            [](const Entry& a, const Entry& b) { return a.order < b.order; });
  int exit_code = kExitOk;
  for (auto& e : Registry()) e.setup(app, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      // One line for usage errors, with a pointer to --help.
      std::cerr << "trace: " << e.what() << " (see 'trace --help')\n";
      return kExitError;
    }
    return app.exit(e);
  }
  return exit_code;
}
