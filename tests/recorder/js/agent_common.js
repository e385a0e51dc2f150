// What the SDK agents of the recorder's e2e tests share: a list of what the agent received
// (printed for the driver to compare with the recording) and the check / summary / exit
// protocol of openai_agent.js.
"use strict";

class Received {
  constructor() {
    this.calls = [];
  }
  add(call) {
    this.calls.push(call);
  }
}

// Runs `main(check)`, prints "agent-received {...}" and "agent-summary {...}", exits 1 when
// a check failed or main threw.
function runChecks(main) {
  const failures = [];
  const check = (ok, what) => {
    if (!ok) failures.push(what);
    return ok;
  };
  main(check)
    .then((received) => {
      console.log("agent-received " + JSON.stringify(received.calls));
      console.log("agent-summary " + JSON.stringify({ calls: received.calls.length, failures: failures.length }));
      if (failures.length) {
        for (const f of failures) console.error("FAIL " + f);
        process.exit(1);
      }
    })
    .catch((e) => {
      console.error("agent crashed:", e);
      process.exit(1);
    });
}

module.exports = { Received, runChecks };
