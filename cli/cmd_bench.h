// What the three files of `trace bench` share: cmd_bench.cc (registration and option parsing)
// calls cmd_bench_determinism.cc and cmd_bench_throughput.cc (run the experiment in perf/,
// print its report) through the Args/Run declared here, and both use the progress line
// below; the engine flags are cli/engine_flags.h's. Presentation only.
//
// Each file keeps its own names in its own namespace (trace::cli::cmd_NAME, NAME the
// file's), because the `trace` binary is a unity target (cli/command.h); the helpers here
// are inline in cmd_bench, so the batch that holds all three files defines them once.
//
// Ownership: Args are owned by the command's callback. Thread safety: none needed (one
// command runs, single-threaded, except inside the engine). Errors: Run prints the error
// (trace: <what>: <why>) and returns the exit code.
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "perf/determinism.h"

namespace trace::cli {

namespace cmd_bench {

// Progress on stderr, only when stderr is a terminal (and not --quiet).
class Progress {
 public:
  Progress() : on_(isatty(STDERR_FILENO) == 1 && !Globals().quiet) {}
  ~Progress() { Done(); }
  void Update(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!on_) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\r%s\x1b[K", buf);
    std::fflush(stderr);
    shown_ = true;
  }
  void Done() {
    if (on_ && shown_) std::fprintf(stderr, "\r\x1b[K");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
};

}  // namespace cmd_bench

// `trace bench determinism` (cmd_bench_determinism.cc).
namespace cmd_bench_determinism {

struct Args {
  EngineFlags engine;  // --model, --device, --numerics, --threads
  std::string prompt = "Once upon a time, in a small village by the sea, there lived";
  bool json = false;
  perf::DeterminismOptions sim;  // runs, max tokens, seed, other requests, --test-perturb
};

// Runs the experiment and prints its report (text, or one JSON object with --json);
// returns the exit code.
int Run(const Args& args);

}  // namespace cmd_bench_determinism

// `trace bench throughput` (cmd_bench_throughput.cc).
namespace cmd_bench_throughput {

struct Args {
  EngineFlags engine;  // --model, --device, --threads
  std::string batches = "1,8,64";
  int prompt_len = 128;
  int decode_tokens = 32;
  int repeat = 1;
  uint64_t seed = 0;
  bool json = false;
};

// Runs the sweep (and, on the CPU, the FMA peak) and prints the table (or one JSON object
// with --json); returns the exit code.
int Run(const Args& args);

}  // namespace cmd_bench_throughput

}  // namespace trace::cli
