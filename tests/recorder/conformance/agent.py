#!/usr/bin/python3
"""The agent run under `trace record`: sends the generated requests and logs each one with
the reply, for the driver (conformance_test.py) to compare with what trace recorded.

Usage (the driver runs it): agent.py --seed S --cases N --workers W --out LOG.jsonl

Worker w draws its cases from random.Random(f"{seed}/{w}") and sends them one after the
other on its own keep-alive connection, so a Responses request can point back at replies the
same worker already got; the workers run concurrently so the server batches them. The log
holds one line per case: worker, index, api, route, body, tags, HTTP status, reply text.
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generators  # noqa: E402
import randgen  # noqa: E402

# Share of the cases per API. Completions needs few: its prompt is taken as is.
API_WEIGHTS = {"chat": 3, "responses": 3, "anthropic": 3, "completions": 1}


def plan(seed, cases, apis):
    """Which API each case goes to: the weights' shares, shuffled by the seed."""
    weights = {a: API_WEIGHTS[a] for a in apis}
    total = sum(weights.values())
    names = []
    for api, w in weights.items():
        names += [api] * (cases * w // total)
    names += [apis[0]] * (cases - len(names))
    random.Random(seed).shuffle(names)
    return names


class Client:
    """Keep-alive connections to the recorder, one per base URL."""

    def __init__(self):
        self.key = os.environ["OPENAI_API_KEY"]
        self.bases = {"openai": os.environ["OPENAI_BASE_URL"],  # ends in /v1
                      "anthropic": os.environ["ANTHROPIC_BASE_URL"]}
        self.conns = {}

    def url(self, case):
        if case.api == "anthropic":
            return self.bases["anthropic"] + case.route
        return self.bases["openai"] + case.route[len("/v1"):]

    def post(self, case):
        url = urllib.parse.urlsplit(self.url(case))
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}",
                   **case.headers}
        for attempt in (0, 1):  # a keep-alive connection the server closed: reconnect once
            conn = self.conns.get(url.netloc)
            if conn is None:
                conn = self.conns[url.netloc] = http.client.HTTPConnection(url.netloc, timeout=120)
            try:
                conn.request("POST", url.path, body=case.body.encode("utf-8"), headers=headers)
                r = conn.getresponse()
                return r.status, r.read().decode("utf-8", "replace")
            except (http.client.HTTPException, OSError):
                conn.close()
                del self.conns[url.netloc]
                if attempt:
                    raise


def run_worker(seed, worker, apis, out):
    rng = random.Random(f"{seed}/{worker}")
    state = generators.ResponsesState(worker)
    client = Client()
    for index, api in enumerate(apis):
        case = generators.GENERATORS[api](rng, state)
        status, reply = client.post(case)
        if api == "responses":
            state.answered(case, status, json.loads(reply) if status == 200 else {})
        out.append({"worker": worker, "index": index, "api": api, "route": case.route,
                    "headers": case.headers, "body": case.body, "tags": case.tags,
                    "status": status, "reply": reply})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--cases", type=int, required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--apis", default=",".join(API_WEIGHTS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--big-ints", action="store_true")
    args = ap.parse_args()
    if args.big_ints:
        randgen.allow_big_ints()
    names = plan(args.seed, args.cases, args.apis.split(","))
    logs = [[] for _ in range(args.workers)]
    errors = []

    def work(w):
        try:
            run_worker(args.seed, w, names[w::args.workers], logs[w])
        except Exception as e:  # reported by the driver: a case that was not sent
            errors.append(f"worker {w}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps({"run_id": os.environ.get("TRACE_RUN_ID"), "errors": errors}) + "\n")
        for log in logs:
            for rec in log:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
