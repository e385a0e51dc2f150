// `trace version`: the build facts that go into every run's engine fingerprint.
#include <iostream>

#include "base/build_info.h"
#include "cli/command.h"

namespace trace::cli::cmd_version {
namespace {

void Setup(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print the version, git revision and compiler");
  cmd->callback([exit_code] {
    std::cout << "trace " << TRACE_VERSION << "\nrevision " << TRACE_GIT_REVISION << "\ncompiler "
              << TRACE_COMPILER << "\nbuild " << TRACE_BUILD_TYPE << "\ncuda "
              << (TRACE_HAVE_CUDA ? "yes" : "no") << "\n";
    *exit_code = kExitOk;
  });
}

TRACE_REGISTER_COMMAND(900, Setup);

}  // namespace
}  // namespace trace::cli::cmd_version
