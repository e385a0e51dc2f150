// End-to-end test of `trace record` / `trace serve` with the official `openai` npm SDK:
//  1. `trace record --seed 7 -- node openai_agent.js` (the agent checks the API surface and
//     abandons 20 streams); the run must be complete, hold the abandoned calls as
//     "cancelled", record the model name asked for, and `trace replay` it bitwise.
//  2. `trace serve --served-model-name alpha --served-model-name beta`: the SDK sees the two
//     names, gets a 404 for any other, and the server stops cleanly on SIGTERM.
//
//   node openai_sdk_e2e.js TRACE_BIN
// Prints "N passed, N failed" and exits non-zero on any failure.
"use strict";
const path = require("path");
const { Tally, scratch, startServe, checkWhatTheModelSaw } = require("./e2e_common");

const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const OpenAI = require(path.join(modules, "openai")).default;

const trace = process.argv[2];
const { env, run, remove } = scratch(trace, "trace-openai-sdk-");
const tally = new Tally();
const check = tally.check;

async function recordAndReplay() {
  const agent = path.join(__dirname, "openai_agent.js");
  const rec = run(["record", "--seed", "7", "--", process.execPath, agent, "20"]);
  check(rec.code === 0, "trace record exits 0", rec.err.slice(-3000) + rec.out.slice(-2000));
  const summaryLine = rec.out.split("\n").find((l) => l.startsWith("agent-summary "));
  check(summaryLine !== undefined, "agent printed its summary", rec.out.slice(-2000));
  const runs = JSON.parse(run(["ls", "--json"]).out);
  if (!check(runs.length === 1, "one run recorded", JSON.stringify(runs))) return;
  const runId = runs[0].run_id || runs[0].id;
  check(JSON.stringify(runs[0]).includes("complete"), "the run is complete", JSON.stringify(runs[0]));
  const exported = run(["export", runId, "--format", "json"]);
  const calls = [];
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") {
      if (v.llm_call || v.llmCall) calls.push(v.llm_call || v.llmCall);
      else Object.values(v).forEach(walk);
    }
  };
  walk(JSON.parse(exported.out));
  const cancelled = calls.filter((c) => (c.finish_reason || c.finishReason) === "cancelled");
  check(cancelled.length >= 20, "20 abandoned streams recorded as cancelled", `${cancelled.length} of ${calls.length} calls`);
  check(calls.every((c) => c.model === "gpt-4o-mini" || c.model === undefined), "the model name asked for is recorded");
  check(calls.some((c) => (c.constraint_json || c.constraintJson || "").includes('"version":2')),
        "structured-output calls carry a version-2 grammar spec");
  const seen = checkWhatTheModelSaw(trace, env, runId, check, "openai agent");
  check(seen.systems > 0, "the agent's system prompts reached the model", JSON.stringify(seen));
  const replay = run(["replay", runId, "--json"]);
  let report = {};
  try { report = JSON.parse(replay.out); } catch (e) { /* reported below */ }
  check(replay.code === 0 && report.level === "bitwise", "trace replay: bitwise",
        `exit ${replay.code}, level ${report.level}: ${replay.err.slice(-2000)}`);
}

async function serveWithNames() {
  // The key comes from the environment (a key on the command line shows in `ps`).
  const { origin, stop } = await startServe(trace, ["--served-model-name", "alpha",
                                                    "--served-model-name", "beta"],
                                            { ...env, TRACE_API_KEY: "k" });
  const client = new OpenAI({ baseURL: origin, apiKey: "k", maxRetries: 0 });
  const ids = (await client.models.list()).data.map((m) => m.id);
  check(JSON.stringify(ids) === JSON.stringify(["alpha", "beta"]), "models.list names the served names", JSON.stringify(ids));
  check((await client.models.retrieve("beta")).id === "beta", "models.retrieve of a served name");
  try {
    await client.models.retrieve("gpt-4o-mini");
    check(false, "models.retrieve of another name is 404");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, "models.retrieve of another name is 404", String(e));
  }
  const r = await client.chat.completions.create({ model: "beta", messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
  check(r.model === "beta", "chat with a served name");
  check((await stop()) === 0, "trace serve stops cleanly on SIGTERM");
}

(async () => {
  try {
    await recordAndReplay();
    await serveWithNames();
  } catch (e) {
    check(false, "no exception", e && e.stack);
  } finally {
    remove();
  }
  tally.finish();
})();
