// An agent written against the official `openai` npm SDK's Responses API, run unchanged
// under `trace record` (OPENAI_BASE_URL and OPENAI_API_KEY come from the recorder):
// responses.create streamed and not (the same seeded request gives the same answer),
// responses.stream's helper, a 3-turn function-tool loop through previous_response_id, the
// same conversation sent back as items (function_call + function_call_output, store: false),
// structured output parsed by the SDK's zodTextFormat, and the errors the API answers with.
//
//   node responses_agent.js
// Prints "agent-received {...}" (every response's id, text, tool calls and usage, in call
// order, for the driver to compare with the recording) and "agent-summary {...}"; exits 1
// on a failed check.
"use strict";
const path = require("path");
const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const OpenAI = require(path.join(modules, "openai")).default;
const { zodTextFormat } = require(path.join(modules, "openai/helpers/zod"));
const { z } = require(path.join(modules, "zod"));
const { Received, runChecks } = require("./agent_common");

const MODEL = "gpt-4.1-mini";
const client = new OpenAI({ maxRetries: 0 });
const received = new Received();

// The text of a response's message items (a streamed response object has no output_text).
function textOf(r) {
  return r.output.filter((i) => i.type === "message")
    .flatMap((i) => i.content).filter((c) => c.type === "output_text").map((c) => c.text).join("");
}

function note(r) {
  received.add({
    id: r.id,
    text: textOf(r),
    tool_calls: r.output.filter((i) => i.type === "function_call").map((i) => ({ name: i.name, arguments: i.arguments })),
    input_tokens: r.usage.input_tokens,
    output_tokens: r.usage.output_tokens,
  });
  return r;
}

const weatherTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", maxLength: 12 } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
};

function runTool(call) {
  const args = JSON.parse(call.arguments);
  return JSON.stringify({ city: args.city, celsius: 4 + (args.city || "").length });
}

async function main(check) {
  // One seeded request, whole and streamed: the same answer.
  const req = { model: MODEL, instructions: "You are terse.", input: "Say something about the sea.", max_output_tokens: 24, seed: 3 };
  const plain = note(await client.responses.create(req));
  check(plain.object === "response" && plain.model === MODEL, "create: a response object with the model asked for");
  check(plain.output_text === textOf(plain), "create: the SDK's output_text is the message text");
  let streamed = "", completed = null;
  const events = [];
  for await (const event of await client.responses.create({ ...req, stream: true })) {
    events.push(event.type);
    if (event.type === "response.output_text.delta") streamed += event.delta;
    if (event.type === "response.completed" || event.type === "response.incomplete") completed = event.response;
  }
  note(completed);
  check(events[0] === "response.created", `stream: starts with response.created, got ${events[0]}`);
  check(streamed === plain.output_text, "stream: the deltas equal the non-streamed text");
  check(JSON.stringify(completed.trace.token_ids) === JSON.stringify(plain.trace.token_ids), "stream: same tokens");

  // The SDK's stream helper.
  const helper = client.responses.stream({ ...req, seed: 4 });
  let helperText = "";
  helper.on("response.output_text.delta", (e) => { helperText += e.delta; });
  const final = note(await helper.finalResponse());
  check(helperText === final.output_text, "responses.stream: deltas equal finalResponse().output_text");

  // A 3-turn function-tool loop through previous_response_id (one call per turn: forced
  // calls are parallel by default, and the demo model would fill max_output_tokens with them).
  let previous = null;
  let input = "What is the weather in Oslo, then in Rome?";
  const transcript = [{ role: "user", content: input }];
  let turns = 0;
  for (; turns < 3; ++turns) {
    const r = note(await client.responses.create({
      model: MODEL, input, tools: [weatherTool], tool_choice: turns < 2 ? "required" : "none",
      parallel_tool_calls: false, previous_response_id: previous, max_output_tokens: 60,
    }));
    const calls = r.output.filter((i) => i.type === "function_call");
    if (calls.length === 0) break;
    previous = r.id;
    input = calls.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: runTool(c) }));
    for (const c of calls) transcript.push({ type: "function_call", call_id: c.call_id, name: c.name, arguments: c.arguments });
    transcript.push(...input);
    check(calls.every((c) => JSON.parse(c.arguments).city !== undefined), "tool loop: arguments follow the schema");
  }
  check(turns === 2, `tool loop: two turns of calls then an answer, got ${turns}`);
  // The same conversation sent back as items, not stored.
  const items = note(await client.responses.create({ model: MODEL, input: transcript, tools: [weatherTool], tool_choice: "none", store: false, max_output_tokens: 16 }));
  check(items.store === false, "items: store false echoed");
  try {
    await client.responses.create({ model: MODEL, previous_response_id: items.id, input: "again" });
    check(false, "a response with store: false cannot be continued");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, `store: false then previous_response_id: 404, got ${e}`);
  }

  // Forced tool call, streamed: the arguments arrive as function_call_arguments events.
  let args = "";
  for await (const event of await client.responses.create({ model: MODEL, input: "Weather in Paris?", tools: [weatherTool], tool_choice: "required", parallel_tool_calls: false, max_output_tokens: 60, stream: true })) {
    if (event.type === "response.function_call_arguments.delta") args += event.delta;
    if (event.type === "response.completed") note(event.response);
  }
  check(JSON.parse(args).city !== undefined, "streamed function call arguments parse");

  // Structured output through the SDK's zod helper.
  const Sea = z.object({ mood: z.enum(["calm", "rough"]), waves: z.number().int().min(0).max(9) });
  const parsed = note(await client.responses.parse({ model: MODEL, input: "Describe the sea.", text: { format: zodTextFormat(Sea, "sea") }, max_output_tokens: 300 }));
  check(parsed.output_parsed && Sea.safeParse(parsed.output_parsed).success, `zodTextFormat: parsed ${parsed.output_text}`);

  // What the API refuses.
  for (const [body, status, what] of [
    [{ model: MODEL, input: "x", previous_response_id: "resp_nope" }, 404, "an unknown previous_response_id"],
    [{ model: MODEL, input: "x", temperature: 3 }, 400, "temperature 3"],
    [{ model: MODEL, input: [{ type: "function_call_output", output: "x" }] }, 400, "an item without call_id"],
  ]) {
    try {
      await client.responses.create(body);
      check(false, `${what}: expected ${status}`);
    } catch (e) {
      check(e instanceof OpenAI.APIError && e.status === status && e.message.length > 0, `${what}: expected ${status}, got ${e}`);
    }
  }
  return received;
}

runChecks(main);
