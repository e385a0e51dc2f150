// Running the agent under `trace record`: spawn a command with extra environment, pass
// stdin through, tee stdout/stderr to the terminal and to a callback, forward SIGINT and
// SIGTERM, and report how it ended. If the recorder dies (even by SIGKILL) the agent gets
// SIGTERM (PR_SET_PDEATHSIG) rather than running on orphaned. Also the allow-listed
// environment capture.
//
// Ownership: RunChild owns the child process until it has been reaped. Thread safety:
// one RunChild at a time per process (it installs SIGINT/SIGTERM handlers for its
// duration); the output callback is called from two reader threads, never concurrently
// for the same stream. Errors: a command that cannot be started is an error naming it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trace::recorder {

struct ChildOptions {
  std::vector<std::string> argv;
  std::map<std::string, std::string> extra_env;  // set (overriding) in the child
  // Called with (stream 1 = stdout / 2 = stderr, bytes) for every chunk read.
  std::function<void(int stream, std::string_view data)> on_output;
  // Called once the child runs, with its pid.
  std::function<void(int pid)> on_started;
  bool echo = true;  // copy the child's output to our stdout/stderr
};

struct ChildExit {
  bool signalled = false;
  int exit_code = 0;         // when !signalled
  int signal = 0;            // when signalled
  int forwarded_signal = 0;  // the last signal we forwarded to it, 0 if none
  double duration_ms = 0;
  // What `trace record` exits with: the child's code, or 128 + signal.
  int ShellStatus() const { return signalled ? 128 + signal : exit_code; }
};

// Blocks until the child has exited. The child is forked on the calling thread and
// PR_SET_PDEATHSIG fires when that thread ends, which here means the process ended: the
// thread waits for the child before it returns.
Result<ChildExit> RunChild(const ChildOptions& options);

// The allow-listed part of the environment that is recorded with a run: locale, time
// zone, interpreter and thread settings, and TRACE_/OPENAI_ variables other than keys.
// Names containing KEY, TOKEN, SECRET or PASSWORD are never recorded; credentials inside
// URLs (user:password@) are removed from the values.
std::map<std::string, std::string> AllowListedEnvironment(char** envp);

}  // namespace trace::recorder
