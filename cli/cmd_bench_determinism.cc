// `trace bench determinism`: runs the continuous-batching experiment in its steps
// (perf/determinism.h: load the model folder, prepare, run) and prints its report: the
// distinct completions, where the later ones first left the first, and per batch size how far
// batching moved the logits; as text, or one JSON object with --json. Presentation only;
// cmd_bench.cc registers the command and parses its options into cmd_bench_determinism::Args
// (cli/cmd_bench.h).
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
#include "cli/cmd_bench.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/kernels.h"
#include "perf/determinism.h"

namespace trace::cli::cmd_bench_determinism {
namespace {

using cmd_bench::Progress;
using perf::DeterminismResult;
using perf::DeterminismSetup;
using perf::StepView;

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

// One run's step as JSON: the token it chose, its logit, the runner-up and, when the run it
// is compared with chose `other_token` there, that token's logit.
nlohmann::ordered_json StepJson(const DeterminismSetup& setup, const DeterminismResult& r, int run,
                                size_t step, int32_t other_token) {
  const engine::Tokenizer* tokenizer = setup.loaded.tokenizer.get();
  const StepView view = perf::ViewStep(r, setup.eos, run, step, other_token);
  nlohmann::ordered_json j;
  j["run"] = run;
  if (view.record == nullptr) {
    j["id"] = nullptr;  // this run had already stopped (eos or max tokens)
    j["text"] = "";
    return j;
  }
  const perf::StepRecord& rec = *view.record;
  j["id"] = rec.token;
  j["text"] = engine::SanitizeUtf8(TokenPiece(tokenizer, rec.token));
  j["eos"] = view.eos;
  if (!rec.top.empty()) j["logit"] = Num(rec.top[0].logit);
  if (rec.top.size() > 1) {
    j["runner_up"] = rec.top[1].id;
    j["runner_up_logit"] = Num(rec.top[1].logit);
    j["margin"] = Num(view.MarginTo(rec.top[1]));
  }
  if (view.other != nullptr) {
    j["other_variant_logit"] = Num(view.other->logit);
    j["margin_to_other_variant"] = Num(view.MarginTo(*view.other));
  }
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (const auto& c : rec.top) top.push_back({{"id", c.id}, {"logit", Num(c.logit)}});
  j["top"] = top;
  return j;
}

nlohmann::ordered_json ReportJson(const Args& args, const DeterminismSetup& setup,
                                  const DeterminismResult& r) {
  const engine::Tokenizer* tokenizer = setup.loaded.tokenizer.get();
  const kernels::Numerics numerics = setup.engine->options().numerics;
  nlohmann::ordered_json j;
  j["command"] = "bench determinism";
  j["model"] = setup.loaded.dir;
  j["architecture"] = setup.loaded.model->config().architecture;
  j["device"] = setup.engine->DeviceDescription();
  j["numerics"] = kernels::NumericsName(numerics);
  if (numerics == kernels::Numerics::kCanonical) j["numerics_version"] = kernels::kNumericsVersion;
  j["runs"] = args.sim.runs;
  j["max_tokens"] = args.sim.max_tokens;
  j["max_others"] = args.sim.max_others;
  j["seed"] = args.sim.seed;
  j["prompt"] = args.prompt;
  j["prompt_tokens"] = setup.prompt.size();
  j["largest_batch"] = {{"min", r.largest_batch_min}, {"max", r.largest_batch_max}};
  j["distinct_completions"] = r.variants.size();
  nlohmann::ordered_json completions = nlohmann::ordered_json::array();
  for (const auto& v : r.variants) {
    nlohmann::ordered_json c;
    c["count"] = v.runs.size();
    c["first_run"] = v.runs[0];
    c["runs"] = v.runs;
    c["matches_reference"] = v.tokens == r.reference.tokens;
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
    e["base"] = StepJson(setup, r, d.base_run, d.step, perf::TokenAt(r, d.run, d.step));
    e["variant_step"] = StepJson(setup, r, d.run, d.step, perf::TokenAt(r, d.base_run, d.step));
    e["text_before"] = engine::SanitizeUtf8(Text(tokenizer, perf::TokensBefore(r, d.run, d.step)));
    divs.push_back(e);
  }
  j["divergences"] = divs;
  j["reference"] = {{"tokens", r.reference.tokens},
                    {"text", engine::SanitizeUtf8(Text(tokenizer, r.reference.tokens))}};
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
  return j;
}

// The distinct completions, the first ten of them.
void PrintCompletions(const Args& args, const DeterminismSetup& setup, const DeterminismResult& r) {
  const auto& variants = r.variants;
  std::printf("%zu distinct completions out of %d runs\n", variants.size(), args.sim.runs);
  for (size_t v = 0; v < variants.size() && v < 10; ++v) {
    // Clipped between characters, never inside one or inside an escape.
    const std::string text =
        QuoteForDisplay(Text(setup.loaded.tokenizer.get(), variants[v].tokens), 70);
    std::printf("  #%zu  %4zu runs (first: run %d)%s  %s\n", v + 1, variants[v].runs.size(),
                variants[v].runs[0],
                variants[v].tokens == r.reference.tokens ? ", = batch-1 reference" : "",
                text.c_str());
  }
  if (variants.size() > 10) std::printf("  ... and %zu more\n", variants.size() - 10);
}

// Where the first five later completions left the first: each side's choice at that step.
void PrintDivergences(const DeterminismSetup& setup, const DeterminismResult& r) {
  for (size_t i = 0; i < r.divergences.size() && i < 5; ++i) {
    const auto& d = r.divergences[i];
    std::printf("\n#%zu diverged from #1 at step %zu (run %d vs run %d):\n", d.variant + 1, d.step,
                d.run, d.base_run);
    for (int side = 0; side < 2; ++side) {
      const int run = side == 0 ? d.base_run : d.run;
      const int other = side == 0 ? d.run : d.base_run;
      const StepView view =
          perf::ViewStep(r, setup.eos, run, d.step, perf::TokenAt(r, other, d.step));
      if (view.record == nullptr) {
        std::printf("  run %-4d stopped before this step\n", run);
        continue;
      }
      const perf::StepRecord& rec = *view.record;
      std::printf("  run %-4d chose %6d %s", run, rec.token,
                  QuoteForDisplay(TokenPiece(setup.loaded.tokenizer.get(), rec.token)).c_str());
      if (!rec.top.empty()) std::printf(" logit %.9g", static_cast<double>(rec.top[0].logit));
      if (view.other != nullptr) {
        std::printf(", %d at %.9g: margin %.3g", view.other->id,
                    static_cast<double>(view.other->logit), view.MarginTo(*view.other));
      } else if (rec.top.size() > 1) {
        std::printf(", runner-up %d at %.9g: margin %.3g", rec.top[1].id,
                    static_cast<double>(rec.top[1].logit), view.MarginTo(rec.top[1]));
      }
      std::printf("\n");
    }
  }
}

// Per batch size, the largest |logit difference| against batch size 1.
void PrintLogitsByBatch(const DeterminismResult& r) {
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
}

void PrintReport(const Args& args, const DeterminismSetup& setup, const DeterminismResult& r) {
  const kernels::Numerics numerics = setup.engine->options().numerics;
  std::printf("model     %s (%s), %s, %s numerics%s\n",
              EscapePathForDisplay(setup.loaded.dir).c_str(),
              EscapeForDisplay(setup.loaded.model->config().architecture).c_str(),
              setup.engine->DeviceDescription().c_str(), kernels::NumericsName(numerics),
              numerics == kernels::Numerics::kCanonical
                  ? (std::string(" (") + kernels::kNumericsVersion + ")").c_str()
                  : "");
  std::printf("prompt    %s (%zu tokens), greedy, up to %d tokens\n",
              QuoteForDisplay(args.prompt).c_str(), setup.prompt.size(), args.sim.max_tokens);
  std::printf(
      "batching  each run with 0..%d random other requests (largest batch per run %lld..%lld), "
      "seed %llu, %.1fs\n\n",
      args.sim.max_others, static_cast<long long>(r.largest_batch_min),
      static_cast<long long>(r.largest_batch_max), static_cast<unsigned long long>(args.sim.seed),
      r.seconds);
  PrintCompletions(args, setup, r);
  PrintDivergences(setup, r);
  PrintLogitsByBatch(r);
}

}  // namespace

int Run(const Args& args) {
  const std::string what = "bench determinism";
  Result<EngineSetup> flags = ResolveEngineFlags(args.engine, EngineUse::kBench);
  if (!flags.ok()) return ReportError(flags.status());
  Result<perf::LoadedModel> loaded = perf::LoadModelFolder(flags->model_dir);
  if (!loaded.ok()) return ReportError(loaded.status());
  Result<DeterminismSetup> setup =
      perf::PrepareDeterminism(std::move(*loaded), args.prompt, flags->engine, args.sim);
  if (!setup.ok()) return ReportError(setup.status().WithContext(what));

  Progress progress;
  Result<DeterminismResult> result =
      perf::RunDeterminism(*setup, args.sim, [&](int run, double seconds) {
        if (run < 0) {
          progress.Update("reference run (batch size 1)...");
        } else {
          progress.Update("run %d/%d (%.1fs)", run + 1, args.sim.runs, seconds);
        }
      });
  progress.Done();
  if (!result.ok()) return ReportError(result.status().WithContext(what));
  if (args.json) {
    PrintJson(std::cout, ReportJson(args, *setup, *result), -1);
  } else {
    PrintReport(args, *setup, *result);
  }
  return kExitOk;
}

}  // namespace trace::cli::cmd_bench_determinism
