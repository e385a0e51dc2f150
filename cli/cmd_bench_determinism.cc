// `trace bench determinism`: runs the continuous-batching experiment (bench::RunDeterminism,
// bench/common/determinism.h) and prints its report: the distinct completions, where the
// later ones first left the first, and per batch size how far batching moved the logits;
// as text, or one JSON object with --json. Presentation only; cmd_bench.cc registers the
// command and parses its options into cmd_bench_determinism::Args (cli/cmd_bench.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "base/escape.h"
#include "base/json_print.h"
#include "bench/common/determinism.h"
#include "cli/cmd_bench.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/kernels.h"

namespace trace::cli::cmd_bench_determinism {
namespace {

using bench::StepRecord;
using cmd_bench::LoadModel;
using cmd_bench::Progress;
using cmd_bench::ValidateDevice;

// nlohmann writes NaN/inf as null; keep finite values exact.
nlohmann::ordered_json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

std::string TokenPiece(const engine::Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr || id < 0) return "";
  return tokenizer->Decode(std::span<const int32_t>(&id, 1));
}

std::string Text(const engine::Tokenizer* tokenizer, const std::vector<int32_t>& ids) {
  if (tokenizer == nullptr) return "";
  return tokenizer->Decode(ids, /*skip_special=*/true);
}

}  // namespace

int Run(const Args& args) {
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
    PrintJson(std::cout, j, -1);
    return kExitOk;
  }

  std::printf("model     %s (%s), %s, %s numerics%s\n", EscapePathForDisplay(loaded->dir).c_str(),
              EscapeForDisplay(config.architecture).c_str(), device_desc.c_str(), numerics_name,
              options.numerics == kernels::Numerics::kCanonical
                  ? (std::string(" (") + kernels::kNumericsVersion + ")").c_str()
                  : "");
  std::printf("prompt    %s (%zu tokens), greedy, up to %d tokens\n",
              QuoteForDisplay(args.prompt).c_str(), prompt.size(), args.sim.max_tokens);
  std::printf(
      "batching  each run with 0..%d random other requests (largest batch per run %lld..%lld), "
      "seed %llu, %.1fs\n\n",
      args.sim.max_others, static_cast<long long>(r.largest_batch_min),
      static_cast<long long>(r.largest_batch_max), static_cast<unsigned long long>(args.sim.seed),
      r.seconds);
  std::printf("%zu distinct completions out of %d runs\n", variants.size(), args.sim.runs);
  for (size_t v = 0; v < variants.size() && v < 10; ++v) {
    // Clipped between characters, never inside one or inside an escape.
    const std::string text = QuoteForDisplay(Text(tokenizer, variants[v].tokens), 70);
    std::printf("  #%zu  %4zu runs (first: run %d)%s  %s\n", v + 1, variants[v].runs.size(),
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
      std::printf("  run %-4d chose %6d %s", run, rec.token,
                  QuoteForDisplay(TokenPiece(tokenizer, rec.token)).c_str());
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

}  // namespace trace::cli::cmd_bench_determinism
