// `trace bench`: the two experiments that show what the numerics contract buys and costs.
//
//   trace bench determinism  the same prompt completed N times at temperature 0, each time
//                            continuously batched with a random number of random other
//                            requests; counts the distinct completions, shows where the
//                            first ones diverged, and how far batching moved the logits.
//   trace bench throughput   prefill and decode tokens/s at given batch sizes, canonical and
//                            fast numerics in the same run, with the ratio canonical/fast.
//
// This file registers the command and parses the options; cmd_bench_determinism.cc and
// cmd_bench_throughput.cc run each experiment and print its report (cli/cmd_bench.h: what
// the three share). The experiments live in perf/ (determinism.h: the continuous-batching
// simulation; throughput.h: the sweep; machine_peak.h: the FMA peak), shared with the programs
// under bench/; the engine flags are cli/engine_flags.h's. Everything random there comes from a
// SplitMix64 stream keyed by --seed and the run index, so a bench run is itself reproducible.
#include <memory>

#include "cli/cmd_bench.h"
#include "cli/command.h"

namespace trace::cli::cmd_bench {
namespace {

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

  auto d = std::make_shared<cmd_bench_determinism::Args>();
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
  AddEngineFlags(det, EngineUse::kBench, &d->engine);
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
  det->add_flag("--json", d->json, "Print one JSON object");
  det->add_option("--test-perturb", d->sim.test_perturb, "")->group("");
  det->callback([d, exit_code] { *exit_code = cmd_bench_determinism::Run(*d); });

  auto t = std::make_shared<cmd_bench_throughput::Args>();
  auto* thr = bench->add_subcommand(
      "throughput", "Prefill and decode tokens/s at given batch sizes, canonical vs fast numerics");
  thr->footer(
      "For each batch size B: B sequences of --prompt-len random tokens prefilled in one\n"
      "forward (prefill tokens/s), then --decode-tokens greedy decode steps of all B together\n"
      "(decode tokens/s). Canonical and fast engines run alternately in the same process;\n"
      "c/f is canonical / fast (1.0: determinism is free). Only the forward pass is timed.\n"
      "On the CPU it also names the instruction-set path that ran (avx512, avx2, neon,\n"
      "reference; TRACE_CPU_ISA=scalar|avx2|avx512|neon caps it) and measures that\n"
      "path's fp32 FMA peak on the same threads, reporting canonical prefill GFLOP/s as a\n"
      "fraction of it.\n\n"
      "Examples:\n"
      "  trace bench throughput --batch 1,8 --prompt-len 64 --decode-tokens 16\n"
      "  trace bench throughput --model ./qwen --device cuda --batch 1,8,64 --json");
  AddEngineFlags(thr, EngineUse::kBenchSweep, &t->engine);
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
  thr->add_flag("--json", t->json, "Print one JSON object");
  thr->callback([t, exit_code] { *exit_code = cmd_bench_throughput::Run(*t); });
}

TRACE_REGISTER_COMMAND(560, Setup);

}  // namespace
}  // namespace trace::cli::cmd_bench
