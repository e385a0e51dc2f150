"""Helpers shared by the paired benchmark scripts (bench/llama_cpp/compare_speed.py,
bench/engine/thread_scaling.py): run a command that prints one JSON document, and summarise
per-pair figures as median and spread."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys


def run_json(cmd: list[str], what: str, prog: str):
    """Runs cmd and returns its stdout parsed as JSON; exits with a one-line error naming
    `what` (and the command's last lines) when it fails or prints something else."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        sys.exit(f"{prog}: {what} failed (exit {proc.returncode}): {' | '.join(tail)}\n"
                 f"  command: {' '.join(cmd)}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{prog}: {what} printed no JSON: {proc.stdout[:200]!r}")


def summary(values: list[float]) -> dict:
    """Median, min and max of per-pair figures, with the figures themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}
