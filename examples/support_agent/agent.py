#!/usr/bin/env python3
"""A customer-support agent for `trace record` (Python standard library only).

It keeps customers in a SQLite table and offers the model three tools —
lookup_customer, update_email and delete_customer — with tool_choice "required", so the
model must pick one (constrained decoding makes even the random-weight demo model pick a
valid call). Each turn it reads the recorder's clock, retrieves a policy snippet from
local files (context events), fills a prompt template (template_var events), runs the
chosen tool against SQLite and reports its raw result (tool_result events), then asks the
model for a reply to the customer.

    trace record -- python3 examples/support_agent/agent.py
    python3 examples/support_agent/agent.py --turns 5 --fail-at 2   # exits 3 at turn 2

At the end it prints one line "agent-counts {...}" with how many events of each kind it
produced; the tests compare that line with the recorded run.
"""

import argparse
import json
import os
import re
import sqlite3
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "recorder", "clients", "python"))
import trace_client  # noqa: E402

# A small id range: constrained decoding then gives one-digit ids, mostly real customers.
ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 9}

TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_customer",
        "description": "Look up a customer record by id.",
        "parameters": {"type": "object",
                       "properties": {"customer_id": ID_SCHEMA},
                       "required": ["customer_id"]}}},
    {"type": "function", "function": {
        "name": "update_email",
        "description": "Change a customer's email address.",
        "parameters": {"type": "object",
                       "properties": {"customer_id": ID_SCHEMA,
                                      "email": {"type": "string", "maxLength": 32}},
                       "required": ["customer_id", "email"]}}},
    {"type": "function", "function": {
        "name": "delete_customer",
        "description": "Permanently delete a customer record.",
        "parameters": {"type": "object",
                       "properties": {"customer_id": ID_SCHEMA},
                       "required": ["customer_id"]}}},
]

SYSTEM_TEMPLATE = ("You are {agent_name}, a support agent for {company}. Today is {today}. "
                   "Follow this policy:\n{policy}")

QUESTIONS = [
    "Hi, I'm customer 3. Can you tell me what email you have on file for me?",
    "Please change my email to ada@example.org, my id is 3.",
    "How long does a refund take for customer 2?",
    "I want to close my account, customer id 4.",
    "Where is my order? I'm customer 1.",
]

CUSTOMERS = [(1, "Grace Hopper", "grace@example.com"), (2, "Alan Turing", "alan@example.com"),
             (3, "Ada Lovelace", "ada@example.com"), (4, "Edsger Dijkstra", "ewd@example.com"),
             (5, "Barbara Liskov", "barbara@example.com")]


class Counts:
    def __init__(self):
        self.c = {"model_calls": 0, "tool_calls": 0, "tool_results": 0, "context": 0,
                  "template_vars": 0, "clock_reads": 0}

    def add(self, key, n=1):
        self.c[key] += n


def open_db(path):
    db = sqlite3.connect(path, check_same_thread=False)
    db.execute("CREATE TABLE IF NOT EXISTS customers (id INTEGER PRIMARY KEY, name TEXT, "
               "email TEXT)")
    db.executemany("INSERT OR REPLACE INTO customers VALUES (?, ?, ?)", CUSTOMERS)
    db.commit()
    return db


def run_tool(db, name, args):
    """Runs one tool against SQLite; returns its raw result as JSON text."""
    try:
        cid = int(args.get("customer_id", -1))
    except (TypeError, ValueError):
        return json.dumps({"error": "customer_id must be an integer"}), True
    if name == "lookup_customer":
        row = db.execute("SELECT id, name, email FROM customers WHERE id = ?", (cid,)).fetchone()
        if row is None:
            return json.dumps({"error": "no customer %d" % cid}), True
        return json.dumps({"id": row[0], "name": row[1], "email": row[2]}), False
    if name == "update_email":
        email = str(args.get("email", ""))
        n = db.execute("UPDATE customers SET email = ? WHERE id = ?", (email, cid)).rowcount
        db.commit()
        return json.dumps({"updated": n, "customer_id": cid, "email": email}), n == 0
    if name == "delete_customer":
        n = db.execute("DELETE FROM customers WHERE id = ?", (cid,)).rowcount
        db.commit()
        return json.dumps({"deleted": n, "customer_id": cid}), n == 0
    return json.dumps({"error": "unknown tool " + name}), True


def retrieve(question, k=1):
    """Keyword-overlap retrieval over the policy files: the best k (score, file, text)."""
    words = set(re.findall(r"[a-z]+", question.lower()))
    scored = []
    folder = os.path.join(HERE, "policies")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            text = f.read()
        overlap = len(words & set(re.findall(r"[a-z]+", text.lower())))
        scored.append((overlap / (1 + len(words)), name, text))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return scored[:k]


def chat(base_url, api_key, model, messages, **extra):
    body = dict(model=model, messages=messages, **extra)
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions",
                                 data=json.dumps(body).encode("utf-8"), method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + api_key)
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read().decode("utf-8"))


def served_model(base_url, api_key):
    req = urllib.request.Request(base_url.rstrip("/") + "/models")
    req.add_header("Authorization", "Bearer " + api_key)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read().decode("utf-8"))["data"][0]["id"]


def call_tool(tc, db, name, args, call_id, tool_log=None):
    """Runs a tool through trace_client.tool: live it runs (and appends a line to tool_log,
    a side effect a re-run must not repeat); under `trace rerun` the recorded result comes
    back instead. Returns (result, is_error)."""
    def run():
        if tool_log:
            with open(tool_log, "a", encoding="utf-8") as f:
                f.write("%s %s\n" % (name, json.dumps(args, sort_keys=True)))
        result, is_error = run_tool(db, name, args)
        if is_error:
            raise trace_client.ToolError(result)
        return result
    try:
        return tc.tool(name, args, run, call_id=call_id), False
    except trace_client.ToolError as e:
        return e.content, True


def run_session(session, turns, db, counts, max_tokens=16, fail_at=None, log=print,
                tool_log=None, questions=None):
    base_url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    api_key = os.environ.get("OPENAI_API_KEY", "")
    model = os.environ.get("OPENAI_MODEL") or served_model(base_url, api_key)
    tc = trace_client.default_client()
    messages = []
    for turn in range(turns):
        if fail_at is not None and turn == fail_at:
            log("[session %d] giving up at turn %d" % (session, turn))
            return False
        question = (questions or {}).get(turn, QUESTIONS[(session + turn) % len(QUESTIONS)])
        today = tc.clock()
        counts.add("clock_reads")
        hits = retrieve(question)
        for score, name, text in hits:
            tc.context(text, source="policies/" + name, chunk_id=name, score=score,
                       query=question)
            counts.add("context")
        variables = {"agent_name": "Sam", "company": "Example Corp",
                     "today": today.strftime("%Y-%m-%d"), "policy": hits[0][2]}
        for name, value in variables.items():
            tc.template_var(name, value, template="support_system")
            counts.add("template_vars")
        system = SYSTEM_TEMPLATE.format(**variables)
        if messages:
            messages[0] = {"role": "system", "content": system}
        else:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": question})

        reply = chat(base_url, api_key, model, messages, tools=TOOLS, tool_choice="required",
                     max_tokens=64, temperature=0.8)
        counts.add("model_calls")
        msg = reply["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        messages.append({"role": "assistant", "content": msg.get("content") or "",
                         "tool_calls": calls})
        for call in calls:
            counts.add("tool_calls")
            name = call["function"]["name"]
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                args = {}
            result, is_error = call_tool(tc, db, name, args, call["id"], tool_log)
            counts.add("tool_results")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            log("[session %d] turn %d: %s(%s) -> %s" % (session, turn, name,
                                                       json.dumps(args), result))

        answer = chat(base_url, api_key, model, messages, max_tokens=max_tokens,
                      temperature=0.7)
        counts.add("model_calls")
        text = answer["choices"][0]["message"].get("content") or ""
        messages.append({"role": "assistant", "content": text})
        log("[session %d] turn %d reply: %r" % (session, turn, text[:60]))
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3, help="conversation turns (3 to 5)")
    parser.add_argument("--session", type=int, default=0, help="which scripted customer")
    parser.add_argument("--max-tokens", type=int, default=16, help="reply length limit")
    parser.add_argument("--fail-at", type=int, default=None,
                        help="exit with status 3 at this turn (a failing agent)")
    parser.add_argument("--db", default=None, help="SQLite file (default: a temporary one)")
    parser.add_argument("--tool-log", default=None,
                        help="append one line per tool actually run to this file")
    parser.add_argument("--question", action="append", default=[], metavar="TURN=TEXT",
                        help="ask TEXT at turn TURN instead of the scripted question")
    args = parser.parse_args()
    counts = Counts()
    with tempfile.TemporaryDirectory() as tmp:
        db = open_db(args.db or os.path.join(tmp, "customers.db"))
        questions = {int(q.split("=", 1)[0]): q.split("=", 1)[1] for q in args.question}
        ok = run_session(args.session, args.turns, db, counts, max_tokens=args.max_tokens,
                         fail_at=args.fail_at, tool_log=args.tool_log, questions=questions)
    print("agent-counts " + json.dumps(counts.c, sort_keys=True), flush=True)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
