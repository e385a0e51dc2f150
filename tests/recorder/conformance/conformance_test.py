#!/usr/bin/python3
"""Differential conformance of what the model sees (issue 40).

Generates random valid requests for each API (OpenAI Chat Completions, legacy Completions,
Responses, Anthropic Messages), sends them through `trace record` in one run, and checks
that every recorded `rendered_prompt` is byte-equal to an independent reference: the
request converted to chat messages by converters.py (written from the APIs' documentation)
and rendered by Python's jinja2 with the model's own chat template, configured as
transformers' apply_chat_template (reference.py). For every equal case (or --token-sample
of them) the recorded `prompt_token_ids` are also compared with @lenml/tokenizers
(tests/tokenizer/js_tokenize.js) encoding the reference text.

Usage:
  conformance_test.py TRACE_BINARY [--seed N] [--cases N] [--workers N] [--apis a,b]
                      [--node NODE] [--token-sample N] [--keep DIR] [--examples N]
                      [--reuse DIR]

A larger campaign by hand: --seed 7 --cases 20000 (about 1,000 cases per 5 s on 2 cores).

Mismatches are grouped by cause: a known deviation that explains them (diagnosis.py), else
where the two prompts first differ (the template structure there). Each group prints its
count, the generator's tags all its cases share, and its smallest request with a unified
diff (reference -> trace). Then the coverage (cases per tag) and the counts per API.
Exit status: 0 all equal, 1 mismatches or rejected requests, 2 the run itself failed.
"""
import argparse
import collections
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import converters  # noqa: E402
import diagnosis  # noqa: E402
import reference  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's, with python3-jinja2


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="the trace binary")
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--cases", type=int, default=2000, help="total, over all APIs")
    ap.add_argument("--workers", type=int, default=8, help="concurrent clients")
    ap.add_argument("--apis", default="chat,responses,anthropic,completions")
    ap.add_argument("--node", default=shutil.which("node"), help="node, for the token check")
    ap.add_argument("--token-sample", type=int, default=None,
                    help="check the token ids of this many equal cases (default all; 0 none)")
    ap.add_argument("--keep", help="keep the store, log and export in this folder")
    ap.add_argument("--examples", type=int, default=1, help="examples printed per group")
    ap.add_argument("--big-ints", action="store_true",
                    help="also send integers outside int64 (a documented limitation of trace)")
    ap.add_argument("--reuse", metavar="DIR",
                    help="compare the run kept in DIR by --keep again, without recording")
    return ap.parse_args()


def fail(msg):
    print(f"ERROR: {msg}", file=sys.stderr)
    sys.exit(2)


# --- the run ------------------------------------------------------------------------------

def record(args, workdir):
    """Runs the agent under `trace record` on a scratch store and data home; returns the
    run id, the log records, the agent's errors and the environment used."""
    env = dict(os.environ, XDG_DATA_HOME=os.path.join(workdir, "xdg"),
               TRACE_STORE=os.path.join(workdir, "t.db"))
    log_path = os.path.join(workdir, "log.jsonl")
    cmd = [args.trace, "record", "--", PYTHON, os.path.join(HERE, "agent.py"),
           "--seed", str(args.seed), "--cases", str(args.cases), "--workers",
           str(args.workers), "--apis", args.apis, "--out", log_path] + \
        (["--big-ints"] if args.big_ints else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(log_path):
        fail(f"trace record exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    with open(log_path, encoding="utf-8") as f:
        head, *records = [json.loads(line) for line in f]
    return head["run_id"], records, head["errors"], env


def export(args, env, run_id, workdir):
    r = subprocess.run([args.trace, "export", run_id, "--format", "json", "--no-redact"],
                       env=env, capture_output=True)
    if r.returncode != 0:
        fail(f"trace export exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    if args.keep:
        with open(os.path.join(workdir, "export.json"), "wb") as f:
            f.write(r.stdout)
    return json.loads(r.stdout)


def reuse(workdir):
    with open(os.path.join(workdir, "log.jsonl"), encoding="utf-8") as f:
        head, *records = [json.loads(line) for line in f]
    with open(os.path.join(workdir, "export.json"), "rb") as f:
        return records, head["errors"], json.loads(f.read())


# --- comparing ----------------------------------------------------------------------------

def visible(s):
    """A line with whitespace and invisible characters escaped, other text as is."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\n":
            out.append("\\n")
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or o == 0x7f or 0x200b <= o <= 0x200f or 0x2028 <= o <= 0x202e \
                or 0x2066 <= o <= 0x2069 or o == 0xfeff:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


def lines(s):
    """s cut after each "\n" only (str.splitlines also cuts at U+2028, U+0085, ...)."""
    return re.findall(r"[^\n]*\n|[^\n]+", s)


def unified(ref, got, limit=40):
    lines_ = list(difflib.unified_diff([visible(x) for x in lines(ref)],
                                       [visible(x) for x in lines(got)],
                                       "reference", "trace", n=1, lineterm=""))
    if len(lines_) > limit:
        lines_ = lines_[:limit] + [f"... ({len(lines_) - limit} more diff lines)"]
    return "\n".join(lines_)


LINE_STARTS = {"<|im_end|>": "<|im_end|>", "<tool_call>": "<tool_call>",
               "</tool_call>": "</tool_call>", "<tool_response>": "<tool_response>",
               "</tool_response>": "</tool_response>", "<think>": "<think>",
               "</think>": "</think>", "<tools>": "<tools>", "</tools>": "</tools>",
               "# Tools": "# Tools", '{"type": "function"': "tool definition",
               '{"name": ': "tool call"}


def shape(line):
    """What the template wrote at the start of a line (its role header, a tag, a tool
    definition), or "text"."""
    m = re.match(r"<\|im_start\|>(\w+)", line)
    if m:
        return f"<|im_start|>{m.group(1)}"
    return next((v for k, v in LINE_STARTS.items() if line.startswith(k)), "text")


def signature(api, ref, got):
    """Groups mismatches by where the prompts first part: the template structure of the
    first line that differs (and of the line before it), or, where the structure is the
    same, the characters from the first differing byte on, digits folded."""
    a, b = lines(ref), lines(got)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        where = f"after {shape(a[i1 - 1])!r}" if i1 else "at the start"
        ra = shape(a[i1]) if i1 < i2 else None
        gb = shape(b[j1]) if j1 < j2 else None
        if tag == "delete":
            return f"{api}: {where}, trace lacks lines the reference has"
        if tag == "insert":
            return f"{api}: {where}, trace has lines the reference lacks"
        if ra != gb:
            return f"{api}: {where}, reference {ra!r} line, trace {gb!r} line"
        x, y = a[i1], b[j1]
        k = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
        fold = lambda s: re.sub(r"\d+", "9", visible(s))  # noqa: E731
        return (f"{api}: within a {ra!r} line: reference {fold(x[k:k + 12])!r}... "
                f"-> trace {fold(y[k:k + 12])!r}...")
    return f"{api}: differs in line endings only"


def compare(records, calls, renderer):
    """Converts and renders every case, compares with trace's prompt; returns the per-API
    counts, the failures (cause -> cases) and the equal cases for the token check."""
    convs = converters.make_converters()
    counts = collections.defaultdict(collections.Counter)
    groups = collections.defaultdict(list)
    matched = []
    for rec in records:
        api = rec["api"]
        counts[api]["cases"] += 1
        req = json.loads(rec["body"])
        reply = json.loads(rec["reply"]) if rec["status"] == 200 else None
        if rec["status"] != 200:
            msg = re.sub(r"\d+", "N", rec["reply"])[:200]
            groups[f"{api}: rejected with HTTP {rec['status']}: {msg}"].append((rec, None, None))
            counts[api]["rejected"] += 1
            continue
        call = calls.get(reply.get("id"))
        try:
            expected = renderer.render(convs[api].convert(req))
            convs[api].answered(req, reply)
        except Exception as e:  # a case the reference cannot take is a bug of this test
            groups[f"{api}: REFERENCE FAILED: {type(e).__name__}: {e}"].append((rec, None, None))
            counts[api]["reference_failed"] += 1
            continue
        if call is None:
            groups[f"{api}: no llm_call recorded for {reply.get('id')}"].append((rec, None, None))
            counts[api]["missing"] += 1
        elif call["rendered_prompt"] != expected:
            got = call["rendered_prompt"]
            cause = diagnosis.explain(api, req, got, convs[api].convert, renderer.render)
            key = f"{api}: {cause}" if cause else signature(api, expected, got)
            groups[key].append((rec, expected, got))
            counts[api]["mismatched"] += 1
        else:
            counts[api]["equal"] += 1
            matched.append((rec, expected, call))
    return counts, groups, matched


# --- token ids ----------------------------------------------------------------------------

def check_tokens(args, matched, workdir):
    """@lenml/tokenizers' ids for the reference text vs trace's prompt_token_ids, on the
    equal cases or an evenly spread sample; returns the failures as groups and the count."""
    n = len(matched) if args.token_sample is None else args.token_sample
    if not n or not matched:
        return {}, 0
    sample = matched[::max(1, len(matched) // n)][:n]
    js = os.path.join(reference.SOURCE_DIR, "tests", "tokenizer", "js_tokenize.js")
    corpus, out = os.path.join(workdir, "tok.hex"), os.path.join(workdir, "tok.out")
    with open(corpus, "w") as f:
        f.writelines(text.encode("utf-8").hex() + "\n" for _, text, _ in sample)
    model = [os.path.join(reference.QWEN3_DIR, f)
             for f in ("tokenizer.json", "tokenizer_config.json")]
    r = subprocess.run([args.node, js, "encode", *model, corpus, out], capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail(f"js_tokenize.js exited {r.returncode}: {r.stderr}")
    groups = collections.defaultdict(list)
    with open(out) as f:
        for (rec, text, call), line in zip(sample, f):
            ids = [int(t) for t in line.split("\t")[0].split()]
            got = [int(t) for t in call["prompt_token_ids"]]
            if ids != got:
                k = next((k for k in range(min(len(ids), len(got))) if ids[k] != got[k]),
                         min(len(ids), len(got)))
                detail = f"token {k}: reference {ids[k:k + 4]} trace {got[k:k + 4]}"
                groups[f"{rec['api']}: prompt_token_ids differ from @lenml/tokenizers"].append(
                    (rec, detail, None))
    return groups, len(sample)


# --- the report ---------------------------------------------------------------------------

def common_tags(cases, records):
    """Tags every case of a group has, and less than half of its API's cases do."""
    api = cases[0][0]["api"]
    same_api = [r for r in records if r["api"] == api]
    shared = set(cases[0][0]["tags"]).intersection(*(set(c[0]["tags"]) for c in cases))
    return sorted(t for t in shared if sum(t in r["tags"] for r in same_api) < len(same_api) / 2)


def report_group(sig, cases, records, examples):
    print(f"\n=== {len(cases)} x {sig}")
    tags = common_tags(cases, records)
    if tags:
        print(f"    every case has: {', '.join(tags)}")
    for rec, expected, got in sorted(cases, key=lambda c: len(c[0]["body"]))[:examples]:
        print(f"--- smallest case: worker {rec['worker']} #{rec['index']} {rec['route']} "
              f"{json.dumps(rec['headers'])}\n{rec['body']}")
        if got is not None:
            print(unified(expected, got))
        elif expected is not None:
            print(expected)
        else:
            print(f"reply {rec['status']}: {rec['reply'][:500]}")


def print_coverage(records):
    """How many cases of each API exercise each tagged feature."""
    for api in sorted({r["api"] for r in records}):
        tags = collections.Counter(t for r in records if r["api"] == api for t in r["tags"])
        print(f"{api} coverage: " + ", ".join(f"{t} {n}" for t, n in sorted(tags.items())))


def main():
    args = parse_args()
    if not os.access(args.trace, os.X_OK):
        fail(f"{args.trace} is not an executable")
    if not os.path.isdir(reference.QWEN3_DIR):
        fail(f"{reference.QWEN3_DIR} missing (the Qwen3 tokenizer and template): run "
             "scripts/setup.sh")
    workdir = args.keep or args.reuse or tempfile.mkdtemp(prefix="trace-conformance-")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.monotonic()
    if args.reuse:
        records, agent_errors, doc = reuse(workdir)
        args.cases = len(records)
    else:
        run_id, records, agent_errors, env = record(args, workdir)
        doc = export(args, env, run_id, workdir)
    t_record = time.monotonic() - t0
    renderer = reference.Renderer()
    model = doc["header"]["model"]
    if model.get("chat_template_sha256") != renderer.sha256:
        fail(f"the run's model ({model.get('model_dir')}) has chat template "
             f"{model.get('chat_template_sha256')}, the reference {renderer.sha256}")
    calls = {e["llm_call"]["request_id"]: e["llm_call"] for e in doc["events"] if "llm_call" in e}
    counts, groups, matched = compare(records, calls, renderer)
    token_groups, token_checked = check_tokens(args, matched, workdir) if args.node else ({}, 0)
    groups.update(token_groups)

    for sig, cases in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        report_group(sig, cases, records, args.examples)
    print("\n=== summary")
    print_coverage(records)
    for api, c in sorted(counts.items()):
        print(f"{api:12} {c['cases']:5} cases: {c['equal']} equal, {c['mismatched']} differ, "
              f"{c['rejected']} rejected, {c['missing']} not recorded, "
              f"{c['reference_failed']} reference failures")
    print(f"token ids checked on {token_checked} cases"
          + ("" if args.node else " (no node: skipped)"))
    for e in agent_errors:
        print(f"agent error: {e}")
    print(f"seed {args.seed}, {len(records)} cases, {len(groups)} groups of failures; "
          f"recording {t_record:.1f} s, total {time.monotonic() - t0:.1f} s")
    if not args.keep and not args.reuse:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if groups or agent_errors or len(records) != args.cases else 0


if __name__ == "__main__":
    sys.exit(main())
