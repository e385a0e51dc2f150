#!/usr/bin/env python3
"""The paired speed comparison on quantized files of bench/llama_cpp/compare.sh --quant (run
that; it makes the files with llama.cpp's own llama-quantize and passes the paths).

    compare_quant.py --engine-bench BIN --llama-bench BIN --gguf TYPE=FILE [--gguf ...]
                     [--pairs N] [--threads N] [--prefill N] [--decode N] [--repeat N]
                     [--llama-args STR] [--json]

For each file, --pairs pairs, in an order that alternates from pair to pair (ours first, then
theirs first), both engines reading the very same GGUF file:
  ours    engine_bench --once --model FILE at --threads (canonical, best ISA path): prefill of
          --prefill tokens and --decode steps at batch 1, --repeat times each, mean;
  theirs  llama-bench -m FILE -p PREFILL -n DECODE -t THREADS -r REPEAT.
The result per file is the median over the pairs of each pair's ratio ours / theirs, with the
spread (min..max), against issue 43's targets: decode >= 1.5x on Q8_0 and Q4_K_M, prefill
>= 1.0x on every type.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from paired import run_json as _run_json  # noqa: E402 (bench/common/paired.py)
from paired import summary  # noqa: E402

DECODE_TARGETS = {"Q8_0": 1.5, "Q4_K_M": 1.5}
PREFILL_TARGET = 1.0


def run_json(cmd: list[str], what: str):
    return _run_json(cmd, what, "compare")


def ours(args, gguf: str) -> dict:
    return run_json([args.engine_bench, "--once", "--model", gguf, "--threads",
                     str(args.threads), "--prefill", str(args.prefill), "--decode",
                     str(args.decode), "--repeat", str(args.repeat)],
                    f"engine_bench on {os.path.basename(gguf)}")


def theirs(args, gguf: str) -> dict:
    """llama-bench's prefill and decode tokens/s (it reports one row per test)."""
    rows = run_json([args.llama_bench, "-m", gguf, "-p", str(args.prefill), "-n",
                     str(args.decode), "-t", str(args.threads), "-r", str(args.repeat), "-o",
                     "json"] + shlex.split(args.llama_args),
                    f"llama-bench on {os.path.basename(gguf)}")
    out = {}
    for row in rows:
        key = "prefill" if row.get("n_prompt", 0) > 0 else "decode"
        out[key] = float(row["avg_ts"])
        out.setdefault("build", f"{row.get('build_number')} ({row.get('build_commit')})")
    if "prefill" not in out or "decode" not in out:
        sys.exit(f"compare: llama-bench on {gguf} printed no prefill and decode rows")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-bench", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--gguf", action="append", required=True, metavar="TYPE=FILE")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--llama-args", default="")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = sys.stderr if args.json else sys.stdout
    say = lambda *a: print(*a, file=out, flush=True)  # noqa: E731 (progress, pair by pair)

    result = {"threads": args.threads, "prefill_tokens": args.prefill,
              "decode_tokens": args.decode, "repeat": args.repeat, "files": {}}
    for spec in args.gguf:
        qtype, _, path = spec.partition("=")
        if not path:
            sys.exit(f"compare: --gguf wants TYPE=FILE, got '{spec}'")
        say(f"\n{qtype}: {path} ({os.path.getsize(path) / 1e6:.0f} MB), {args.pairs} pairs")
        say(f"{'pair':>4} {'order':>6} | {'prefill ours':>12} {'llama.cpp':>10} {'ratio':>6} | "
            f"{'decode ours':>11} {'llama.cpp':>10} {'ratio':>6} | {'load':>4}")
        pairs = []
        for i in range(args.pairs):
            ours_first = i % 2 == 0
            started = time.time()
            a = ours(args, path) if ours_first else None
            b = theirs(args, path)
            if a is None:
                a = ours(args, path)
            row = {"order": "ours" if ours_first else "theirs", "isa": a["isa"],
                   "prefill_ours": a["prefill_tps"], "prefill_llama": b["prefill"],
                   "decode_ours": a["decode_tps"], "decode_llama": b["decode"],
                   "llama_build": b["build"], "load": os.getloadavg()[0],
                   "seconds": round(time.time() - started, 1)}
            row["prefill_ratio"] = row["prefill_ours"] / row["prefill_llama"]
            row["decode_ratio"] = row["decode_ours"] / row["decode_llama"]
            pairs.append(row)
            say(f"{i + 1:>4} {row['order']:>6} | {row['prefill_ours']:>12.1f} "
                f"{row['prefill_llama']:>10.1f} {row['prefill_ratio']:>5.2f}x | "
                f"{row['decode_ours']:>11.2f} {row['decode_llama']:>10.2f} "
                f"{row['decode_ratio']:>5.2f}x | {row['load']:>4.1f}")
        entry = {"file": path, "isa": pairs[0]["isa"], "llama_build": pairs[0]["llama_build"],
                 "pairs": pairs}
        for key in ("prefill", "decode"):
            s = summary([r[f"{key}_ratio"] for r in pairs])
            target = PREFILL_TARGET if key == "prefill" else DECODE_TARGETS.get(qtype)
            if target is not None:
                s["target"] = target
                s["met"] = s["median"] >= target
            entry[key] = s
        result["files"][qtype] = entry
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print()
    for qtype, e in result["files"].items():
        for key in ("prefill", "decode"):
            s = e[key]
            verdict = ""
            if "target" in s:
                verdict = (f"; target >= {s['target']}x: met" if s["met"] else
                           f"; target >= {s['target']}x: missed by "
                           f"{100 * (1 - s['median'] / s['target']):.0f}%")
            print(f"{qtype:<8} {key:<8} ours / llama.cpp median {s['median']:.2f}x "
                  f"(spread {s['min']:.2f}..{s['max']:.2f}){verdict}")
    first = next(iter(result["files"].values()))
    print(f"our ISA path: {first['isa']}; llama.cpp build {first['llama_build']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
