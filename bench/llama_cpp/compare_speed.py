#!/usr/bin/env python3
"""The paired speed comparison of bench/llama_cpp/compare.sh (run that; it passes the paths).

    compare_speed.py --engine-bench BIN --model DIR --llama-bench BIN --f32 F32.gguf
                     --bf16 BF16.gguf [--pairs N] [--threads N] [--prefill N] [--decode N]
                     [--repeat N] [--json]

Each pair runs, in an order that alternates from pair to pair (ours first, then theirs first),
so that load drifting on a shared machine hits both sides alike:
  ours    engine_bench --once at --threads (canonical, best ISA path): prefill of --prefill
          tokens and --decode steps at batch 1, --repeat times each, mean;
  theirs  llama-bench -m F32 -p PREFILL -n 0 -t THREADS -r REPEAT (prefill, F32 weights) and
          llama-bench -m BF16 -p 0 -n DECODE -t THREADS -r REPEAT (decode, BF16 weights);
  ours    engine_bench --once at 1 thread, prefill only (the 1 -> N thread scaling; not run
          when --threads is 1).
The result is the median over the pairs of each pair's ratio, with the spread (min..max).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from paired import summary  # noqa: E402 (bench/common/paired.py)
from paired import run_json as _run_json  # noqa: E402


def run_json(cmd: list[str], what: str):
    return _run_json(cmd, what, "compare")

TARGETS = {"prefill": 1.0, "decode": 0.9, "scaling": 1.8, "scaling_cpu_bound": 1.8}


def ours(args, threads: int, prefill: int, decode: int) -> dict:
    return run_json([args.engine_bench, "--once", "--model", args.model, "--threads",
                     str(threads), "--prefill", str(prefill), "--decode", str(decode),
                     "--repeat", str(args.repeat)], f"engine_bench at {threads} threads")


LLAMA_INFO = {}  # what llama-bench says about itself and its settings (the first run's)


def theirs(args, gguf: str, prefill: int, decode: int) -> float:
    rows = run_json([args.llama_bench, "-m", gguf, "-p", str(prefill), "-n", str(decode),
                     "-t", str(args.threads), "-r", str(args.repeat), "-o", "json"] +
                    shlex.split(args.llama_args),
                    f"llama-bench on {os.path.basename(gguf)}")
    if len(rows) != 1 or "avg_ts" not in rows[0]:
        sys.exit(f"compare: llama-bench printed {len(rows)} results, expected 1")
    if not LLAMA_INFO:
        for key in ("build_commit", "build_number", "cpu_info", "backends", "flash_attn",
                    "type_k", "type_v", "n_batch", "n_ubatch", "poll"):
            LLAMA_INFO[key] = rows[0].get(key)
    return float(rows[0]["avg_ts"])


def load() -> float:
    return os.getloadavg()[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--engine-bench", "--model", "--llama-bench", "--f32", "--bf16"):
        ap.add_argument(name, required=True)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--llama-args", default="",
                    help="more llama-bench options, e.g. '--poll 0' (default: none)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = sys.stderr if args.json else sys.stdout
    say = lambda *a: print(*a, file=out, flush=True)  # noqa: E731 (progress, pair by pair)

    pairs = []
    loads = [load()]
    isa = None
    say(f"{args.pairs} pairs, {args.threads} threads, prefill {args.prefill}, decode "
        f"{args.decode}, {args.repeat} repetitions per measurement (load average {loads[0]:.1f})")
    say(f"{'pair':>4} {'order':>6} | {'prefill ours':>12} {'llama F32':>10} {'ratio':>6} | "
        f"{'decode ours':>11} {'llama BF16':>10} {'ratio':>6} | {'prefill x1':>10} "
        f"{'scaling (CPU bound)':>19} | {'load':>4}")
    for i in range(args.pairs):
        ours_first = i % 2 == 0
        started = time.time()
        p = {}
        if ours_first:
            p["ours"] = ours(args, args.threads, args.prefill, args.decode)
        p["theirs_prefill"] = theirs(args, args.f32, args.prefill, 0)
        p["theirs_decode"] = theirs(args, args.bf16, 0, args.decode)
        if not ours_first:
            p["ours"] = ours(args, args.threads, args.prefill, args.decode)
        p["ours_1"] = ours(args, 1, args.prefill, 0) if args.threads > 1 else p["ours"]
        isa = p["ours"]["isa"]
        row = {
            "order": "ours" if ours_first else "theirs",
            "prefill_ours": p["ours"]["prefill_tps"], "prefill_llama_f32": p["theirs_prefill"],
            "decode_ours": p["ours"]["decode_tps"], "decode_llama_bf16": p["theirs_decode"],
            "prefill_ours_1_thread": p["ours_1"]["prefill_tps"],
            "load": load(), "seconds": round(time.time() - started, 1),
        }
        row["prefill_ratio"] = row["prefill_ours"] / row["prefill_llama_f32"]
        row["decode_ratio"] = row["decode_ours"] / row["decode_llama_bf16"]
        row["scaling"] = row["prefill_ours"] / row["prefill_ours_1_thread"]
        # The thread pool spins at most ~100 us between calls, then blocks, so process CPU time
        # is close to the work whatever the load: N x (CPU-s at 1 thread) / (CPU-s at N)
        # bounds the wall scaling an idle machine would give (load imbalance, time blocked at
        # a barrier, is not counted). bench/engine/thread_scaling.py measures it alone.
        row["scaling_cpu_bound"] = (args.threads * p["ours_1"]["prefill_cpu_seconds"] /
                                    p["ours"]["prefill_cpu_seconds"])
        loads.append(row["load"])
        pairs.append(row)
        say(f"{i + 1:>4} {row['order']:>6} | {row['prefill_ours']:>12.1f} "
            f"{row['prefill_llama_f32']:>10.1f} {row['prefill_ratio']:>5.2f}x | "
            f"{row['decode_ours']:>11.2f} {row['decode_llama_bf16']:>10.2f} "
            f"{row['decode_ratio']:>5.2f}x | {row['prefill_ours_1_thread']:>10.1f} "
            f"{row['scaling']:>6.2f}x ({row['scaling_cpu_bound']:.2f}x CPU) | {row['load']:>4.1f}")

    result = {"isa": isa, "llama_cpp": LLAMA_INFO, "threads": args.threads, "prefill_tokens": args.prefill,
              "decode_tokens": args.decode, "repeat": args.repeat, "pairs": pairs,
              "load_average": summary(loads)}
    ratios = [("prefill", "prefill_ratio"), ("decode", "decode_ratio")]
    if args.threads > 1:
        ratios += [("scaling", "scaling"), ("scaling_cpu_bound", "scaling_cpu_bound")]
    for key, field in ratios:
        s = summary([r[field] for r in pairs])
        s["target"] = TARGETS[key]
        s["met"] = s["median"] >= TARGETS[key]
        result[key] = s
    for key in ("prefill_ours", "prefill_llama_f32", "decode_ours", "decode_llama_bf16",
                "prefill_ours_1_thread"):
        result[key] = summary([r[key] for r in pairs])
    if args.json:
        print(json.dumps(result, indent=1))
        return 0

    def line(name: str, key: str, what: str) -> None:
        s = result[key]
        verdict = "met" if s["met"] else f"missed by {100 * (1 - s['median'] / s['target']):.0f}%"
        print(f"{name:<34} median {s['median']:.2f}x (spread {s['min']:.2f}..{s['max']:.2f}); "
              f"target >= {s['target']}x {what}: {verdict}")

    print(f"\nour ISA path: {isa}; load average during the run {min(loads):.1f}..{max(loads):.1f} "
          f"on {os.cpu_count()} CPUs")
    info = LLAMA_INFO
    flash = {-1: "auto", 0: "off", 1: "on"}.get(info.get("flash_attn"), info.get("flash_attn"))
    print(f"llama.cpp build {info.get('build_number')} ({info.get('build_commit')}), "
          f"{info.get('backends')}, flash attention {flash}, KV cache "
          f"{info.get('type_k')}/{info.get('type_v')}, poll {info.get('poll')}; extra options: "
          f"'{args.llama_args or 'none'}'")
    print(f"medians tokens/s: prefill ours {result['prefill_ours']['median']:.1f} vs llama.cpp "
          f"F32 {result['prefill_llama_f32']['median']:.1f}; decode ours "
          f"{result['decode_ours']['median']:.2f} vs llama.cpp BF16 "
          f"{result['decode_llama_bf16']['median']:.2f}")
    line(f"prefill {args.prefill} ours / llama.cpp F32", "prefill", "")
    line("decode b1 ours / llama.cpp BF16", "decode", "")
    if args.threads > 1:
        line(f"our prefill {args.threads} / 1 threads", "scaling", "(wall)")
        line("  its bound from CPU time", "scaling_cpu_bound", "(not the target's measure)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
