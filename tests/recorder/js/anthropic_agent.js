// An agent written against the official `@anthropic-ai/sdk` npm SDK, run unchanged under
// `trace record` (ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY come from the recorder):
// messages.create, messages.stream (its text events and finalMessage equal the non-streamed
// message for the same seeded request), a tool-use loop (tool_use -> tool_result, up to 3
// turns), a streamed tool_use with input_json deltas, structured output parsed by the SDK's
// zodOutputFormat, models.list, and the errors the API answers with, in Anthropic's shape.
//
//   node anthropic_agent.js
// Prints "agent-received {...}" (every message's id, text, tool calls and usage, in call
// order) and "agent-summary {...}"; exits 1 on a failed check.
"use strict";
const path = require("path");
const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const Anthropic = require(path.join(modules, "@anthropic-ai/sdk")).default;
const { zodOutputFormat } = require(path.join(modules, "@anthropic-ai/sdk/helpers/zod"));
const { z } = require(path.join(modules, "zod"));
const { Received, runChecks } = require("./agent_common");

const MODEL = "claude-haiku-4-5";  // not on the SDK's deprecation list (it warns on each call)
const client = new Anthropic({ maxRetries: 0 });
const received = new Received();

function textOf(m) {
  return m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
}

function note(m) {
  received.add({
    id: m.id,
    text: textOf(m),
    tool_calls: m.content.filter((b) => b.type === "tool_use").map((b) => ({ name: b.name, arguments: JSON.stringify(b.input) })),
    input_tokens: m.usage.input_tokens,
    output_tokens: m.usage.output_tokens,
  });
  return m;
}

const weatherTool = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", maxLength: 12 } },
    required: ["city"],
    additionalProperties: false,
  },
};

async function main(check) {
  // One seeded request (seed: this server's extension), whole and streamed.
  const req = { model: MODEL, max_tokens: 24, system: "You are terse.", messages: [{ role: "user", content: "Tell me about the sea." }], seed: 3 };
  const plain = note(await client.messages.create(req));
  check(plain.type === "message" && plain.role === "assistant" && plain.model === MODEL, "create: a message with the model asked for");
  check(["end_turn", "max_tokens"].includes(plain.stop_reason), `create: stop_reason ${plain.stop_reason}`);
  const stream = client.messages.stream(req);
  let text = "";
  stream.on("text", (t) => { text += t; });
  const final = note(await stream.finalMessage());
  check(text === textOf(plain), "stream: the text events equal the non-streamed text");
  check(textOf(final) === textOf(plain) && final.stop_reason === plain.stop_reason, "stream: finalMessage equals the message");
  check(final.usage.output_tokens === plain.usage.output_tokens, "stream: same usage");

  // A tool-use loop: the model asks, the agent answers with tool_result, up to 3 turns.
  const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
  let turns = 0;
  for (; turns < 3; ++turns) {
    const m = note(await client.messages.create({
      model: MODEL, max_tokens: 60, tools: [weatherTool], messages,
      // One tool_use per turn (forced tool use is parallel by default).
      tool_choice: turns < 2 ? { type: "any", disable_parallel_tool_use: true } : { type: "none" },
    }));
    const uses = m.content.filter((b) => b.type === "tool_use");
    if (m.stop_reason !== "tool_use") break;
    check(uses.length > 0 && uses.every((u) => typeof u.input.city === "string"), "tool loop: inputs follow the schema");
    messages.push({ role: "assistant", content: m.content });
    messages.push({
      role: "user",
      content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id, content: JSON.stringify({ celsius: 4 + u.input.city.length }) })),
    });
  }
  check(turns === 2, `tool loop: two turns of tool use then an answer, got ${turns}`);

  // A streamed tool_use: the input arrives as input_json deltas.
  let json = "";
  const toolStream = client.messages.stream({ model: MODEL, max_tokens: 60, tools: [weatherTool], tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true }, messages: [{ role: "user", content: "Weather in Rome?" }] });
  toolStream.on("inputJson", (delta) => { json += delta; });
  const toolMessage = note(await toolStream.finalMessage());
  const use = toolMessage.content.find((b) => b.type === "tool_use");
  check(use && JSON.stringify(JSON.parse(json)) === JSON.stringify(use.input), "streamed tool_use: deltas equal the input");

  // Structured output through the SDK's zod helper. No numeric bounds: Anthropic's structured
  // outputs take none, so the SDK moves them into the description (which constrains no
  // grammar) and checks them after the answer; an enum holds the model to the values.
  const Sea = z.object({ mood: z.enum(["calm", "rough"]), waves: z.enum(["low", "high"]) });
  const parsed = note(await client.messages.parse({ model: MODEL, max_tokens: 300, messages: [{ role: "user", content: "Describe the sea." }], output_config: { format: zodOutputFormat(Sea) } }));
  check(parsed.parsed_output && Sea.safeParse(parsed.parsed_output).success, `zodOutputFormat: parsed ${textOf(parsed)}`);

  const models = await client.models.list();
  check(models.data.length >= 1 && models.data[0].type === "model", "models.list in Anthropic's shape");

  // What the API refuses, in its own error shape.
  for (const [body, what] of [
    [{ model: MODEL, max_tokens: 5, temperature: 2, messages: [{ role: "user", content: "x" }] }, "temperature 2"],
    [{ model: MODEL, max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "http://x" } }] }] }, "an image"],
    [{ model: MODEL, max_tokens: 5, messages: [{ role: "user", content: "x" }, { role: "assistant", content: "ends with a space " }] }, "a prefill ending in whitespace"],
  ]) {
    try {
      await client.messages.create(body);
      check(false, `${what}: expected 400`);
    } catch (e) {
      check(e instanceof Anthropic.BadRequestError && e.error && e.error.type === "error" &&
            e.error.error.type === "invalid_request_error" && e.error.error.message.length > 0, `${what}: expected an Anthropic 400, got ${e}`);
    }
  }
  const wrongKey = new Anthropic({ apiKey: "wrong", maxRetries: 0 });
  try {
    await wrongKey.messages.create(req);
    check(false, "a wrong key: expected 401");
  } catch (e) {
    check(e instanceof Anthropic.AuthenticationError && e.error.error.type === "authentication_error", `a wrong key: expected 401, got ${e}`);
  }
  return received;
}

runChecks(main);
