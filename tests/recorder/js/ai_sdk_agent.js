// An agent written against the Vercel AI SDK (`ai`) with its default providers, run
// unchanged under `trace record`: `openai(model)` (the OpenAI Responses API, configured
// from OPENAI_BASE_URL / OPENAI_API_KEY) and `anthropic(model)` (the Messages API on
// ANTHROPIC_BASE_URL + "/messages"). For each: generateText, streamText, a multi-step tool
// loop (stopWhen: stepCountIs(3)), a conversation continued from result.response.messages
// (the OpenAI provider sends the earlier answer back as an item_reference), and structured
// output with Output.object; and a Chat Completions stream with a forced tool call
// (`openai.chat(model)`).
//
//   node ai_sdk_agent.js
// Prints "agent-received {...}" (every model call's id, text, tool calls and usage, in call
// order, read from the SDK's step results) and "agent-summary {...}"; exits 1 on a failed
// check.
"use strict";
const path = require("path");
const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const { generateText, streamText, tool, stepCountIs, Output } = require(path.join(modules, "ai"));
const { openai } = require(path.join(modules, "@ai-sdk/openai"));
const { anthropic } = require(path.join(modules, "@ai-sdk/anthropic"));
const { z } = require(path.join(modules, "zod"));
const { Received, runChecks } = require("./agent_common");

const received = new Received();

function noteStep(step) {
  received.add({
    id: step.response.id,
    text: step.text,
    tool_calls: step.toolCalls.map((c) => ({ name: c.toolName, arguments: JSON.stringify(c.input) })),
    input_tokens: step.usage.inputTokens,
    output_tokens: step.usage.outputTokens,
  });
}

function noteSteps(result) {
  for (const step of result.steps) noteStep(step);
  return result;
}

const weather = tool({
  description: "The weather in a city",
  inputSchema: z.object({ city: z.string().max(12) }),
  execute: async ({ city }) => ({ city, celsius: 4 + city.length }),
});

// One forced tool call per step (forced calls are parallel by default, and the demo model
// would fill maxOutputTokens with them).
const oneCallAtATime = { openai: { parallelToolCalls: false }, anthropic: { disableParallelToolUse: true } };

async function exercise(check, name, model) {
  const plain = noteSteps(await generateText({ model, system: "You are terse.", prompt: "Say something about the sea.", maxOutputTokens: 24 }));
  check(plain.steps.length === 1 && typeof plain.text === "string", `${name} generateText`);
  check(plain.usage.outputTokens > 0, `${name} generateText: usage`);

  const streamed = streamText({ model, prompt: "Tell me about rivers.", maxOutputTokens: 24 });
  let text = "";
  for await (const delta of streamed.textStream) text += delta;
  noteSteps({ steps: await streamed.steps });
  check(text === (await streamed.text), `${name} streamText: the deltas are the text`);
  check(["stop", "length"].includes(await streamed.finishReason), `${name} streamText: finish reason`);

  // A tool loop: every step must call the tool, three steps.
  const loop = noteSteps(await generateText({
    model, tools: { get_weather: weather }, toolChoice: "required", stopWhen: stepCountIs(3),
    providerOptions: oneCallAtATime,
    prompt: "What is the weather in Oslo?", maxOutputTokens: 60,
  }));
  check(loop.steps.length === 3, `${name} tool loop: 3 steps, got ${loop.steps.length}`);
  check(loop.steps.every((s) => s.toolResults.length > 0 && s.toolResults[0].output.celsius > 0), `${name} tool loop: tools ran`);

  // The conversation goes on from the SDK's own record of it.
  const first = noteSteps(await generateText({ model, prompt: "My name is Ada.", maxOutputTokens: 12 }));
  const second = noteSteps(await generateText({
    model, messages: [...[{ role: "user", content: "My name is Ada." }], ...first.response.messages, { role: "user", content: "What is my name?" }],
    maxOutputTokens: 12,
  }));
  check(typeof second.text === "string", `${name} continued conversation`);

  // Enums, no numeric bounds: the Anthropic provider sends none (Anthropic's structured
  // outputs take none) and checks them after the answer.
  const Sea = z.object({ mood: z.enum(["calm", "rough"]), waves: z.enum(["low", "high"]) });
  const structured = noteSteps(await generateText({ model, output: Output.object({ schema: Sea }), prompt: "Describe the sea.", maxOutputTokens: 300 }));
  check(Sea.safeParse(structured.output).success, `${name} Output.object: ${structured.text}`);
}

// Chat Completions (`openai.chat`), streamed with a forced tool call: the stream opens the
// answer with content null, so the SDK makes no empty text part before the call (a first
// chunk with content "" became a text-start and an empty text-delta).
async function chatToolStream(check) {
  const result = streamText({
    model: openai.chat("gpt-4.1-mini"), tools: { get_weather: weather }, toolChoice: "required",
    providerOptions: oneCallAtATime, prompt: "What is the weather in Rome?", maxOutputTokens: 60,
  });
  const parts = [];
  for await (const part of result.fullStream) parts.push(part.type);
  noteSteps({ steps: await result.steps });
  check(parts.includes("tool-call"), "openai.chat streamText: a tool call", JSON.stringify(parts));
  check(!parts.includes("text-start") && !parts.includes("text-delta"),
        "openai.chat streamText: no empty text part before the tool call", JSON.stringify(parts));
}

async function main(check) {
  await chatToolStream(check);
  await exercise(check, "openai", openai("gpt-4.1-mini"));
  await exercise(check, "anthropic", anthropic("claude-haiku-4-5"));
  return received;
}

runChecks(main);
