// End-to-end test of the Embeddings API (POST /v1/embeddings) with real clients: the
// official `openai` SDK (`client.embeddings.create`, its default base64 encoding, which it
// decodes, and encoding_format "float"; one string and an array) and the Vercel AI SDK
// (`embed`, `embedMany`), run unchanged as the agent.
//  1. `trace record --upstream URL` against a fake upstream (a node http server here that
//     answers /v1/embeddings with vectors computed from the input text and counts the
//     requests): the agent gets the upstream's vectors; each call is recorded as an LlmCall
//     with api openai.embeddings (the request, the body the agent got, status, model,
//     usage, the upstream and its request id), an upstream 400 as a failed call; the hosted
//     key is not in the store; `trace replay` says "recorded only", `trace show`, `trace
//     export` (JSON, OTLP: operation `embeddings`) and `trace diff` take the run.
//  2. `trace rerun` of that run with the upstream stopped (offline): every embeddings call
//     answered from the recording, the agent gets the same vectors, the upstream gets no
//     request. A re-run whose last input differs diverges there: offline it gets the 503
//     no_live_model, with `--upstream` that call goes live to the (restarted) upstream.
//  3. An upstream that does not answer: the agent gets 502 upstream_unavailable, recorded as
//     a failed call. The local engine (no --upstream): 404 unsupported_endpoint naming
//     proxy mode, recorded as a rejected request (a note), not as a model call.
//
//   node embeddings_e2e.js TRACE_BIN          # the driver
//   node embeddings_e2e.js --agent MODE       # the agent (record | diverge | down | local)
// Prints "N passed, N failed" and exits non-zero on any failure.
"use strict";
const { spawn } = require("child_process");
const http = require("http");
const fs = require("fs");
const path = require("path");

const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const MODEL = "text-embedding-3-small";
const DIMS = 6;

// The fake upstream's vector for `text`: multiples of 1/64 in [-1, 1), exact in float32,
// so base64 float32s and JSON numbers decode to the same values.
function vectorOf(text, dims = DIMS) {
  let h = 2166136261;
  for (const ch of Buffer.from(String(text), "utf8")) h = Math.imul(h ^ ch, 16777619) >>> 0;
  const v = [];
  for (let i = 0; i < dims; ++i) {
    h = Math.imul(h ^ (i + 1), 2654435761) >>> 0;
    v.push(((h % 128) - 64) / 64);
  }
  return v;
}

// ------------------------------------------------------------------------------- agent

async function agent(mode) {
  const OpenAI = require(path.join(modules, "openai")).default;
  const client = new OpenAI({ maxRetries: 0 });
  const failures = [];
  const received = [];
  const check = (ok, what) => {
    if (!ok) failures.push(what);
    return ok;
  };
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const expectStatus = async (what, promise, status, code) => {
    try {
      await promise;
      check(false, `${what}: refused`);
    } catch (e) {
      check(e.status === status && (!code || (e.error && e.error.code) === code),
            `${what}: ${status} ${code || ""} (got ${e.status} ${JSON.stringify(e.error)})`);
      received.push({ status: e.status, code: e.error && e.error.code, message: e.error && e.error.message });
      return e;
    }
  };
  if (mode === "down") {
    await expectStatus("down upstream", client.embeddings.create({ model: MODEL, input: "x" }), 502,
                       "upstream_unavailable");
  } else if (mode === "local") {
    const e = await expectStatus("local engine", client.embeddings.create({ model: MODEL, input: "x" }), 404,
                                 "unsupported_endpoint");
    check(e && /--upstream/.test(e.message), "local engine: the message names --upstream: " + (e && e.message));
  } else {
    // The openai SDK: base64 by default (decoded by the SDK), one string and an array.
    const one = await client.embeddings.create({ model: MODEL, input: "hello world" });
    check(one.data.length === 1 && same(one.data[0].embedding, vectorOf("hello world")), "one string, base64");
    received.push(one.data.map((d) => d.embedding));
    const many = await client.embeddings.create({ model: MODEL, input: ["alpha", "beta", "gamma"] });
    check(same(many.data.map((d) => d.embedding), ["alpha", "beta", "gamma"].map((t) => vectorOf(t))),
          "an array, base64");
    check(many.usage.prompt_tokens === 3, "usage as the upstream gave it");
    received.push(many.data.map((d) => d.embedding));
    // encoding_format "float": the body as is.
    const floats = await client.embeddings.create({ model: MODEL, input: ["alpha", "delta"], encoding_format: "float" });
    check(same(floats.data.map((d) => d.embedding), [vectorOf("alpha"), vectorOf("delta")]), "an array, float");
    received.push(floats.data.map((d) => d.embedding));
    const fl1 = await client.embeddings.create({ model: MODEL, input: "solo", encoding_format: "float", dimensions: 3 });
    check(same(fl1.data[0].embedding, vectorOf("solo", 3)), "one string, float, dimensions 3");
    received.push(fl1.data.map((d) => d.embedding));
    // An upstream refusal comes back as such.
    await expectStatus("upstream 400", client.embeddings.create({ model: MODEL, input: "trigger-400" }), 400,
                       "invalid_input");
    // The Vercel AI SDK: embed / embedMany through its OpenAI provider (OPENAI_BASE_URL).
    const { embed, embedMany } = require(path.join(modules, "ai"));
    const { openai } = require(path.join(modules, "@ai-sdk/openai"));
    const v = await embed({ model: openai.embedding(MODEL), value: "vercel one", maxRetries: 0 });
    check(same(v.embedding, vectorOf("vercel one")), "ai embed");
    received.push([v.embedding]);
    // The last input: a diverging re-run changes it.
    const last = mode === "diverge" ? ["vercel two", "changed"] : ["vercel two", "vercel three"];
    if (mode === "diverge" && process.env.EXPECT_NO_LIVE_MODEL) {
      // Not in the recording, and an offline re-run has no live model.
      try {
        await embedMany({ model: openai.embedding(MODEL), values: last, maxRetries: 0 });
        check(false, "diverging call offline: refused");
      } catch (e) {
        check(e.statusCode === 503 && /no_live_model/.test(e.responseBody || ""),
              `diverging call offline: 503 no_live_model (got ${e.statusCode} ${e.responseBody})`);
      }
    } else {
      const vm = await embedMany({ model: openai.embedding(MODEL), values: last, maxRetries: 0 });
      check(same(vm.embeddings, last.map((t) => vectorOf(t))), "ai embedMany");
      received.push(vm.embeddings);
    }
  }
  console.log("agent-received " + JSON.stringify(received));
  if (failures.length) {
    for (const f of failures) console.error("FAIL " + f);
    process.exit(1);
  }
}

// ------------------------------------------------------------------------------ driver

// The fake hosted API on a free port: POST /v1/embeddings only; `requests` counts them and
// `sent` keeps every body it answered (in order), `auth` the Authorization headers.
async function startUpstream() {
  const state = { requests: 0, sent: [], auth: [] };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/embeddings") {
        res.writeHead(404, { "Content-Type": "application/json" });
        return res.end(JSON.stringify({ error: { message: "no route " + req.url, type: "invalid_request_error" } }));
      }
      ++state.requests;
      state.auth.push(req.headers.authorization || "");
      const b = JSON.parse(body);
      const inputs = Array.isArray(b.input) ? b.input : [b.input];
      let reply, status = 200;
      if (inputs.includes("trigger-400")) {
        status = 400;
        reply = { error: { message: "bad input", type: "invalid_request_error", param: "input", code: "invalid_input" } };
      } else {
        reply = {
          object: "list",
          data: inputs.map((t, i) => {
            const v = vectorOf(t, b.dimensions || DIMS);
            const embedding = b.encoding_format === "base64" ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v;
            return { object: "embedding", index: i, embedding };
          }),
          model: b.model + "-v1",
          usage: { prompt_tokens: inputs.length, total_tokens: inputs.length },
        };
      }
      const text = JSON.stringify(reply);
      state.sent.push(text);
      res.writeHead(status, { "Content-Type": "application/json", "x-request-id": "fake-req-" + state.requests });
      res.end(text);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.origin = `http://127.0.0.1:${server.address().port}`;
  state.stop = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
  return state;
}

async function driver(trace) {
  const { Tally, scratch } = require("./e2e_common");
  const tally = new Tally();
  const check = tally.check;
  const { env, run, remove } = scratch(trace, "trace-emb-");
  delete env.OPENAI_API_KEY;
  delete env.OPENAI_BASE_URL;
  const HOSTED_KEY = "hosted-key-" + process.pid + "-e1b";
  const self = [process.execPath, __filename, "--agent"];
  const field = (o, snake) => o[snake] !== undefined ? o[snake]
    : o[snake.replace(/_([a-z])/g, (_, c) => c.toUpperCase())];
  // `trace ARGS` while this process serves the fake upstream (spawnSync would block it).
  const runAsync = (args, extraEnv = {}) => new Promise((resolve) => {
    const child = spawn(trace, args, { env: { ...env, ...extraEnv } });
    let out = "", err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) => resolve({ code, out, err }));
  });
  const newestRun = () => {
    const runs = JSON.parse(run(["ls", "--json"]).out);
    return runs[0].run_id || runs[0].id;
  };
  const callsOf = (runId) => {
    const exported = JSON.parse(run(["export", runId, "--format", "json", "--no-redact"]).out);
    return { exported, calls: exported.events.filter((e) => e.llm_call || e.llmCall).map((e) => e.llm_call || e.llmCall) };
  };
  // `trace rerun --json`: its report, indented, after the agent's own output.
  const reportOf = (out) => {
    try { return JSON.parse(out.slice(out.search(/^\{/m))); } catch (e) { return {}; }
  };
  const receivedOf = (out) => {
    const line = out.split("\n").find((l) => l.startsWith("agent-received "));
    return line ? line.slice("agent-received ".length) : null;
  };
  try {
    // 1. Recorded through the proxy.
    const up = await startUpstream();
    const rec = await runAsync(["record", "--upstream", up.origin + "/v1", "--", ...self, "record"],
                    { TRACE_UPSTREAM_API_KEY: HOSTED_KEY });
    const upstreamBodies = up.sent.slice();
    await up.stop();
    check(rec.code === 0, "record: the agent's checks pass through the proxy", rec.err.slice(-3000) + rec.out.slice(-2000));
    const N = 7;  // embeddings calls the agent makes
    check(up.requests === N, `record: the upstream got every call (${up.requests} of ${N})`);
    check(up.auth.every((a) => a === "Bearer " + HOSTED_KEY), "record: the upstream key sent as a bearer token");
    const recordRun = newestRun();
    const recorded = receivedOf(rec.out);
    const { exported, calls } = callsOf(recordRun);
    check(calls.length === N && calls.every((c) => field(c, "api") === "openai.embeddings" &&
                                             field(c, "endpoint") === "/v1/embeddings"),
          "record: one openai.embeddings LlmCall per call", JSON.stringify(calls.map((c) => field(c, "api"))));
    if (calls.length === N) {
      const ok = calls.every((c, i) => field(c, "response_json") === upstreamBodies[i] &&
                                       field(c, "upstream") === up.origin + "/v1" &&
                                       field(c, "upstream_request_id") === "fake-req-" + (i + 1) &&
                                       field(c, "model") === MODEL &&
                                       Number(field(c, "timings").total_ms) > 0);
      check(ok, "record: each call's response as the agent got it, the upstream, its request id, the model, timings");
      const usage = calls.map((c) => Number(field(field(c, "usage") || {}, "input_tokens") || 0));
      check(JSON.stringify(usage) === JSON.stringify([1, 3, 2, 1, 0, 1, 2]), "record: usage.input_tokens = prompt_tokens",
            JSON.stringify(usage));
      const status = calls.map((c) => Number(field(c, "http_status")));
      check(JSON.stringify(status) === JSON.stringify([200, 200, 200, 200, 400, 200, 200]) &&
            field(calls[4], "finish_reason") === "error" && /bad input/.test(field(calls[4], "error")),
            "record: the upstream's 400 recorded as a failed call", JSON.stringify(status));
      check(JSON.parse(field(calls[0], "request_json")).encoding_format === "base64" &&
            JSON.parse(field(calls[2], "request_json")).encoding_format === "float",
            "record: the requests as the SDK sent them (base64 by default)");
    }
    const dbBytes = ["", "-wal"].map((s) => {
      try { return fs.readFileSync(env.TRACE_STORE + s).toString("latin1"); } catch (e) { return ""; }
    }).join("");
    check(!JSON.stringify(exported).includes(HOSTED_KEY) && !dbBytes.includes(HOSTED_KEY), "record: the upstream key is not in the store");

    // The run's readers.
    const replay = run(["replay", recordRun, "--json"]);
    let report = {};
    try { report = JSON.parse(replay.out); } catch (e) { /* reported below */ }
    check(replay.code === 1 && report.level === "recorded_only" && report.recorded_only.length === N - 1,
          "replay: the embeddings calls are recorded only (the 400 skipped)", `exit ${replay.code}: ${replay.out.slice(0, 1500)} ${replay.err}`);
    const show = run(["show", recordRun]);
    check(show.code === 0 && show.out.includes("openai.embeddings"), "show: the calls' API", show.out.slice(0, 3000) + show.err);
    const showJson = run(["show", recordRun, "--json"]);
    check(showJson.code === 0, "show --json", showJson.err);
    const otlp = run(["export", recordRun, "--format", "otlp-json"]);
    let spans = [];
    try {
      spans = JSON.parse(otlp.out).resourceSpans[0].scopeSpans[0].spans;
    } catch (e) { /* reported below */ }
    const attrs = (s) => Object.fromEntries(s.attributes.map((a) => [a.key, Object.values(a.value)[0]]));
    const emb = spans.filter((s) => attrs(s)["gen_ai.operation.name"] === "embeddings");
    check(otlp.code === 0 && emb.length === N && emb[0].name === "embeddings " + MODEL,
          "export otlp: an `embeddings {model}` span per call", otlp.err + JSON.stringify(spans.map((s) => s.name)));
    if (emb.length === N) {
      const a = attrs(emb[1]);
      check(Number(a["gen_ai.usage.input_tokens"]) === 3 && a["gen_ai.usage.output_tokens"] === undefined &&
            a["gen_ai.request.temperature"] === undefined && Number(a["gen_ai.embeddings.dimension.count"]) === DIMS &&
            JSON.stringify(a["gen_ai.request.encoding_formats"]) === JSON.stringify({ values: [{ stringValue: "base64" }] }),
            "export otlp: embeddings attributes (usage, dimension count, encoding), no sampling", JSON.stringify(a));
      check(Number(attrs(emb[3])["gen_ai.embeddings.dimension.count"]) === 3, "export otlp: dimensions from the request");
      check(emb[4].status && emb[4].status.code === 2, "export otlp: the 400 is an error span");
    }
    const withContent = run(["export", recordRun, "--format", "otlp-json", "--content"]);
    check(withContent.code === 0 && !withContent.out.includes("gen_ai.input.messages"),
          "export otlp --content: no messages for embeddings", withContent.err);

    // 2. Re-run offline: the recording answers, the upstream is gone.
    const rerun = run(["rerun", recordRun, "--json", "--", ...self, "record"]);
    const rr = reportOf(rerun.out);
    check(rerun.code === 0 && rr.followed === true && rr.calls && rr.calls.answered_from_recording === N && rr.calls.live === 0,
          "rerun: every embeddings call answered from the recording", `exit ${rerun.code}: ${rerun.out.slice(-1500)} ${rerun.err.slice(-1500)}`);
    check(recorded !== null && receivedOf(rerun.out) === recorded, "rerun: the agent got the same vectors");
    const rerunRun = newestRun();
    const rerunCalls = callsOf(rerunRun).calls;
    check(rerunCalls.length === N && rerunCalls.every((c, i) => Number(field(c, "cassette_seq")) > 0 &&
                                                      field(c, "api") === "openai.embeddings" &&
                                                      field(c, "response_json") === field(calls[i], "response_json")),
          "rerun: the new run records the answers with cassette_seq");
    const diff = run(["diff", recordRun, rerunRun, "--json"]);
    let d = {};
    try { d = JSON.parse(diff.out); } catch (e) { /* below */ }
    check(diff.code === 0 && d.identical === true, "diff: the run and its re-run are the same", `exit ${diff.code}: ${diff.out.slice(0, 2000)} ${diff.err}`);

    // A re-run whose last input differs: offline, that call gets 503 no_live_model.
    const offline = run(["rerun", recordRun, "--json", "--", ...self, "diverge"], { EXPECT_NO_LIVE_MODEL: "1" });
    const or = reportOf(offline.out);
    check(offline.code === 1 && or.divergence && or.divergence.call === N && or.calls.answered_from_recording === N - 1,
          "rerun diverging offline: call 7 diverges (the agent checks its 503 no_live_model)", `exit ${offline.code}: ${offline.out.slice(-1500)} ${offline.err.slice(-1500)}`);
    // With --upstream: it goes live.
    const up2 = await startUpstream();
    const live = await runAsync(["rerun", recordRun, "--upstream", up2.origin + "/v1", "--json", "--", ...self, "diverge"],
                     { TRACE_UPSTREAM_API_KEY: HOSTED_KEY });
    await up2.stop();
    const lr = reportOf(live.out);
    check(live.code === 1 && lr.calls && lr.calls.answered_from_recording === N - 1 && lr.calls.live === 1 &&
          up2.requests === 1 && lr.divergence && lr.divergence.call === N &&
          lr.divergence.changes.some((c) => c.path.startsWith("input")),
          "rerun diverging with --upstream: call 7 live, the rest from the recording, the input named",
          `exit ${live.code}, upstream got ${up2.requests}: ${live.out.slice(-2000)} ${live.err.slice(-1500)}`);

    // 3. An upstream that does not answer: a closed port.
    const closed = await startUpstream();
    await closed.stop();
    const down = run(["record", "--upstream", closed.origin + "/v1", "--", ...self, "down"]);
    check(down.code === 0, "down: the agent gets 502 upstream_unavailable", down.err.slice(-2000) + down.out.slice(-1000));
    const downCalls = callsOf(newestRun()).calls;
    check(downCalls.length === 1 && Number(field(downCalls[0], "http_status")) === 502 &&
          /did not answer/.test(field(downCalls[0], "error")) && field(downCalls[0], "api") === "openai.embeddings",
          "down: recorded as a failed call", JSON.stringify(downCalls));

    // The local engine: a clear refusal, recorded as a rejected request.
    const local = run(["record", "--", ...self, "local"]);
    check(local.code === 0, "local: the agent gets 404 unsupported_endpoint naming --upstream", local.err.slice(-2000) + local.out.slice(-1000));
    const localRun = callsOf(newestRun());
    const notes = localRun.exported.events.filter((e) => e.note && e.note.topic === "rejected_request");
    check(localRun.calls.length === 0 && notes.length === 1 && /embeddings/.test(notes[0].note.text),
          "local: no model call, one rejected_request note", JSON.stringify(notes));
  } catch (e) {
    check(false, "no exception", e && e.stack);
  } finally {
    remove();
  }
  tally.finish();
}

if (require.main !== module) {
  module.exports = { startUpstream, vectorOf };
} else if (process.argv[2] === "--agent") {
  agent(process.argv[3]).catch((e) => {
    console.error("agent crashed:", e);
    process.exit(1);
  });
} else {
  driver(process.argv[2]);
}
