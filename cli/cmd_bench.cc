// `trace bench`: the two experiments that show what the numerics contract buys and costs.
//
//   trace bench determinism  the same prompt completed N times at temperature 0, each time
//                            continuously batched with a random number of random other
//                            requests; counts the distinct completions, shows where the
//                            first ones diverged, and how far batching moved the logits.
//   trace bench throughput   prefill and decode tokens/s at given batch sizes, canonical and
//                            fast numerics in the same run, with the ratio canonical/fast.
//
// This file parses the options and prints; the experiments live in bench/common
// (determinism.h: the continuous-batching simulation; throughput.h: the sweep; machine_peak.h:
// the FMA peak), shared with the programs under bench/. Everything random there comes from a
// SplitMix64 stream keyed by --seed and the run index, so a bench run is itself reproducible.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/determinism.h"
#include "bench/common/machine_peak.h"
#include "bench/common/throughput.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "engine/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::cli::cmd_bench {
namespace {

using bench::StepRecord;

using Clock = std::chrono::steady_clock;

// ---- small helpers ----------------------------------------------------------------------

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

// A token's (or a text's) bytes for people: control characters escaped, valid UTF-8.
std::string Printable(const std::string& bytes) {
  std::string text = engine::SanitizeUtf8(bytes);
  std::string out;
  for (unsigned char ch : text) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  return out;
}

Status ValidateDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return Status::Ok();
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      std::all_of(device.begin() + 5, device.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::Ok();
  }
  return InvalidArgument("--device: '" + device + "' is not cpu, cuda or cuda:N");
}

// The model folder to use: --model, else the demo model (written first if missing).
Result<std::string> ResolveModelDir(const std::string& given, const std::string& what) {
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

// nlohmann writes NaN/inf as null; keep finite values exact.
nlohmann::ordered_json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

// ---- trace bench determinism ------------------------------------------------------------

struct DeterminismArgs {
  std::string model_dir;
  std::string device = "cpu";
  std::string numerics = "canonical";
  int threads = 0;
  std::string prompt = "Once upon a time, in a small village by the sea, there lived";
  bool json = false;
  bench::DeterminismOptions sim;  // runs, max tokens, seed, other requests, --test-perturb
};

struct Loaded {
  std::string dir;
  std::shared_ptr<const engine::Model> model;
  std::unique_ptr<engine::Tokenizer> tokenizer;  // null when the folder has none
};

Result<Loaded> LoadModel(const std::string& given, const std::string& what) {
  Loaded l;
  TRACE_ASSIGN_OR_RETURN(l.dir, ResolveModelDir(given, what));
  TRACE_ASSIGN_OR_RETURN(l.model, engine::Model::Load(l.dir, /*hash_weights=*/false));
  const std::string tok = l.dir + "/tokenizer.json";
  std::error_code ec;
  if (std::filesystem::exists(tok, ec)) {
    TRACE_ASSIGN_OR_RETURN(l.tokenizer, engine::Tokenizer::Load(tok));
  }
  return l;
}

std::string TokenPiece(const engine::Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr || id < 0) return "";
  return tokenizer->Decode(std::span<const int32_t>(&id, 1));
}

std::string Text(const engine::Tokenizer* tokenizer, const std::vector<int32_t>& ids) {
  if (tokenizer == nullptr) return "";
  return tokenizer->Decode(ids, /*skip_special=*/true);
}

int RunDeterminism(const DeterminismArgs& args) {
  const std::string what = "bench determinism";
  if (Status st = ValidateDevice(args.device); !st.ok()) return ReportError(st.WithContext(what));
  auto loaded = LoadModel(args.model_dir, what);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::ModelConfig& config = loaded->model->config();
  const engine::Tokenizer* tokenizer = loaded->tokenizer.get();
  if (tokenizer == nullptr) {
    return ReportError(NotFound(what + ": no tokenizer.json in '" + loaded->dir +
                                "' (needed to encode --prompt)"));
  }
  std::vector<int32_t> prompt = tokenizer->Encode(args.prompt);
  if (prompt.empty()) return ReportError(InvalidArgument(what + ": --prompt encodes to no tokens"));
  std::vector<int32_t> eos = config.eos_token_ids;
  if (auto id = tokenizer->eos_token_id()) eos.push_back(*id);
  const int32_t token_upper = static_cast<int32_t>(
      std::min<int64_t>(config.vocab_size, std::max<int32_t>(tokenizer->vocab_size(), 1)));

  engine::EngineOptions options;
  if (!kernels::ParseNumerics(args.numerics, &options.numerics)) {
    return ReportError(
        InvalidArgument("--numerics must be canonical or fast, got '" + args.numerics + "'"));
  }
  options.threads = args.threads;
  options.device = args.device;
  options.max_context = std::min<int64_t>(
      config.max_position_embeddings,
      std::max<int64_t>(static_cast<int64_t>(prompt.size()), args.sim.other_max_len) +
          2 * args.sim.max_tokens + 2);
  auto engine = engine::Engine::Create(loaded->model, options);
  if (!engine.ok()) return ReportError(engine.status().WithContext(what));

  Progress progress;
  auto result = bench::RunDeterminism(
      engine->get(), args.sim, prompt, eos, token_upper, tokenizer, [&](int run, double seconds) {
        if (run < 0) {
          progress.Update("reference run (batch size 1)...");
        } else {
          progress.Update("run %d/%d (%.1fs)", run + 1, args.sim.runs, seconds);
        }
      });
  progress.Done();
  if (!result.ok()) return ReportError(result.status().WithContext(what));
  const bench::DeterminismResult& r = *result;
  const auto& runs = r.runs;
  const auto& variants = r.variants;
  const auto& reference = r.reference;
  const std::string device_desc = (*engine)->DeviceDescription();
  const char* numerics_name = kernels::NumericsName(options.numerics);

  // A step's view from one run: the token it chose, its logit and the runner-up.
  auto step_view = [&](int run, size_t step, int32_t other_token) {
    nlohmann::ordered_json j;
    j["run"] = run;
    const auto& steps = runs[static_cast<size_t>(run)].steps;
    if (step >= steps.size()) {
      j["id"] = nullptr;  // this run had already stopped (eos or max tokens)
      j["text"] = "";
      return j;
    }
    const StepRecord& rec = steps[step];
    j["id"] = rec.token;
    j["text"] = engine::SanitizeUtf8(TokenPiece(tokenizer, rec.token));
    j["eos"] = std::find(eos.begin(), eos.end(), rec.token) != eos.end();
    if (!rec.top.empty()) j["logit"] = Num(rec.top[0].logit);
    if (rec.top.size() > 1) {
      j["runner_up"] = rec.top[1].id;
      j["runner_up_logit"] = Num(rec.top[1].logit);
      j["margin"] = Num(static_cast<double>(rec.top[0].logit) - rec.top[1].logit);
    }
    for (const auto& c : rec.top) {
      if (c.id == other_token && other_token != rec.token) {
        j["other_variant_logit"] = Num(c.logit);
        j["margin_to_other_variant"] = Num(static_cast<double>(rec.top[0].logit) - c.logit);
      }
    }
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& c : rec.top) top.push_back({{"id", c.id}, {"logit", Num(c.logit)}});
    j["top"] = top;
    return j;
  };
  auto token_at = [&](int run, size_t step) { return bench::TokenAt(r, run, step); };

  if (args.json) {
    nlohmann::ordered_json j;
    j["command"] = "bench determinism";
    j["model"] = loaded->dir;
    j["architecture"] = config.architecture;
    j["device"] = device_desc;
    j["numerics"] = numerics_name;
    if (options.numerics == kernels::Numerics::kCanonical) {
      j["numerics_version"] = kernels::kNumericsVersion;
    }
    j["runs"] = args.sim.runs;
    j["max_tokens"] = args.sim.max_tokens;
    j["max_others"] = args.sim.max_others;
    j["seed"] = args.sim.seed;
    j["prompt"] = args.prompt;
    j["prompt_tokens"] = prompt.size();
    j["largest_batch"] = {{"min", r.largest_batch_min}, {"max", r.largest_batch_max}};
    j["distinct_completions"] = variants.size();
    nlohmann::ordered_json completions = nlohmann::ordered_json::array();
    for (const auto& v : variants) {
      nlohmann::ordered_json c;
      c["count"] = v.runs.size();
      c["first_run"] = v.runs[0];
      c["runs"] = v.runs;
      c["matches_reference"] = v.tokens == reference.tokens;
      c["tokens"] = v.tokens;
      c["text"] = engine::SanitizeUtf8(Text(tokenizer, v.tokens));
      completions.push_back(c);
    }
    j["completions"] = completions;
    nlohmann::ordered_json divs = nlohmann::ordered_json::array();
    for (const auto& d : r.divergences) {
      nlohmann::ordered_json e;
      e["variant"] = d.variant;
      e["run"] = d.run;
      e["base_run"] = d.base_run;
      e["step"] = d.step;
      e["base"] = step_view(d.base_run, d.step, token_at(d.run, d.step));
      e["variant_step"] = step_view(d.run, d.step, token_at(d.base_run, d.step));
      e["text_before"] = engine::SanitizeUtf8(Text(
          tokenizer,
          std::vector<int32_t>(runs[static_cast<size_t>(d.run)].tokens.begin(),
                               runs[static_cast<size_t>(d.run)].tokens.begin() +
                                   static_cast<ptrdiff_t>(std::min(
                                       d.step, runs[static_cast<size_t>(d.run)].tokens.size())))));
      divs.push_back(e);
    }
    j["divergences"] = divs;
    j["reference"] = {{"tokens", reference.tokens},
                      {"text", engine::SanitizeUtf8(Text(tokenizer, reference.tokens))}};
    nlohmann::ordered_json by_batch = nlohmann::ordered_json::array();
    for (const auto& [b, s] : r.by_batch) {
      nlohmann::ordered_json e;
      e["batch_size"] = b;
      e["steps"] = s.forwards;
      e["compared_steps"] = s.compared;
      e["first_steps"] = s.first_step_forwards;
      e["max_abs_diff_first_step"] = s.first_step_forwards > 0 ? Num(s.max_diff_first) : nullptr;
      e["max_abs_diff"] = Num(s.max_diff);
      e["bitwise_equal"] = s.bitwise;
      by_batch.push_back(e);
    }
    j["logits_vs_batch1"] = by_batch;
    j["max_abs_diff_first_step"] = Num(r.max_diff_first);
    j["max_abs_diff"] = Num(r.max_diff);
    j["bitwise_equal"] = r.bitwise;
    j["seconds"] = r.seconds;
    std::cout << j.dump() << "\n";
    return kExitOk;
  }

  std::printf("model     %s (%s), %s, %s numerics%s\n", loaded->dir.c_str(),
              config.architecture.c_str(), device_desc.c_str(), numerics_name,
              options.numerics == kernels::Numerics::kCanonical
                  ? (std::string(" (") + kernels::kNumericsVersion + ")").c_str()
                  : "");
  std::printf("prompt    \"%s\" (%zu tokens), greedy, up to %d tokens\n",
              Printable(args.prompt).c_str(), prompt.size(), args.sim.max_tokens);
  std::printf(
      "batching  each run with 0..%d random other requests (largest batch per run %lld..%lld), "
      "seed %llu, %.1fs\n\n",
      args.sim.max_others, static_cast<long long>(r.largest_batch_min),
      static_cast<long long>(r.largest_batch_max), static_cast<unsigned long long>(args.sim.seed),
      r.seconds);
  std::printf("%zu distinct completions out of %d runs\n", variants.size(), args.sim.runs);
  for (size_t v = 0; v < variants.size() && v < 10; ++v) {
    std::string text = Printable(Text(tokenizer, variants[v].tokens));
    if (text.size() > 70) text = text.substr(0, 67) + "...";
    std::printf("  #%zu  %4zu runs (first: run %d)%s  \"%s\"\n", v + 1, variants[v].runs.size(),
                variants[v].runs[0],
                variants[v].tokens == reference.tokens ? ", = batch-1 reference" : "",
                text.c_str());
  }
  if (variants.size() > 10) std::printf("  ... and %zu more\n", variants.size() - 10);
  for (size_t i = 0; i < r.divergences.size() && i < 5; ++i) {
    const auto& d = r.divergences[i];
    std::printf("\n#%zu diverged from #1 at step %zu (run %d vs run %d):\n", d.variant + 1, d.step,
                d.run, d.base_run);
    for (int side = 0; side < 2; ++side) {
      const int run = side == 0 ? d.base_run : d.run;
      const int other = side == 0 ? d.run : d.base_run;
      const auto& steps = runs[static_cast<size_t>(run)].steps;
      if (d.step >= steps.size()) {
        std::printf("  run %-4d stopped before this step\n", run);
        continue;
      }
      const StepRecord& rec = steps[d.step];
      std::printf("  run %-4d chose %6d \"%s\"", run, rec.token,
                  Printable(TokenPiece(tokenizer, rec.token)).c_str());
      if (!rec.top.empty()) std::printf(" logit %.9g", static_cast<double>(rec.top[0].logit));
      const int32_t other_token = token_at(other, d.step);
      bool shown = false;
      for (const auto& c : rec.top) {
        if (c.id == other_token && other_token != rec.token) {
          std::printf(", %d at %.9g: margin %.3g", c.id, static_cast<double>(c.logit),
                      static_cast<double>(rec.top[0].logit) - c.logit);
          shown = true;
        }
      }
      if (!shown && rec.top.size() > 1) {
        std::printf(", runner-up %d at %.9g: margin %.3g", rec.top[1].id,
                    static_cast<double>(rec.top[1].logit),
                    static_cast<double>(rec.top[0].logit) - rec.top[1].logit);
      }
      std::printf("\n");
    }
  }
  std::printf("\nlogits vs the same step computed alone (batch size 1), max |difference|:\n");
  std::printf("  %5s %8s %12s %12s  %s\n", "batch", "steps", "first step", "all steps", "bitwise");
  for (const auto& [b, s] : r.by_batch) {
    char first[32] = "-";
    if (s.first_step_forwards > 0) std::snprintf(first, sizeof(first), "%.3g", s.max_diff_first);
    std::printf("  %5lld %8lld %12s %12.3g  %s\n", static_cast<long long>(b),
                static_cast<long long>(s.forwards), first, s.max_diff,
                s.compared == 0 ? "-" : (s.bitwise ? "yes" : "no"));
  }
  std::printf("  overall: first step %.3g, all steps %.3g (%s)\n", r.max_diff_first, r.max_diff,
              r.bitwise ? "bitwise equal" : "batching moved the logits");
  return kExitOk;
}

// ---- trace bench throughput -------------------------------------------------------------

struct ThroughputArgs {
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

Result<std::vector<int64_t>> ParseBatches(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1 || v > 65536) {
      return InvalidArgument("bench throughput: --batch: '" + part +
                             "' is not a batch size (1..65536)");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("bench throughput: --batch: no batch sizes");
  return out;
}

int RunThroughput(const ThroughputArgs& args) {
  const std::string what = "bench throughput";
  if (Status st = ValidateDevice(args.device); !st.ok()) return ReportError(st.WithContext(what));
  auto batches = ParseBatches(args.batches);
  if (!batches.ok()) return ReportError(batches.status());
  auto loaded = LoadModel(args.model_dir, what);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::ModelConfig& config = loaded->model->config();
  if (args.prompt_len + args.decode_tokens + 1 > config.max_position_embeddings) {
    return ReportError(
        InvalidArgument(what + ": --prompt-len + --decode-tokens exceeds the model's " +
                        std::to_string(config.max_position_embeddings) + " positions"));
  }
  const kernels::Numerics modes[2] = {kernels::Numerics::kCanonical, kernels::Numerics::kFast};
  std::unique_ptr<engine::Engine> engines[2];
  for (int m = 0; m < 2; ++m) {
    engine::EngineOptions options;
    options.numerics = modes[m];
    options.threads = args.threads;
    options.device = args.device;
    options.max_context = std::min<int64_t>(
        config.max_position_embeddings,
        std::max(args.prompt_len + args.decode_tokens + 1, 16));  // 16: the warm-up
    auto e = engine::Engine::Create(loaded->model, options);
    if (!e.ok()) return ReportError(e.status().WithContext(what));
    engines[m] = std::move(e).value();
  }
  const int64_t upper = std::min<int64_t>(
      config.vocab_size, loaded->tokenizer ? loaded->tokenizer->vocab_size() : config.vocab_size);
  bench::SweepOptions sweep;
  sweep.batches = *batches;
  sweep.prompt_len = args.prompt_len;
  sweep.decode_tokens = args.decode_tokens;
  sweep.repeat = args.repeat;
  sweep.seed = args.seed;
  Progress progress;
  auto swept = bench::RunThroughputSweep(
      {engines[0].get(), engines[1].get()}, sweep, upper, loaded->tokenizer.get(),
      [&](const std::string& what_now) { progress.Update("%s", what_now.c_str()); });
  progress.Done();
  if (!swept.ok()) return ReportError(swept.status().WithContext(what));
  const std::vector<bench::SweepRow>& rows = *swept;
  const std::string device_desc = engines[0]->DeviceDescription();
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // On the CPU: the instruction set that ran and its fp32 FMA peak on the same threads,
  // measured now, so that prefill reads as a fraction of what the machine can do.
  const bool cpu = args.device == "cpu";
  const int peak_threads = args.threads > 0
                               ? args.threads
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const kernels::Impl isa = bench::ActiveCpuIsa();
  double peak_gflops = 0;
  if (cpu) {
    progress.Update("measuring the fp32 FMA peak (%s)...", kernels::CpuIsaPathName(isa));
    peak_gflops = bench::MeasureFmaPeakGflops(isa, peak_threads);
    progress.Done();
  }
  const double flops_per_token = bench::CostOf(*loaded->model).flops_per_prefill_token;
  auto prefill_gflops = [&](const bench::Timing& t) {
    return t.prefill_tps * flops_per_token / 1e9;
  };

  if (args.json) {
    nlohmann::ordered_json j;
    j["command"] = "bench throughput";
    j["model"] = loaded->dir;
    j["architecture"] = config.architecture;
    j["device"] = device_desc;
    j["numerics_version"] = kernels::kNumericsVersion;
    j["prompt_len"] = args.prompt_len;
    j["decode_tokens"] = args.decode_tokens;
    j["repeat"] = args.repeat;
    if (cpu) {
      j["cpu_isa"] = kernels::CpuIsaPathName(isa);
      j["threads"] = peak_threads;
      j["fma_peak_gflops"] = peak_gflops;
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json e;
      e["batch"] = r.batch;
      for (int m = 0; m < 2; ++m) {
        e[kernels::NumericsName(modes[m])] = {{"prefill_tokens_per_s", r.t[m].prefill_tps},
                                              {"decode_tokens_per_s", r.t[m].decode_tps},
                                              {"prefill_seconds", r.t[m].prefill_seconds},
                                              {"decode_seconds", r.t[m].decode_seconds}};
      }
      e["prefill_ratio"] = ratio(r.t[0].prefill_tps, r.t[1].prefill_tps);
      e["canonical_prefill_gflops"] = prefill_gflops(r.t[0]);
      if (cpu) e["canonical_prefill_fraction_of_peak"] = ratio(prefill_gflops(r.t[0]), peak_gflops);
      e["decode_ratio"] = ratio(r.t[0].decode_tps, r.t[1].decode_tps);
      list.push_back(e);
    }
    j["rows"] = list;
    std::cout << j.dump() << "\n";
    return kExitOk;
  }
  std::printf("model   %s (%s), %s\n", loaded->dir.c_str(), config.architecture.c_str(),
              device_desc.c_str());
  std::printf(
      "shape   prefill %d tokens per sequence in one forward; decode %d steps; "
      "best of %d; tokens/s of the forward pass\n\n",
      args.prompt_len, args.decode_tokens, args.repeat);
  std::printf("%6s | %-35s | %-35s\n", "", "prefill tokens/s", "decode tokens/s");
  std::printf("%6s | %13s %13s %7s | %13s %13s %7s\n", "batch", "canonical", "fast", "c/f",
              "canonical", "fast", "c/f");
  for (const auto& r : rows) {
    std::printf("%6lld | %13.1f %13.1f %7.3f | %13.1f %13.1f %7.3f\n",
                static_cast<long long>(r.batch), r.t[0].prefill_tps, r.t[1].prefill_tps,
                ratio(r.t[0].prefill_tps, r.t[1].prefill_tps), r.t[0].decode_tps, r.t[1].decode_tps,
                ratio(r.t[0].decode_tps, r.t[1].decode_tps));
  }
  if (cpu) {
    std::printf("\nisa     %s, fp32 FMA peak %.1f GFLOP/s on %d thread(s), measured in this run\n",
                kernels::CpuIsaPathName(isa), peak_gflops, peak_threads);
    for (const auto& r : rows) {
      std::printf(
          "        batch %lld: canonical prefill %.1f GFLOP/s of layer matmuls = %.1f%% of "
          "the peak\n",
          static_cast<long long>(r.batch), prefill_gflops(r.t[0]),
          100 * ratio(prefill_gflops(r.t[0]), peak_gflops));
    }
  }
  return kExitOk;
}

// ---- registration -----------------------------------------------------------------------

void Setup(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand(
      "bench", "Measure determinism under batching, and the throughput cost of canonical numerics");
  bench->require_subcommand(1);
  bench->footer(
      "Examples:\n"
      "  trace bench determinism --numerics canonical      # expect: 1 distinct completion\n"
      "  trace bench determinism --numerics fast --runs 50 # the baseline\n"
      "  trace bench throughput --batch 1,8 --json\n"
      "See docs/cli-bench.md.");

  auto d = std::make_shared<DeterminismArgs>();
  auto* det = bench->add_subcommand(
      "determinism",
      "Complete one prompt --runs times at temperature 0, each run continuously batched with\n"
      "a random number of random other requests; count the distinct completions");
  det->footer(
      "Each run is a small server simulation: the other requests arrive before or after the\n"
      "measured prompt, prefill in random chunks and decode a random number of tokens, all in\n"
      "shared Engine::Forward batches (prefill and decode mixed), the items in random order.\n"
      "It prints 'N distinct completions out of M runs', where later completions first left\n"
      "the first one (run, step, tokens, logits and margin), and, per batch size, the largest\n"
      "|logit difference| against the same step computed alone (batch size 1).\n"
      "Canonical numerics must give 1 completion and a difference of exactly 0.\n\n"
      "Examples:\n"
      "  trace bench determinism --runs 20 --max-tokens 16\n"
      "  trace bench determinism --model ./qwen --numerics fast --device cuda --json");
  det->add_option("--model", d->model_dir, "Model folder (default: the built-in demo model)");
  det->add_option("--device", d->device, "cpu | cuda | cuda:N")->capture_default_str();
  det->add_option("--numerics", d->numerics, "canonical | fast")
      ->check(CLI::IsMember({"canonical", "fast"}))
      ->capture_default_str();
  det->add_option("--runs", d->sim.runs, "Completions of the prompt")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  det->add_option("--prompt", d->prompt, "The prompt (plain text, tokenized)")
      ->capture_default_str();
  det->add_option("--max-tokens", d->sim.max_tokens, "Tokens per completion")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  det->add_option("--max-others", d->sim.max_others,
                  "Each run adds 0..N random other requests (batch sizes up to N+1)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  det->add_option("--other-max-len", d->sim.other_max_len, "Longest prompt of another request")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  det->add_option("--seed", d->sim.seed, "Seed of the random other requests")
      ->capture_default_str();
  det->add_option("--threads", d->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  det->add_flag("--json", d->json, "Print one JSON object");
  det->add_option("--test-perturb", d->sim.test_perturb, "")->group("");
  det->callback([d, exit_code] { *exit_code = RunDeterminism(*d); });

  auto t = std::make_shared<ThroughputArgs>();
  auto* thr = bench->add_subcommand(
      "throughput", "Prefill and decode tokens/s at given batch sizes, canonical vs fast numerics");
  thr->footer(
      "For each batch size B: B sequences of --prompt-len random tokens prefilled in one\n"
      "forward (prefill tokens/s), then --decode-tokens greedy decode steps of all B together\n"
      "(decode tokens/s). Canonical and fast engines run alternately in the same process;\n"
      "c/f is canonical / fast (1.0: determinism is free). Only the forward pass is timed.\n"
      "On the CPU it also names the instruction-set path that ran (avx512, avx2, reference;\n"
      "TRACE_CPU_ISA=scalar|avx2|avx512 caps it) and measures that path's fp32 FMA peak on\n"
      "the same threads, reporting canonical prefill GFLOP/s as a fraction of it.\n\n"
      "Examples:\n"
      "  trace bench throughput --batch 1,8 --prompt-len 64 --decode-tokens 16\n"
      "  trace bench throughput --model ./qwen --device cuda --batch 1,8,64 --json");
  thr->add_option("--model", t->model_dir, "Model folder (default: the built-in demo model)");
  thr->add_option("--device", t->device, "cpu | cuda | cuda:N")->capture_default_str();
  thr->add_option("--batch", t->batches, "Batch sizes, comma-separated")->capture_default_str();
  thr->add_option("--prompt-len", t->prompt_len, "Prompt tokens per sequence (prefill)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  thr->add_option("--decode-tokens", t->decode_tokens, "Decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  thr->add_option("--repeat", t->repeat, "Measure each point N times, keep the best")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  thr->add_option("--seed", t->seed, "Seed of the random prompts")->capture_default_str();
  thr->add_option("--threads", t->threads, "CPU threads (0: all)")->check(CLI::Range(0, 1024));
  thr->add_flag("--json", t->json, "Print one JSON object");
  thr->callback([t, exit_code] { *exit_code = RunThroughput(*t); });
}

TRACE_REGISTER_COMMAND(560, Setup);

}  // namespace
}  // namespace trace::cli::cmd_bench
