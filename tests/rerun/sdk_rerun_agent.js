// An agent written against the official `openai` npm SDK for the rerun e2e test: three chat
// calls (two answers, one forced tool call), made whole or streamed (`node
// sdk_rerun_agent.js plain|stream`). It prints "agent-answers [...]": each call's text and
// tool calls as the SDK delivered them, so the driver can compare a re-run with the
// recording whatever the streaming shape.
"use strict";
const path = require("path");
const modules = path.resolve(__dirname, "../../tools/js/node_modules");
const OpenAI = require(path.join(modules, "openai")).default;

const client = new OpenAI({ maxRetries: 0 });
const stream = process.argv[2] === "stream";
const TOOLS = [{
  type: "function",
  function: {
    name: "lookup_order",
    description: "Look up an order by id.",
    parameters: { type: "object", properties: { order_id: { type: "integer", minimum: 1, maximum: 9 } },
                  required: ["order_id"] },
  },
}];

async function ask(body) {
  if (!stream) {
    const r = await client.chat.completions.create(body);
    const m = r.choices[0].message;
    return { text: m.content || "", tools: (m.tool_calls || []).map((c) => [c.function.name, c.function.arguments]) };
  }
  const s = await client.chat.completions.create({ ...body, stream: true });
  let text = "";
  const tools = [];
  for await (const chunk of s) {
    const d = chunk.choices[0] && chunk.choices[0].delta;
    if (!d) continue;
    if (d.content) text += d.content;
    for (const t of d.tool_calls || []) {
      if (!tools[t.index]) tools[t.index] = ["", ""];
      if (t.function && t.function.name) tools[t.index][0] += t.function.name;
      if (t.function && t.function.arguments) tools[t.index][1] += t.function.arguments;
    }
  }
  return { text, tools };
}

async function main() {
  const model = "gpt-4o-mini";
  const answers = [];
  const system = { role: "system", content: "You are terse." };
  answers.push(await ask({ model, messages: [system, { role: "user", content: "Say hello." }],
                           max_tokens: 12, temperature: 0.8 }));
  answers.push(await ask({ model, messages: [system, { role: "user", content: "Where is order 4?" }],
                           tools: TOOLS, tool_choice: "required", max_tokens: 64, temperature: 0.8 }));
  answers.push(await ask({ model, messages: [system, { role: "user", content: "Say goodbye." }],
                           max_tokens: 12, temperature: 0.8 }));
  console.log("agent-answers " + JSON.stringify(answers));
}

main().catch((e) => {
  console.error("agent crashed:", e);
  process.exit(1);
});
