// What the node drivers of the recorder's e2e tests share (openai_sdk_e2e.js,
// sdk_agent_e2e.js): a tally of checks, the trace binary run against a scratch store and
// data home, and `trace serve` started on a free port.
"use strict";
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

// Counts checks; finish() prints "N passed, N failed" and exits non-zero on any failure.
class Tally {
  constructor() {
    this.passed = 0;
    this.failed = 0;
    this.check = this.check.bind(this);
  }
  check(ok, what, detail) {
    if (ok) {
      ++this.passed;
    } else {
      ++this.failed;
      console.error(`FAIL ${what}${detail ? ": " + detail : ""}`);
    }
    return ok;
  }
  finish() {
    console.log(`${this.passed} passed, ${this.failed} failed`);
    process.exit(this.failed ? 1 : 0);
  }
}

// A scratch folder (`prefix` + random) holding its own store and XDG data home, the
// environment that points trace there, and run(args, extraEnv) -> {code, out, err}.
function scratch(trace, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const env = { ...process.env, XDG_DATA_HOME: path.join(dir, "xdg"), TRACE_STORE: path.join(dir, "t.db") };
  const run = (args, extraEnv = {}) => {
    const r = spawnSync(trace, args, { env: { ...env, ...extraEnv }, encoding: "utf8", maxBuffer: 256 << 20 });
    return { code: r.status, out: r.stdout || "", err: r.stderr || "" };
  };
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  return { dir, env, run, remove };
}

// `trace serve --port 0 ARGS...`: resolves once it listens, to {origin, stop}; stop() sends
// SIGTERM and resolves to the exit code.
async function startServe(trace, args, env) {
  const child = spawn(trace, ["serve", "--port", "0", ...args], { env });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const origin = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/serving on (\S+)/);
      if (m) resolve(m[1]);
    });
    exited.then((code) => reject(new Error("trace serve exited " + code)));
  });
  const stop = async () => {
    child.kill("SIGTERM");
    return exited;
  };
  return { origin, stop };
}

// Text blocks or parts joined, or the string itself ("" for anything else).
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (typeof p.text === "string" ? p.text : "")).join("");
}

// What a request said the model should be told: its system prompts (Chat system / developer
// messages, Responses instructions and system / developer items, Anthropic system) and the
// tool results it carries (Chat tool messages, Responses function_call_output items,
// Anthropic tool_result blocks).
function systemAndToolTexts(req) {
  const systems = [], results = [];
  if (typeof req.instructions === "string") systems.push(req.instructions);
  if (req.system !== undefined) systems.push(textOf(req.system));
  const items = [...(Array.isArray(req.messages) ? req.messages : []), ...(Array.isArray(req.input) ? req.input : [])];
  for (const m of items) {
    if (m.role === "system" || m.role === "developer") systems.push(textOf(m.content));
    if (m.role === "tool") results.push(textOf(m.content));
    if (m.type === "function_call_output") results.push(textOf(m.output));
    if (Array.isArray(m.content)) {
      for (const b of m.content) if (b.type === "tool_result") results.push(textOf(b.content));
    }
  }
  return { systems: systems.filter((s) => s), results: results.filter((s) => s) };
}

// What the model saw, for a run recorded against the local engine: every call it answered
// rendered by the independent reference (tests/recorder/conformance/check_run.py: the
// request converted as the API's documentation says, in Python, rendered by Jinja2 with
// the model's template) equals the recorded prompt byte for byte; and, said plainly, each
// system prompt and tool result the agent sent is in the prompt of its call. Returns how
// many of those were seen, so a driver can insist that its agent sent some.
function checkWhatTheModelSaw(trace, env, runId, check, label) {
  const script = path.resolve(__dirname, "../conformance/check_run.py");
  const r = spawnSync("/usr/bin/python3", [script, trace, runId], { env, encoding: "utf8", maxBuffer: 256 << 20 });
  check(r.status === 0, `${label}: every recorded prompt equals the reference rendering of its request`,
        (r.stdout || "").slice(-4000) + (r.stderr || "").slice(-2000));
  const ex = spawnSync(trace, ["export", runId, "--format", "json", "--no-redact"], { env, encoding: "utf8", maxBuffer: 256 << 20 });
  const seen = { systems: 0, results: 0 };
  for (const e of JSON.parse(ex.stdout).events) {
    const c = e.llm_call;
    if (!c || c.upstream || Number(c.http_status) !== 200) continue;
    const { systems, results } = systemAndToolTexts(JSON.parse(c.request_json));
    for (const [kind, texts] of [["systems", systems], ["results", results]]) {
      for (const t of texts) {
        ++seen[kind];
        check(c.rendered_prompt.includes(t), `${label}: call ${e.seq}'s ${kind === "systems" ? "system prompt" : "tool result"} is in its prompt`,
              JSON.stringify({ text: t, prompt: c.rendered_prompt.slice(0, 2000) }));
      }
    }
  }
  return seen;
}

module.exports = { Tally, scratch, startServe, checkWhatTheModelSaw };
