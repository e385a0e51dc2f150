// Command registration for the `trace` binary.
//
// Each command lives in its own cli/cmd_*.cc and registers itself with
// TRACE_REGISTER_COMMAND, so adding a command touches no shared file. Its code lives in
// namespace trace::cli::cmd_NAME (NAME: the file's), because a unity build (TRACE_UNITY)
// compiles several command files as one and each defines its own Setup/Options/Run. A command's
// setup function adds a CLI11 subcommand to the app and a callback that returns the
// process exit code. Commands call the parts (store, engine, recorder, replayer) and
// print; they hold no logic of their own beyond presentation.
//
// Thread safety: registration happens during static initialisation, single-threaded.
// Errors: a command prints one line "trace: <what>: <why>" to stderr and returns a
// non-zero exit code (see ExitCode); it never throws out of its callback.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::cli {

// Process exit codes shared by every command (docs/cli.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitMismatch = 1,  // the command worked but the answer is "no" (replay diverged, ...)
  kExitError = 2,     // bad input, unknown run, unreadable file, ...
};

// Options every command can read; filled by main() before the callback runs.
struct GlobalOptions {
  std::string store_path;  // --store or $TRACE_STORE; empty: the default location
  bool quiet = false;
};
const GlobalOptions& Globals();

// The store to use (a file path or a sqlite:// / postgresql:// URL): --store, else
// $TRACE_STORE, else
// $XDG_DATA_HOME/trace/traces.db, else ~/.local/share/trace/traces.db.
std::string ResolveStorePath();

// Prints "trace: <status message>" to stderr and returns kExitError.
int ReportError(const Status& status);

// For commands that read stored rows: a damaged row is reported once, by the command (one
// line naming the run and seq), not also by protobuf's logger.
void SilenceProtobufLog();

// A command's setup: adds the subcommand to `app`; the subcommand's final callback must
// set `*exit_code`.
using CommandSetup = std::function<void(CLI::App& app, int* exit_code)>;

struct CommandRegistration {
  CommandRegistration(int order, CommandSetup setup);
};

// Commands are listed in `trace --help` by `order` (lower first).
#define TRACE_REGISTER_COMMAND(order, setup_fn)                                              \
  static ::trace::cli::CommandRegistration TRACE_CONCAT_(trace_cmd_registration_, __LINE__)( \
      order, setup_fn)

}  // namespace trace::cli
