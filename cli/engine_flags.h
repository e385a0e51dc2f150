// Every engine flag of the commands that run a model (record, rerun, serve, generate, logits,
// bench determinism and throughput, replay, verify, worker), in one place: which flags each command
// takes and their help (AddEngineFlags), and what they resolve to (ResolveEngineFlags: the model
// folder or the built-in demo model, numerics, device, threads; SessionFromEngineFlags: the
// options of a recording server). Presentation only: the engine and the recorder do the work.
//
// Ownership: the flags write into an EngineFlags the command owns. Thread safety: CLI parsing
// and resolution are single-threaded. Errors: a bad value is a Status naming the flag, with
// one text per mistake whatever the command; writing the demo model can fail with its I/O
// error.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "base/status.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "kernels/kernels.h"
#include "recorder/session.h"

namespace trace::cli {

// What a command runs its engine for: picks its flags, their help and their defaults.
enum class EngineUse {
  kRecord,      // record: the agent's server (local engine or --upstream), recorded
  kRerun,       // rerun: the same for the calls that go live; --model: the recorded one
  kServe,       // serve: the same server standalone, recording with --record
  kPrompt,      // generate, logits: one prompt on the CPU (no --device)
  kBench,       // bench determinism
  kBenchSweep,  // bench throughput: runs both numerics modes (no --numerics)
  kReplay,      // replay: --model and --numerics default to what the run recorded
  kVerify,      // verify, worker: every run in its recorded model and numerics (only
                // --device and --threads; their --model selects runs, it is no engine flag)
};

struct EngineFlags {
  std::string model_dir;  // --model; empty: the use's default (EngineSetup::model_dir)
  std::string upstream;   // --upstream (record, rerun, serve)
  std::string device = "cpu";
  std::string numerics = "canonical";  // replay: empty, the mode the run was recorded in
  int threads = 0;                     // 0: all cores
  // The server's (record, rerun, serve).
  int max_batch = 64;
  bool layer_digests = false;
  std::vector<std::string> served_model_names;
};

namespace engine_flags {

inline bool Serves(EngineUse use) {
  return use == EngineUse::kRecord || use == EngineUse::kRerun || use == EngineUse::kServe;
}

// Whether an empty --model means the demo model, resolved here (record and serve leave it to
// the session, which writes it only when it serves a local engine; rerun and replay default
// to the recorded model).
inline bool ResolvesDemoModel(EngineUse use) {
  return use == EngineUse::kPrompt || use == EngineUse::kBench || use == EngineUse::kBenchSweep;
}

inline const char* ModelHelp(EngineUse use) {
  switch (use) {
    case EngineUse::kRerun:
      return "Model folder or GGUF file for the calls that go live (default: the one the run\n"
             "was recorded with)";
    case EngineUse::kReplay:
      return "Replay against this model folder or GGUF file on purpose (default: the recorded\n"
             "one, which must hash as recorded)";
    default:
      return "Model: a Hugging Face folder or a GGUF file (default: the built-in demo model)";
  }
}

// The demo model's folder, written first (and said so on stderr) when it is not there yet.
inline Result<std::string> DemoModelDir() {
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

inline Status CheckDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return Status::Ok();
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      std::all_of(device.begin() + 5, device.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::Ok();
  }
  return InvalidArgument("--device: '" + device + "' is not cpu, cuda or cuda:N");
}

}  // namespace engine_flags

// Adds the engine flags of `use` to `cmd`, in one block: --model, --upstream, --device,
// --numerics, --threads, then the server's --max-batch, --layer-digests, --served-model-name.
inline void AddEngineFlags(CLI::App* cmd, EngineUse use, EngineFlags* f) {
  using engine_flags::Serves;
  const bool serve = use == EngineUse::kServe;
  if (use != EngineUse::kVerify) {
    cmd->add_option("--model", f->model_dir, engine_flags::ModelHelp(use))->type_name("DIR|GGUF");
  }
  if (Serves(use)) {
    cmd->add_option(
           "--upstream", f->upstream,
           "Forward to this base URL (https://api.openai.com/v1, https://api.anthropic.com/v1,\n"
           "any compatible http://host:port/v1) instead of the local engine. Key from\n"
           "$TRACE_UPSTREAM_API_KEY, else $OPENAI_API_KEY / $ANTHROPIC_API_KEY (by API);\n"
           "never recorded")
        ->type_name("URL");
  }
  if (use != EngineUse::kPrompt) {
    cmd->add_option("--device", f->device, "cpu | cuda | cuda:N (default cpu)");
  }
  if (use == EngineUse::kVerify) {
    f->numerics.clear();
  } else if (use == EngineUse::kReplay) {
    f->numerics.clear();
    cmd->add_option("--numerics", f->numerics,
                    "canonical | fast (default: the mode the run was recorded in)");
  } else if (use != EngineUse::kBenchSweep) {
    cmd->add_option("--numerics", f->numerics, "canonical | fast (default canonical)");
  }
  cmd->add_option("--threads", f->threads, "Engine threads (0, the default: all cores)")
      ->check(CLI::Range(0, 1024));
  if (!Serves(use)) return;
  cmd->add_option("--max-batch", f->max_batch,
                  "Most sequences batched together (1: one request at a time)");
  cmd->add_flag("--layer-digests", f->layer_digests,
                serve ? "Record a digest of every layer's hidden state per sampled token, and an "
                        "MoE\nmodel's route (with --record), so `trace replay` can name the first\n"
                        "differing layer"
                      : "Also record a digest of every layer's hidden state per sampled token "
                        "(and on\na mixture-of-experts model the experts it was routed to in "
                        "every layer), so\n`trace replay` can name the first differing layer "
                        "(costs a little)");
  cmd->add_option("--served-model-name", f->served_model_names,
                  serve ? "Serve the model only under this name (repeatable; listed by "
                          "/v1/models).\nDefault: any model name a client asks for"
                        : "Serve the model only under this name (repeatable; the first is "
                          "OPENAI_MODEL).\nDefault: any model name the agent asks for, recorded "
                          "as asked")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// What the engine flags of a command resolve to.
struct EngineSetup {
  // --model; else the demo model where the use defaults to it and resolves it here (generate,
  // logits, bench); else empty: the session's demo model (record, serve), the recorded model
  // (rerun, replay).
  std::string model_dir;
  // numerics, device and threads; max_context is the command's. Replay passes the flags'
  // numerics text on instead (empty: as recorded).
  engine::EngineOptions engine;
};

// Checks the flags (--numerics, --device, --max-batch, in that order) and resolves the model
// folder, writing the demo model when the use needs it and it is not there yet.
inline Result<EngineSetup> ResolveEngineFlags(const EngineFlags& f, EngineUse use) {
  EngineSetup s;
  const bool numerics_as_recorded =
      (use == EngineUse::kReplay || use == EngineUse::kVerify) && f.numerics.empty();
  if (!numerics_as_recorded && !kernels::ParseNumerics(f.numerics, &s.engine.numerics)) {
    return InvalidArgument("--numerics must be canonical or fast, got '" + f.numerics + "'");
  }
  TRACE_RETURN_IF_ERROR(engine_flags::CheckDevice(f.device));
  if (engine_flags::Serves(use) && f.max_batch < 1) {
    return InvalidArgument("--max-batch must be at least 1");
  }
  s.engine.device = f.device;
  s.engine.threads = f.threads;
  s.model_dir = f.model_dir;
  if (s.model_dir.empty() && engine_flags::ResolvesDemoModel(use)) {
    TRACE_ASSIGN_OR_RETURN(s.model_dir, engine_flags::DemoModelDir());
  }
  return s;
}

// The session of a recording server (record, rerun, serve): the resolved engine, the
// scheduler's batch and layer digests, the served names, the store; --quiet silences its
// progress lines.
inline Result<recorder::SessionOptions> SessionFromEngineFlags(const EngineFlags& f,
                                                               EngineUse use) {
  TRACE_ASSIGN_OR_RETURN(EngineSetup setup, ResolveEngineFlags(f, use));
  recorder::SessionOptions o;
  o.model_dir = setup.model_dir;
  o.upstream = f.upstream;
  o.store_path = ResolveStorePath();
  o.engine = setup.engine;
  o.scheduler.max_active_sequences = f.max_batch;
  o.scheduler.layer_digests = f.layer_digests;
  o.served_model_names = f.served_model_names;
  if (Globals().quiet) o.log = [](const std::string&) {};
  return o;
}

}  // namespace trace::cli
