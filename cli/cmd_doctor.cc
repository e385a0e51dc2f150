// `trace doctor`: this machine's fingerprint and the numerics self-test on every kernel path
// and device present (engine/doctor.h does the work; this file parses and prints).
#include <iostream>
#include <sstream>

#include "base/escape.h"
#include "cli/command.h"
#include "engine/doctor.h"

namespace trace::cli::cmd_doctor {
namespace {

struct DoctorArgs {
  bool json = false;
  bool no_model = false;
};

int Run(const DoctorArgs& args) {
  engine::DoctorOptions options;
  options.model_check = !args.no_model;
  if (!Globals().quiet) {
    options.progress = [](const std::string& line) {
      std::cerr << "doctor: " << EscapeForDisplay(line, kNoLimit) << "\n";
    };
  }
  const engine::DoctorReport report = engine::RunDoctor(options);
  if (args.json) {
    std::cout << engine::RenderDoctorJson(report);
  } else {
    // The report quotes what the machine says of itself (CPU and GPU names, driver errors,
    // a model folder's path): escaped line by line like everything else on the terminal.
    std::istringstream lines(engine::RenderDoctorText(report));
    std::string line;
    while (std::getline(lines, line)) std::cout << EscapeForDisplay(line, kNoLimit) << "\n";
  }
  if (report.reproduces()) return kExitOk;
  return report.any_failed() ? kExitMismatch : kExitError;
}

void Setup(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Print this machine's fingerprint (CPU model and kernel path, CUDA driver, runtime,\n"
      "cuBLAS, GPUs) and run the numerics self-test: the canonical-v2 kernel cases on every\n"
      "kernel path present (scalar reference, AVX2, AVX-512 or NEON, each CUDA device) and\n"
      "the golden prompts on a temporary tiny model, each against its pinned digest. A\n"
      "machine that passes reproduces the canonical bits, so replays of its runs elsewhere\n"
      "(and of other runs here) can be bitwise.\n"
      "Exit 0: every check passed; 1: a digest differs; 2: a check could not run.");
  cmd->add_flag("--json", args->json, "Print the fingerprint and results as JSON");
  cmd->add_flag("--no-model", args->no_model,
                "Skip the golden prompts (kernel self-test only; needs no tokenizer files)");
  cmd->callback([args, exit_code] { *exit_code = Run(*args); });
}

TRACE_REGISTER_COMMAND(700, Setup);

}  // namespace
}  // namespace trace::cli::cmd_doctor
