// trace ui in a real browser: Debian's chromium, headless, driven by puppeteer-core (npm;
// it uses the installed browser and downloads nothing).
//
// Set-up: a scratch store with the example support agent's run (label "demo"), two runs of
// tests/ui/stock_agent.py under the same seed that differ in one tool result, and a fork of
// the first at call 2. Then, in the browser: the run list (4 runs), a label filter, the
// demo run's timeline, its first model call with the rendered prompt equal to `trace show
// --json`'s and its sampled tokens equal to the recorded ids, a replay from the page that
// says "bitwise", the diff of the two stock runs naming "tools" as the changed source, and
// the fork's page (its parent, its fork point). No page may log an error (a Content-Security-
// Policy violation included). Screenshots of each page go to SCREENSHOT_DIR (docs/ui.md
// shows them).
//
//   node ui_e2e_test.js TRACE_BIN SCREENSHOT_DIR [CHROMIUM]
// Prints "N passed, N failed" and exits non-zero on any failure.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");
const { Tally, scratch } = require("../recorder/js/e2e_common");

const modules = path.resolve(__dirname, "../../tools/js/node_modules");
const puppeteer = require(path.join(modules, "puppeteer-core"));

const [trace, shotDir, chromium = "/usr/bin/chromium"] = process.argv.slice(2);
const { dir, env, run, remove } = scratch(trace, "trace-ui-e2e-");
const tally = new Tally();
const check = tally.check;
const repo = path.resolve(__dirname, "../..");
const stockAgent = path.join(__dirname, "stock_agent.py");

function record(args, what, extraEnv = {}) {
  const r = run(args, extraEnv);
  if (!check(r.code === 0, what, r.err.slice(-2000))) throw new Error("set-up failed: " + what);
  return r;
}

// The runs of the store, newest first (trace ls --json).
const listRuns = () => JSON.parse(run(["ls", "--json"]).out);

function setUp() {
  // On the scalar path: a replay on this machine's best path then differs in where the
  // arithmetic ran, not in its bits (the page must say "same contract").
  record(["record", "--label", "demo", "--seed", "3", "--", "python3",
    path.join(repo, "examples/support_agent/agent.py"), "--turns", "3"], "record the demo agent",
    { TRACE_CPU_ISA: "scalar" });
  const demo = listRuns()[0].run_id;
  record(["record", "--seed", "7", "--label", "stock", "--", "python3", stockAgent, "3 in stock"],
    "record the stock agent (in stock)");
  const stockA = listRuns()[0].run_id;
  record(["record", "--seed", "7", "--label", "stock", "--", "python3", stockAgent, "sold out"],
    "record the stock agent (sold out)");
  const stockB = listRuns()[0].run_id;
  record(["rerun", stockA, "--live-from", "2", "--", "python3", stockAgent, "3 in stock"],
    "fork the first stock run at call 2");
  const fork = listRuns()[0].run_id;
  return { demo, stockA, stockB, fork };
}

// `trace ui --port 0`: resolves to {url, stop} once it listens.
async function startUi() {
  const child = spawn(trace, ["ui", "--port", "0"], { env });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/trace ui: (http:\S+)/);
      if (m) resolve(m[1]);
    });
    exited.then((code) => reject(new Error("trace ui exited " + code + ": " + err)));
  });
  return { url, stop: async () => (child.kill("SIGTERM"), exited) };
}

async function shot(page, name) {
  fs.mkdirSync(shotDir, { recursive: true });
  await page.screenshot({ path: path.join(shotDir, name + ".png"), fullPage: false });
}

const texts = (page, selector) => page.$$eval(selector, (nodes) => nodes.map((n) => n.textContent));

async function runList(page, url, runs) {
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#runs tbody tr");
  const ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.dataset.run));
  check(ids.length === 4, "the list shows the 4 runs", JSON.stringify(ids));
  check(JSON.stringify(ids) === JSON.stringify(listRuns().map((r) => r.run_id)),
    "the list is newest first, as trace ls", JSON.stringify(ids));
  await shot(page, "runs");

  // Text the model saw: the first stock run's tool result is in its prompts and its fork's.
  await page.type("#filter-content", "3 IN STOCK");
  await page.click("#filter-apply");
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 2);
  const found = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.dataset.run));
  check(JSON.stringify(found.sort()) === JSON.stringify([runs.stockA, runs.fork].sort()),
    "the content filter finds the runs whose prompts hold the tool result", JSON.stringify(found));

  await page.goto(url + "#/", { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 4);
  await page.type("#filter-label", "demo");
  await Promise.all([page.waitForFunction(() => location.hash.includes("label=demo")), page.click("#filter-apply")]);
  await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 1);
  const filtered = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.dataset.run));
  check(filtered.length === 1 && filtered[0] === runs.demo, "the label filter leaves the demo run",
    JSON.stringify(filtered));
}

async function demoRun(page, url, runs) {
  const shown = JSON.parse(run(["show", runs.demo, "--json"]).out);
  const calls = shown.events.filter((e) => e.kind === "llm_call");
  await page.click(`#runs tbody tr[data-run="${runs.demo}"]`);
  await page.waitForSelector("#timeline tbody tr");
  const seqs = await page.$$eval("#timeline tbody tr", (rows) => rows.map((r) => Number(r.dataset.seq)));
  check(JSON.stringify(seqs) === JSON.stringify(shown.events.map((e) => e.seq)),
    "the timeline lists every event of trace show", JSON.stringify(seqs));
  await shot(page, "run");

  const first = calls[0];
  await page.click(`#timeline tr[data-seq="${first.seq}"]`);
  await page.waitForSelector("#rendered-prompt");
  const prompt = await page.$eval("#rendered-prompt", (n) => n.textContent);
  check(prompt === first.rendered_prompt, "the page's rendered prompt equals trace show --json's",
    JSON.stringify(prompt.slice(0, 200)) + " vs " + JSON.stringify(first.rendered_prompt.slice(0, 200)));
  const marked = await page.$$eval("#rendered-prompt mark", (m) => m.map((x) => x.dataset.var));
  const vars = shown.events.filter((e) => e.kind === "template_var" && e.seq < first.seq && e.value &&
    first.rendered_prompt.includes(e.value)).map((e) => e.name);
  check(vars.length > 0 && vars.every((v) => marked.includes(v)),
    "template variables found in the prompt are marked", JSON.stringify({ vars, marked }));
  const roles = await texts(page, "#messages .role");
  check(roles[0] === "system", "the messages as sent start with the system prompt", JSON.stringify(roles));
  // The sampled tokens on the page are the recorded ids, in order.
  const exported = JSON.parse(run(["export", runs.demo, "--format", "json", "--no-redact"]).out);
  const call = exported.events.find((e) => Number(e.seq) === first.seq).llm_call;
  const steps = await page.$$eval("#tokens .tok", (t) => t.map((x) => x.title.match(/id (\d+)/)[1]).map(Number));
  check(JSON.stringify(steps) === JSON.stringify(call.token_ids),
    "the token view shows the recorded token ids in order", JSON.stringify({ steps, ids: call.token_ids }));
  await shot(page, "call");

  await page.click("#replay-call-button");
  await page.waitForSelector("#replay-call-verdict", { timeout: 120000 });
  const one = await page.$$eval("#replay-call-result tr[data-call]", (r) => r.map((x) => Number(x.dataset.call)));
  const oneVerdict = await page.$eval("#replay-call-verdict", (n) => n.dataset.level);
  check(JSON.stringify(one) === "[1]" && oneVerdict === "bitwise", "replaying the open call replays it alone, bitwise",
    JSON.stringify({ one, oneVerdict }));

  await page.click("#replay-button");
  await page.waitForSelector("#replay-verdict", { timeout: 120000 });
  const verdict = await page.$eval("#replay-verdict", (n) => n.textContent);
  check(verdict.startsWith("bitwise"), "the replay started from the page reproduces bitwise", verdict);
  const perCall = await page.$$eval("#replay-result tr[data-call]", (r) => r.length);
  check(perCall === calls.length, "the replay shows a verdict per call", String(perCall));
  // The fingerprint differences the page lists are `trace replay --json`'s on this machine.
  const cli = JSON.parse(run(["replay", runs.demo, "--json"]).out);
  const fp = cli.fingerprint_differences;
  const summary = await page.$eval("#replay-fingerprint summary", (n) => n.textContent).catch(() => "");
  check(fp.length === 0 ? summary === "" : summary.startsWith(fp.length + " fingerprint difference") &&
    summary.includes("same contract") === fp.every((f) => f.same_contract),
  "the page lists the replay's fingerprint differences and calls them same contract",
  JSON.stringify({ summary, fp }));
  await shot(page, "replay");
}

async function diffOfStockRuns(page, url, runs) {
  await page.goto(url + "#/?label=stock", { waitUntil: "load" });
  await page.waitForSelector(`#runs tr[data-run="${runs.stockA}"]`);
  await page.click(`#runs tr[data-run="${runs.stockA}"] .select-run`);
  await page.click(`#runs tr[data-run="${runs.stockB}"] .select-run`);
  await page.click("#diff-selected");
  await page.waitForSelector("#sources tbody tr");
  const changed = await page.$$eval("#sources tr.changed", (r) => r.map((x) => x.dataset.source));
  const cli = JSON.parse(run(["diff", runs.stockA, runs.stockB, "--json"]).out);
  check(JSON.stringify(changed.sort()) === JSON.stringify(cli.changed.slice().sort()),
    "the page's changed sources are trace diff's", JSON.stringify({ changed, cli: cli.changed }));
  check(changed.includes("tools"), "the diff names the tool result as the change", JSON.stringify(changed));
  const firstDiff = await page.$eval("#first-difference", (n) => n.textContent);
  check(firstDiff.includes("sold out"), "the first difference shows the tool result", firstDiff);
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
  await shot(page, "diff-dark");
  await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
  await shot(page, "diff");
}

async function forkPage(page, url, runs) {
  await page.goto(url + "#/run/" + runs.fork, { waitUntil: "load" });
  await page.waitForSelector("#lineage");
  const parent = await page.$eval("#parent-link", (a) => a.getAttribute("href"));
  check(parent === "#/run/" + runs.stockA, "the fork links its parent", parent);
  const forkRow = await page.$eval("#timeline tr.fork-point", (r) => Number(r.dataset.call));
  check(forkRow === 2, "the fork's page marks call 2, where it went live", String(forkRow));
  await shot(page, "fork");
  await page.goto(url + "#/run/" + runs.stockA, { waitUntil: "load" });
  await page.waitForSelector("#children a");
  const children = await page.$$eval("#children li > a:first-child", (a) => a.map((x) => x.getAttribute("href")));
  check(JSON.stringify(children) === JSON.stringify(["#/run/" + runs.fork]),
    "the parent lists its fork", JSON.stringify(children));
}

// `trace replay --html` and `trace diff --html`: the same views from a file, no server.
async function staticPages(page, runs) {
  const replayFile = path.join(dir, "replay.html");
  const rep = run(["replay", runs.demo, "--html", replayFile]);
  check(rep.code === 0, "trace replay --html exits 0", rep.err.slice(-2000));
  await page.goto("file://" + replayFile, { waitUntil: "load" });
  await page.waitForSelector("#replay-verdict");
  check(await page.$eval("#replay-verdict", (n) => n.dataset.level) === "bitwise",
    "the replay page shows the CLI's verdict");
  const shown = JSON.parse(run(["show", runs.demo, "--json"]).out);
  const first = shown.events.find((e) => e.kind === "llm_call");
  await page.click(`#timeline tr[data-seq="${first.seq}"]`);
  await page.waitForSelector("#rendered-prompt");
  check(await page.$eval("#rendered-prompt", (n) => n.textContent) === first.rendered_prompt,
    "the replay page's call shows the rendered prompt of trace show --json");
  check(await page.$("#replay-call-button") === null, "a static page offers no replay button");
  const diffFile = path.join(dir, "diff.html");
  run(["diff", runs.stockA, runs.stockB, "--html", diffFile]);
  await page.goto("file://" + diffFile, { waitUntil: "load" });
  await page.waitForSelector("#sources tbody tr");
  const changed = await page.$$eval("#sources tr.changed", (r) => r.map((x) => x.dataset.source));
  check(JSON.stringify(changed) === JSON.stringify(["tools"]), "the diff page names the changed source",
    JSON.stringify(changed));
}

async function main() {
  let ui = null;
  let browser = null;
  try {
    const runs = setUp();
    ui = await startUi();
    browser = await puppeteer.launch({
      executablePath: chromium,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--lang=en-US"],
    });
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    const problems = [];
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(String(e)));
    page.on("response", (r) => {
      if (r.status() >= 400) problems.push(r.status() + " " + r.url());
    });
    page.setDefaultTimeout(20000);
    await runList(page, ui.url, runs);
    await demoRun(page, ui.url, runs);
    await diffOfStockRuns(page, ui.url, runs);
    await forkPage(page, ui.url, runs);
    await staticPages(page, runs);
    check(problems.length === 0, "the pages logged no error", problems.join("\n"));
  } catch (e) {
    check(false, "the browser session ran to its end", e.stack);
  } finally {
    if (browser) await browser.close();
    if (ui) check((await ui.stop()) === 0, "trace ui stops cleanly on SIGTERM");
    remove();
  }
  tally.finish();
}

main();
