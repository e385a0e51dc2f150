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

module.exports = { Tally, scratch, startServe };
