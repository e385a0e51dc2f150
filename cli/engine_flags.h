// The engine and upstream flags `trace record` and `trace rerun` share (--model,
// --upstream, --device, --numerics, --threads, --max-batch, --layer-digests,
// --served-model-name) and the session options they make. Presentation only.
//
// Ownership: the flags write into an EngineFlags the command owns. Thread safety: CLI
// parsing is single-threaded. Errors: a bad value is a Status naming the flag.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "base/status.h"
#include "cli/command.h"
#include "kernels/kernels.h"
#include "recorder/session.h"

namespace trace::cli {

struct EngineFlags {
  std::string model_dir;
  std::string upstream;
  std::string device = "cpu";
  std::string numerics = "canonical";
  int threads = 0;
  int max_batch = 64;
  bool layer_digests = false;
  std::vector<std::string> served_model_names;
};

inline Result<recorder::SessionOptions> SessionFromEngineFlags(const EngineFlags& f) {
  recorder::SessionOptions o;
  o.model_dir = f.model_dir;
  o.upstream = f.upstream;
  o.store_path = ResolveStorePath();
  o.engine.device = f.device;
  o.engine.threads = f.threads;
  if (!kernels::ParseNumerics(f.numerics, &o.engine.numerics)) {
    return InvalidArgument("--numerics must be canonical or fast, got '" + f.numerics + "'");
  }
  if (f.max_batch < 1) return InvalidArgument("--max-batch must be at least 1");
  o.scheduler.max_active_sequences = f.max_batch;
  o.scheduler.layer_digests = f.layer_digests;
  o.served_model_names = f.served_model_names;
  if (Globals().quiet) o.log = [](const std::string&) {};
  return o;
}

inline void AddEngineFlags(CLI::App* cmd, EngineFlags* f) {
  cmd->add_option("--model", f->model_dir, "Model folder (default: the built-in demo model)")
      ->type_name("DIR");
  cmd->add_option(
         "--upstream", f->upstream,
         "Forward to this base URL (https://api.openai.com/v1, https://api.anthropic.com/v1,\n"
         "any compatible http://host:port/v1) instead of the local engine. Key from\n"
         "$TRACE_UPSTREAM_API_KEY, else $OPENAI_API_KEY / $ANTHROPIC_API_KEY (by API);\n"
         "never recorded")
      ->type_name("URL");
  cmd->add_option("--device", f->device, "cpu | cuda | cuda:N");
  cmd->add_option("--numerics", f->numerics, "canonical | fast");
  cmd->add_option("--threads", f->threads, "Engine threads (0: all cores)");
  cmd->add_option("--max-batch", f->max_batch,
                  "Most sequences batched together (1: one request at a time)");
  cmd->add_flag("--layer-digests", f->layer_digests,
                "Also record a digest of every layer's hidden state per sampled token (and on\n"
                "a mixture-of-experts model the experts it was routed to in every layer), so\n"
                "`trace replay` can name the first differing layer (costs a little)");
  cmd->add_option("--served-model-name", f->served_model_names,
                  "Serve the model only under this name (repeatable; the first is OPENAI_MODEL).\n"
                  "Default: any model name the agent asks for, recorded as asked")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace trace::cli
