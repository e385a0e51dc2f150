#!/usr/bin/env python3
"""Compare llama.cpp's logits for a token sequence with trace's, within a stated tolerance.

    check_logits.py --label NAME --tolerance REL [--require-argmax] TRACE.json LLAMA.txt

TRACE.json is `trace logits --tokens ... --all --json` (canonical numerics); LLAMA.txt is
llama_logits' output (one logit per line, same position: after the last token). The measure
is max |ours - theirs| over the whole vocabulary divided by the spread of our logits
(max - min): the conversion is faithful when it is at most --tolerance. Prints one line (or,
with --json, one JSON object); exit status 1 when the check fails.
"""
from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--tolerance", type=float, required=True,
                    help="largest allowed max|diff| / spread of our logits")
    ap.add_argument("--require-argmax", action="store_true",
                    help="also fail when the two argmax ids differ")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("ours")
    ap.add_argument("theirs")
    args = ap.parse_args()

    ours = json.load(open(args.ours))["logits"]
    theirs = [float(line) for line in open(args.theirs) if line.strip()]
    if len(ours) != len(theirs):
        print(f"check_logits: {args.label}: {len(ours)} logits from trace, {len(theirs)} from "
              f"llama.cpp", file=sys.stderr)
        return 1
    diffs = [abs(a - b) for a, b in zip(ours, theirs)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    spread = max(ours) - min(ours)
    rel = diffs[worst] / spread
    argmax_ours = max(range(len(ours)), key=ours.__getitem__)
    argmax_theirs = max(range(len(theirs)), key=theirs.__getitem__)
    top = sorted(range(len(ours)), key=lambda i: -ours[i])[:10]
    top_theirs = set(sorted(range(len(theirs)), key=lambda i: -theirs[i])[:10])
    overlap = sum(1 for i in top if i in top_theirs)
    ok = rel <= args.tolerance and (argmax_ours == argmax_theirs or not args.require_argmax)
    result = {
        "label": args.label, "ok": ok, "max_abs_diff": diffs[worst], "at_id": worst,
        "spread": spread, "relative": rel, "tolerance": args.tolerance,
        "argmax_ours": argmax_ours, "argmax_theirs": argmax_theirs, "top10_overlap": overlap,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"  {args.label}: max |diff| {diffs[worst]:.3g} (id {worst}) = {rel:.2e} of the logit "
              f"spread {spread:.3g} (tolerance {args.tolerance:g}); argmax {argmax_ours} vs "
              f"{argmax_theirs}; top-10 overlap {overlap}/10: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
