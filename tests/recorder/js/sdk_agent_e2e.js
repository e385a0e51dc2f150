// End-to-end test of one SDK agent (responses_agent.js, anthropic_agent.js or
// ai_sdk_agent.js) under `trace record`, twice over:
//  1. against the local engine: the agent's checks pass, the run is complete, every call
//     came through the API the SDK speaks, and `trace replay` reproduces it bitwise;
//  2. against an upstream: a second `trace serve` (its own key) plays the hosted model and
//     `trace record --upstream` records the agent's run through it; the agent's checks pass
//     there too, every recorded call equals what the SDK received (ids, text, tool calls,
//     usage), the hosted key is nowhere in the store, and `trace replay` says "recorded
//     only". With --diff the upstream run is recorded again against a fresh upstream with the
//     same seed and `trace diff` finds the two runs the same.
//
//   node sdk_agent_e2e.js TRACE_BIN AGENT.js [--diff]
// Prints "N passed, N failed" and exits non-zero on any failure.
"use strict";
const fs = require("fs");
const path = require("path");
const { Tally, scratch, startServe, checkWhatTheModelSaw } = require("./e2e_common");

const trace = process.argv[2];
const agent = path.join(__dirname, process.argv[3]);
const withDiff = process.argv.includes("--diff");
const HOSTED_KEY = "hosted-key-" + process.pid + "-7f3a";
const { env, run, remove } = scratch(trace, "trace-sdk-");
delete env.OPENAI_API_KEY;
delete env.ANTHROPIC_API_KEY;
const tally = new Tally();
const check = tally.check;

function newestRun() {
  const runs = JSON.parse(run(["ls", "--json"]).out);
  return runs[0].run_id || runs[0].id;
}

// The LlmCall and ToolCall events of a run, from `trace export` (protobuf JSON names).
function exportRun(runId) {
  const exported = JSON.parse(run(["export", runId, "--format", "json", "--no-redact"]).out);
  const calls = [], toolCalls = [];
  for (const e of exported.events) {
    if (e.llm_call || e.llmCall) calls.push(e.llm_call || e.llmCall);
    if (e.tool_call || e.toolCall) toolCalls.push(e.tool_call || e.toolCall);
  }
  return { exported, calls, toolCalls };
}

// JSON text with object keys sorted (tool arguments compared by value).
function canon(text) {
  const sort = (v) => Array.isArray(v) ? v.map(sort)
    : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])])) : v;
  return JSON.stringify(sort(JSON.parse(text)));
}

const field = (o, snake) => o[snake] !== undefined ? o[snake] : o[snake.replace(/_([a-z])/g, (_, c) => c.toUpperCase())];

// What the agent printed it received.
function received(out) {
  const line = out.split("\n").find((l) => l.startsWith("agent-received "));
  return line ? JSON.parse(line.slice("agent-received ".length)) : null;
}

function record(label, extraArgs = [], extraEnv = {}) {
  const r = run(["record", "--seed", "7", ...extraArgs, "--", process.execPath, agent], extraEnv);
  check(r.code === 0, `${label}: trace record exits 0 (the agent's checks pass)`, r.err.slice(-3000) + r.out.slice(-3000));
  return { ...r, runId: newestRun() };
}

// A second `trace serve`, with its own key, plays the hosted model.
function startHosted() {
  // The key from the environment: a key on the command line shows in `ps` (trace serve refuses it).
  return startServe(trace, ["--seed", "5"], { ...env, TRACE_API_KEY: HOSTED_KEY });
}

function local() {
  const rec = record("local");
  const { calls } = exportRun(rec.runId);
  const got = received(rec.out);
  check(got && got.length === calls.length, "local: one recorded call per call the agent made",
        `${got && got.length} received, ${calls.length} recorded`);
  const apis = new Set(calls.map((c) => field(c, "api")));
  // The AI SDK agent also streams one call through Chat Completions (openai.chat).
  const sdkApis = ["openai.responses", "anthropic.messages",
                   ...(agent.endsWith("ai_sdk_agent.js") ? ["openai.chat_completions"] : [])];
  check([...apis].every((a) => sdkApis.includes(a)), "local: calls through the SDK's API", JSON.stringify([...apis]));
  check(calls.some((c) => field(c, "stream")) && calls.filter((c) => field(c, "stream")).every((c) => field(c, "response_stream")),
        "local: streamed calls keep their event stream");
  // What the model saw: the system prompt and the tool results each agent sends.
  const seen = checkWhatTheModelSaw(trace, env, rec.runId, check, "local");
  check(seen.systems > 0 && seen.results > 0, "local: the agent sent system prompts and tool results, and the model saw them",
        JSON.stringify(seen));
  const replay = run(["replay", rec.runId, "--json"]);
  let report = {};
  try { report = JSON.parse(replay.out); } catch (e) { /* reported below */ }
  check(replay.code === 0 && report.level === "bitwise", "local: trace replay is bitwise",
        `exit ${replay.code}, level ${report.level}: ${replay.err.slice(-2000)}`);
}

async function upstream(label) {
  const hosted = await startHosted();
  let rec;
  try {
    rec = record(label, ["--upstream", hosted.origin], { TRACE_UPSTREAM_API_KEY: HOSTED_KEY });
  } finally {
    await hosted.stop();
  }
  const { exported, calls: all, toolCalls } = exportRun(rec.runId);
  const got = received(rec.out) || [];
  // The requests the upstream refused (the agent's error checks) are recorded too, as calls
  // with the upstream's status and error body: the proxy cannot tell them apart beforehand.
  const answered = (c) => Number(field(c, "http_status")) === 200;
  const refused = all.filter((c) => !answered(c));
  check(refused.every((c) => Number(field(c, "http_status")) >= 400 && field(c, "finish_reason") === "error" &&
                             JSON.parse(field(c, "response_json")).error !== undefined),
        `${label}: refused requests recorded with the upstream's status and error`,
        JSON.stringify(refused.map((c) => [field(c, "http_status"), field(c, "finish_reason")])));
  const calls = all.filter(answered);
  if (!check(got.length === calls.length, `${label}: one recorded answer per answer the agent got`,
             `${got.length} received, ${calls.length} recorded (${refused.length} refused)`)) {
    return rec.runId;
  }
  // Recorded as received: the upstream's ids, the text, the tool calls and the usage.
  const bySeq = new Map();
  for (const t of toolCalls) {
    const seq = String(field(t, "llm_call_seq"));
    if (!bySeq.has(seq)) bySeq.set(seq, []);
    bySeq.get(seq).push(t);
  }
  const seqs = exported.events.filter((e) => (e.llm_call || e.llmCall) && answered(e.llm_call || e.llmCall))
    .map((e) => String(e.seq));
  let same = 0;
  for (let i = 0; i < calls.length; ++i) {
    const c = calls[i], g = got[i];
    const usage = field(c, "usage") || {};
    const recordedCalls = (bySeq.get(seqs[i]) || []).map((t) => ({ name: t.name, arguments: canon(field(t, "arguments_json")) }));
    const receivedCalls = g.tool_calls.map((t) => ({ name: t.name, arguments: canon(t.arguments) }));
    const ok = field(c, "request_id") === g.id && (field(c, "output_text") || "") === (g.text || "") &&
               Number(field(usage, "input_tokens")) === g.input_tokens &&
               Number(field(usage, "output_tokens")) === g.output_tokens &&
               JSON.stringify(recordedCalls) === JSON.stringify(receivedCalls) &&
               field(c, "upstream") === hosted.origin && (field(c, "prompt_token_ids") || []).length === 0;
    if (check(ok, `${label}: call ${i + 1} recorded as received`,
              JSON.stringify({ recorded: { id: field(c, "request_id"), text: field(c, "output_text"), usage, tools: recordedCalls }, received: g }))) {
      ++same;
    }
  }
  // The hosted key never reaches the store.
  const dbBytes = ["", "-wal"].map((s) => {
    try { return fs.readFileSync(env.TRACE_STORE + s).toString("latin1"); } catch (e) { return ""; }
  }).join("");
  check(!JSON.stringify(exported).includes(HOSTED_KEY) && !dbBytes.includes(HOSTED_KEY),
        `${label}: the upstream key is not in the store`);
  // Replay says plainly that there is nothing to re-execute.
  const replay = run(["replay", rec.runId, "--json"]);
  let report = {};
  try { report = JSON.parse(replay.out); } catch (e) { /* reported below */ }
  check(replay.code === 1 && report.level === "recorded_only" && report.recorded_only.length === calls.length,
        `${label}: trace replay says recorded only`, `exit ${replay.code}: ${replay.out.slice(0, 800)} ${replay.err}`);
  const text = run(["replay", rec.runId]);
  check(text.out.includes("result: recorded only"), `${label}: the text report says recorded only`, text.out.slice(-800));
  return rec.runId;
}

(async () => {
  try {
    local();
    const first = await upstream("upstream");
    if (withDiff) {
      const second = await upstream("upstream again");
      const diff = run(["diff", first, second, "--json"]);
      let d = {};
      try { d = JSON.parse(diff.out); } catch (e) { /* reported below */ }
      check(diff.code === 0 && d.identical === true,
            "trace diff: two upstream runs of the same agent and seed are the same (upstream ids compared by place)",
            `exit ${diff.code}: ${diff.out.slice(0, 3000)} ${diff.err}`);
    }
  } catch (e) {
    check(false, "no exception", e && e.stack);
  } finally {
    remove();
  }
  tally.finish();
})();
