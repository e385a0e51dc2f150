// `trace rerun` with the official `openai` npm SDK: a run recorded with non-streamed calls
// re-runs the same agent and the agent switched to streaming, both from the recording (0
// calls live), each getting the answers the SDK delivered in the recording (text and tool
// calls). (The other direction, a streamed recording answering a non-streaming client, is
// covered by rerun_unit_test's RecordedAnswer tests.)
//
//   node openai_sdk_rerun_e2e.js TRACE_BINARY
"use strict";
const path = require("path");
const { Tally, scratch } = require("../recorder/js/e2e_common.js");

const trace = process.argv[2];
const agent = path.join(__dirname, "sdk_rerun_agent.js");
const tally = new Tally();
const check = tally.check;
const s = scratch(trace, "trace-rerun-sdk-");

function answers(out) {
  const m = out.match(/^agent-answers (.*)$/m);
  return m ? m[1] : null;
}

function report(out) {
  const at = out.lastIndexOf("\n{\n");
  try {
    return JSON.parse(out.slice(at + 1));
  } catch (e) {
    return null;
  }
}

function newestRun() {
  return JSON.parse(s.run(["ls", "--json"]).out)[0].run_id;
}

try {
  for (const [recorded, rerun] of [["plain", "stream"]]) {
    const rec = s.run(["record", "--seed", "5", "--", "node", agent, recorded]);
    if (!check(rec.code === 0, `record ${recorded}`, rec.err)) continue;
    const parent = newestRun();
    const want = answers(rec.out);
    check(want !== null && want.includes("lookup_order"), `${recorded} recording made a tool call`, want);
    for (const mode of [rerun, recorded]) {
      const r = s.run(["rerun", parent, "--json", "--", "node", agent, mode]);
      check(r.code === 0, `rerun of a ${recorded} recording by a ${mode} agent exits 0`, r.err + r.out);
      check(answers(r.out) === want, `${mode} agent got the ${recorded} recording's answers`,
            `${answers(r.out)} vs ${want}`);
      const rep = report(r.out);
      check(rep && rep.calls.answered_from_recording === 3 && rep.calls.live === 0,
            `${mode} agent answered from the recording only`, JSON.stringify(rep && rep.calls));
    }
  }
} finally {
  s.remove();
}
tally.finish();
