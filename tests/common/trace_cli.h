// Running the `trace` binary (build/bin/trace) from a test: arguments shell-quoted, stdout
// and stderr captured whole through files in the test's TempDir, the exit code decoded.
//
// Ownership: values. Thread safety: one call at a time per TempDir (the capture files are
// fixed names in it). Errors: a binary that cannot run gives exit_code 127 (the shell's).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "testkit/shell.h"
#include "testkit/temp_dir.h"

namespace trace::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `[PREFIX] trace ARGS...`; PREFIX is shell text put before the command (e.g.
// "ulimit -f 0; " or an environment assignment).
inline CliResult RunTrace(const TempDir& dir, const std::vector<std::string>& args,
                          const std::string& prefix = "") {
  std::string cmd = prefix;
  cmd += ShellQuote(TRACE_BINARY_DIR "/bin/trace");
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " >" + dir.file("stdout") + " 2>" + dir.file("stderr");
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(dir.file("stdout"));
  r.err = ReadWholeFile(dir.file("stderr"));
  return r;
}

}  // namespace trace::testing
