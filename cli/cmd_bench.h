// What the three files of `trace bench` share: cmd_bench.cc (registration and option parsing)
// calls cmd_bench_determinism.cc and cmd_bench_throughput.cc (run the experiment in
// bench/common, print its report) through the Args/Run declared here, and both use the
// helpers below (progress line, --device check, model loading). Presentation only.
//
// Each file keeps its own names in its own namespace (trace::cli::cmd_NAME, NAME the
// file's), because the `trace` binary is a unity target (cli/command.h); the helpers here
// are inline in cmd_bench, so the batch that holds all three files defines them once.
//
// Ownership: a LoadedModel owns its model (shared) and tokenizer; Args are owned by the
// command's callback. Thread safety: none needed (one command runs, single-threaded, except
// inside the engine). Errors: Status/Result naming the flag or folder; Run prints the error
// (trace: <what>: <why>) and returns the exit code.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "base/status.h"
#include "bench/common/determinism.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "engine/tokenizer/tokenizer.h"

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

inline Status ValidateDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return Status::Ok();
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      std::all_of(device.begin() + 5, device.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::Ok();
  }
  return InvalidArgument("--device: '" + device + "' is not cpu, cuda or cuda:N");
}

// The model folder to use: --model, else the demo model (written first if missing).
inline Result<std::string> ResolveModelDir(const std::string& given, const std::string& what) {
  if (!given.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(given, ec)) {
      return NotFound(what + ": --model: '" + given + "' is not a folder");
    }
    if (!std::filesystem::exists(given + "/config.json", ec)) {
      return NotFound(what + ": --model: '" + given + "' has no config.json");
    }
    return given;
  }
  const std::string demo = engine::DefaultDemoModelDir();
  std::error_code ec;
  if (!std::filesystem::exists(demo + "/config.json", ec)) {
    std::fprintf(stderr,
                 "trace: no --model given; writing the demo model (preset %s, seed %llu) to %s\n",
                 engine::kDemoModelPreset, static_cast<unsigned long long>(engine::kDemoModelSeed),
                 demo.c_str());
  }
  return engine::EnsureDemoModel();
}

struct LoadedModel {
  std::string dir;
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<engine::Tokenizer> tokenizer;  // null when the folder has none
};

// --model (or the demo model) and its tokenizer.json when there is one; `what` names the
// command in errors.
inline Result<LoadedModel> LoadModel(const std::string& given, const std::string& what) {
  LoadedModel l;
  TRACE_ASSIGN_OR_RETURN(l.dir, ResolveModelDir(given, what));
  TRACE_ASSIGN_OR_RETURN(l.model, engine::Model::Load(l.dir, /*hash_weights=*/false));
  const std::string tok = l.dir + "/tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tok, ec)) {
    TRACE_ASSIGN_OR_RETURN(l.tokenizer, engine::Tokenizer::Load(tok));
  }
  return l;
}

}  // namespace cmd_bench

// `trace bench determinism` (cmd_bench_determinism.cc).
namespace cmd_bench_determinism {

struct Args {
  std::string model_dir;
  std::string device = "cpu";
  std::string numerics = "canonical";
  int threads = 0;
  std::string prompt = "Once upon a time, in a small village by the sea, there lived";
  bool json = false;
  bench::DeterminismOptions sim;  // runs, max tokens, seed, other requests, --test-perturb
};

// Runs the experiment and prints its report (text, or one JSON object with --json);
// returns the exit code.
int Run(const Args& args);

}  // namespace cmd_bench_determinism

// `trace bench throughput` (cmd_bench_throughput.cc).
namespace cmd_bench_throughput {

struct Args {
  std::string model_dir;
  std::string device = "cpu";
  std::string batches = "1,8,64";
  int prompt_len = 128;
  int decode_tokens = 32;
  int repeat = 1;
  int threads = 0;
  uint64_t seed = 0;
  bool json = false;
};

// Runs the sweep (and, on the CPU, the FMA peak) and prints the table (or one JSON object
// with --json); returns the exit code.
int Run(const Args& args);

}  // namespace cmd_bench_throughput

}  // namespace trace::cli
