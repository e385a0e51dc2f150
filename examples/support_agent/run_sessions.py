#!/usr/bin/env python3
"""Drives the support agent as N concurrent sessions (threads) in one process, so one
`trace record` run holds all of them and the server batches their model calls:

    trace record -- python3 examples/support_agent/run_sessions.py --sessions 8

Each session has its own conversation and SQLite file. Prints "agent-counts {...}" with
the totals over all sessions, like agent.py does for one.
"""

import argparse
import json
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    counts = agent.Counts()
    lock = threading.Lock()
    failures = []

    def log(line):
        with lock:
            print(line, flush=True)

    def session(k, folder):
        mine = agent.Counts()
        try:
            db = agent.open_db(os.path.join(folder, "customers-%d.db" % k))
            agent.run_session(k, args.turns, db, mine, max_tokens=args.max_tokens, log=log)
        except Exception as e:  # one failing session is reported, the others go on
            failures.append("session %d: %s" % (k, e))
        with lock:
            for key, n in mine.c.items():
                counts.add(key, n)

    with tempfile.TemporaryDirectory() as tmp:
        threads = [threading.Thread(target=session, args=(k, tmp)) for k in range(args.sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for f in failures:
        print(f, file=sys.stderr)
    print("agent-counts " + json.dumps(counts.c, sort_keys=True), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
