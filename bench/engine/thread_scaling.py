#!/usr/bin/env python3
"""Prefill thread scaling of the CPU engine, 1 thread against N, paired and alternating.

    bench/engine/thread_scaling.py [--bench BIN[=LABEL]]... [--pairs N] [--threads N]
                                   [--prefill N] [--repeat N] [--model DIR] [--json]

Outside CI (a run takes minutes). Each pair runs `engine_bench --once --decode 0` (canonical
numerics, best ISA path: a warm-up, then --repeat prefills of --prefill tokens, mean tokens/s)
at 1 thread and at --threads threads for every --bench binary, in an order that alternates
from pair to pair (which binary first, and 1 thread or N first), so that load drifting on a
shared machine hits every side alike. Per binary it prints each pair's scaling
(tokens/s at N / tokens/s at 1) and the median with its spread (min..max); the CPU-time bound
N x (CPU-s at 1) / (CPU-s at N), which says whether N threads spend more CPU than 1 for the same
work (idle workers spin at most ~100 us between calls, so it is close to the work done); and
the load average (/proc/loadavg, 1 minute) before and after each pair: on a loaded machine
wall-time scaling measures the load, not the engine. With two binaries (say main's and a
branch's), also the ratio second / first of the N-thread tokens/s and of the scaling, pair by
pair. Target (issue 15): scaling >= 1.8x at 2 threads on an idle machine.

Example (main's engine_bench built in another build folder against this branch's):
  bench/engine/thread_scaling.py --bench ../main/build/bench/engine/engine_bench=main \\
      --bench build/bench/engine/engine_bench=branch --pairs 8
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from paired import run_json, summary  # noqa: E402 (bench/common/paired.py)

TARGET = 1.8


def run_once(bench: str, threads: int, args) -> dict:
    cmd = [bench, "--once", "--threads", str(threads), "--prefill", str(args.prefill),
           "--decode", "0", "--repeat", str(args.repeat)]
    if args.model:
        cmd += ["--model", args.model]
    out = run_json(cmd, f"{bench} at {threads} threads", "thread_scaling")
    if out.get("prefill_tps", 0) <= 0:
        sys.exit(f"thread_scaling: {bench} reported no prefill figure: {out!r:.200}")
    return out


def parse_bench(spec: str, index: int) -> tuple[str, str]:
    path, _, label = spec.partition("=")
    if not os.access(path, os.X_OK):
        sys.exit(f"thread_scaling: --bench {path}: not an executable file (build the "
                 f"engine_bench target: cmake --build build --target engine_bench)")
    return path, label or f"bench{index + 1}"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", action="append", metavar="BIN[=LABEL]",
                    help="an engine_bench binary, optionally labelled; once or twice "
                         "(default: build/bench/engine/engine_bench)")
    ap.add_argument("--pairs", type=int, default=8, help="pairs per binary (default 8)")
    ap.add_argument("--threads", type=int, default=2, help="the N of 1 vs N (default 2)")
    ap.add_argument("--prefill", type=int, default=128, help="prefill tokens (default 128)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="prefills per measurement, averaged (default 3)")
    ap.add_argument("--model", default="",
                    help="a trace model folder (default: engine_bench's qwen2.5-0.5b preset)")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object on stdout (progress goes to stderr)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    specs = args.bench or [os.path.join(root, "build/bench/engine/engine_bench")]
    if len(specs) > 2:
        ap.error("at most two --bench binaries")
    if args.pairs < 1 or args.threads < 2 or args.prefill < 1 or args.repeat < 1:
        ap.error("--pairs, --prefill and --repeat must be >= 1 and --threads >= 2")
    benches = [parse_bench(s, i) for i, s in enumerate(specs)]
    out = sys.stderr if args.json else sys.stdout
    say = lambda *a: print(*a, file=out, flush=True)  # noqa: E731 (progress, pair by pair)

    say(f"{args.pairs} pairs, 1 vs {args.threads} threads, prefill {args.prefill}, "
        f"{args.repeat} prefills per measurement, load average {os.getloadavg()[0]:.2f}")
    header = f"{'pair':>4} | " + " | ".join(
        f"{label + ' x1':>12} {'xN':>8} {'scaling':>7} {'CPU bound':>9}" for _, label in benches)
    say(header + " | load before, after")
    rows = []
    for i in range(args.pairs):
        order = benches if i % 2 == 0 else benches[::-1]
        thread_order = [1, args.threads] if (i // 2) % 2 == 0 else [args.threads, 1]
        load_before = os.getloadavg()[0]
        got = {}
        for path, label in order:
            for t in thread_order:
                got[(label, t)] = run_once(path, t, args)
        row = {"pair": i + 1, "load_before": load_before, "load_after": os.getloadavg()[0],
               "first": order[0][1], "first_threads": thread_order[0]}
        for _, label in benches:
            one, many = got[(label, 1)], got[(label, args.threads)]
            row[label] = {
                "isa": many["isa"],
                "tps_1": one["prefill_tps"], "tps_n": many["prefill_tps"],
                "scaling": many["prefill_tps"] / one["prefill_tps"],
                "cpu_bound": args.threads * one["prefill_cpu_seconds"] /
                many["prefill_cpu_seconds"],
            }
        rows.append(row)
        say(f"{i + 1:>4} | " + " | ".join(
            f"{row[l]['tps_1']:>12.1f} {row[l]['tps_n']:>8.1f} {row[l]['scaling']:>6.2f}x "
            f"{row[l]['cpu_bound']:>8.2f}x" for _, l in benches) +
            f" | {row['load_before']:.2f}, {row['load_after']:.2f}")

    loads = [r["load_before"] for r in rows] + [r["load_after"] for r in rows]
    result = {"threads": args.threads, "prefill_tokens": args.prefill, "repeat": args.repeat,
              "pairs": rows, "load_average": summary(loads), "target": TARGET, "benches": {}}
    for path, label in benches:
        r = {"path": path, "isa": rows[0][label]["isa"]}
        for key in ("scaling", "cpu_bound", "tps_1", "tps_n"):
            r[key] = summary([row[label][key] for row in rows])
        r["met"] = r["scaling"]["median"] >= TARGET
        result["benches"][label] = r
    if len(benches) == 2:
        a, b = benches[0][1], benches[1][1]
        result["second_vs_first"] = {
            "tps_n": summary([row[b]["tps_n"] / row[a]["tps_n"] for row in rows]),
            "scaling": summary([row[b]["scaling"] / row[a]["scaling"] for row in rows]),
        }

    def span(s: dict) -> str:
        return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"

    for _, label in benches:
        r = result["benches"][label]
        say(f"{label}: scaling 1 -> {args.threads} threads median {span(r['scaling'])}, CPU-time "
            f"bound {span(r['cpu_bound'])}, target >= {TARGET}x: "
            f"{'met' if r['met'] else 'not met'} ({r['isa']})")
    if len(benches) == 2:
        s = result["second_vs_first"]
        say(f"{benches[1][1]} / {benches[0][1]}: {args.threads}-thread prefill "
            f"{span(s['tps_n'])}, scaling {span(s['scaling'])}")
    say(f"load average over the run: median {result['load_average']['median']:.2f} "
        f"({result['load_average']['min']:.2f}-{result['load_average']['max']:.2f}); on "
        f"{os.cpu_count()} CPUs, above ~0.3 the wall-time figures measure the load too")
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
