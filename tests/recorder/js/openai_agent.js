// An agent written against the official `openai` npm SDK, run unchanged under
// `trace record` (OPENAI_BASE_URL and OPENAI_API_KEY come from the recorder). It hard-codes
// "gpt-4o-mini", as most agents do, and goes through what real agents use: chat, streaming
// (with logprobs and usage), streams abandoned mid-way (break out of `for await`, and
// AbortController), forced tool calls with nested schemas, structured outputs parsed by the
// SDK's own zod helpers, models.list / models.retrieve, 64 concurrent requests, legacy
// completions with a token-id prompt, and the errors OpenAI answers with a 400.
//
//   node openai_agent.js [ABANDONS]
// Prints "agent-summary {...}" and exits 0, or prints what failed and exits 1.
"use strict";
const path = require("path");
const modules = path.resolve(__dirname, "../../../tools/js/node_modules");
const OpenAI = require(path.join(modules, "openai")).default;
const { zodResponseFormat, zodFunction } = require(path.join(modules, "openai/helpers/zod"));
const { z } = require(path.join(modules, "zod"));
const Ajv = require(path.join(modules, "ajv")).default;

const MODEL = "gpt-4o-mini";
const client = new OpenAI({ maxRetries: 0 });
const failures = [];
const summary = {};

function check(ok, what) {
  if (!ok) failures.push(what);
  return ok;
}

function user(text) {
  return [{ role: "system", content: "You are terse." }, { role: "user", content: text }];
}

async function expectStatus(status, body, what) {
  try {
    await client.chat.completions.create(body);
    check(false, `${what}: expected HTTP ${status}, got 200`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status,
          `${what}: expected HTTP ${status}, got ${e.status} ${e.message}`);
  }
}

const contactSchema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 16 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    address: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, zip: { type: "string", minLength: 5, maxLength: 5 } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
    tags: { type: "array", items: { type: "string", enum: ["new", "vip", "churned"] }, maxItems: 2 },
  },
  required: ["name", "age", "address", "tags"],
  additionalProperties: false,
};

async function main() {
  // Plain chat and the same request streamed: same text, same usage (but the prefix cache).
  const req = { model: MODEL, messages: user("Say hello."), max_tokens: 12, seed: 3, logprobs: true, top_logprobs: 2 };
  const plain = await client.chat.completions.create(req);
  check(plain.choices[0].message.role === "assistant", "chat: no assistant message");
  check(plain.model === MODEL, `chat: model echoed as ${plain.model}`);
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null;
  const logprobs = [];
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content || "";
      if (c.finish_reason) finish = c.finish_reason;
      if (c.logprobs && c.logprobs.content) logprobs.push(...c.logprobs.content);
    }
  }
  check(text === plain.choices[0].message.content, "stream: content differs from the non-streamed response");
  check(finish === plain.choices[0].finish_reason, "stream: finish_reason differs");
  check(JSON.stringify(logprobs) === JSON.stringify(plain.choices[0].logprobs.content), "stream: logprobs differ");
  check(usage && usage.completion_tokens === plain.usage.completion_tokens &&
        usage.prompt_tokens_details !== undefined, "stream: usage missing or different");

  // Streams abandoned mid-way: break out of for-await, and AbortController.
  const abandons = Number(process.argv[2] || 20);
  let aborted = 0;
  for (let k = 0; k < abandons; ++k) {
    const long = { model: MODEL, messages: user(`Tell a long story, number ${k}.`), max_tokens: 1500, seed: 100 + k, stream: true };
    if (k % 2 === 0) {
      const s = await client.chat.completions.create(long);
      let chunks = 0;
      for await (const _ of s) {
        if (++chunks >= 2) break;
      }
    } else {
      const ac = new AbortController();
      try {
        const s = await client.chat.completions.create(long, { signal: ac.signal });
        for await (const _ of s) ac.abort();
      } catch (e) {
        if (e instanceof OpenAI.APIUserAbortError || e.name === "AbortError") ++aborted;
        else throw e;
      }
    }
  }
  summary.abandoned = abandons;
  summary.aborted = aborted;
  // The server is still there.
  const alive = await client.chat.completions.create({ model: MODEL, messages: user("Still there?"), max_tokens: 3 });
  check(alive.choices.length === 1, "after abandoned streams: no answer");

  // A forced tool call with a nested schema; arguments validate and keep the schema's order.
  const ajv = new Ajv();
  const validContact = ajv.compile(contactSchema);
  const toolReply = await client.chat.completions.create({
    model: MODEL, messages: user("Add Ada Lovelace."), max_tokens: 300, seed: 5,
    tools: [{ type: "function", function: { name: "add_contact", strict: true, parameters: contactSchema } }],
    tool_choice: "required", parallel_tool_calls: false,
  });
  const calls = toolReply.choices[0].message.tool_calls || [];
  if (check(calls.length === 1 && toolReply.choices[0].finish_reason === "tool_calls", "tools: no tool call")) {
    const args = JSON.parse(calls[0].function.arguments);
    check(validContact(args), `tools: arguments do not validate: ${calls[0].function.arguments}`);
    check(JSON.stringify(Object.keys(args)) === JSON.stringify(["name", "age", "address", "tags"]),
          `tools: keys not in schema order: ${calls[0].function.arguments}`);
  }
  // The SDK's zod helpers: zodFunction for tools, zodResponseFormat for structured output.
  const Contact = z.object({
    name: z.string().max(16),
    age: z.number().int().min(0).max(120),
    address: z.object({ city: z.string().max(12), zip: z.string().length(5) }),
    tags: z.array(z.enum(["new", "vip", "churned"])).max(2),
  });
  const parsedTool = await client.chat.completions.parse({
    model: MODEL, messages: user("Add Grace Hopper."), max_tokens: 300, seed: 6,
    tools: [zodFunction({ name: "add_contact", parameters: Contact })],
    tool_choice: { type: "function", function: { name: "add_contact" } },
  });
  const pt = parsedTool.choices[0].message.tool_calls[0];
  check(pt && pt.function.parsed_arguments && Contact.safeParse(pt.function.parsed_arguments).success,
        "zodFunction: arguments not parsed");
  let parsedOutputs = 0;
  for (let seed = 0; seed < 3; ++seed) {
    const completion = await client.chat.completions.parse({
      model: MODEL, messages: user("Extract the contact."), max_tokens: 300, seed,
      response_format: zodResponseFormat(Contact, "contact"),
    });
    const msg = completion.choices[0].message;
    if (check(msg.parsed && Contact.safeParse(msg.parsed).success, `zodResponseFormat: seed ${seed} not parsed: ${msg.content}`)) {
      ++parsedOutputs;
    }
  }
  summary.parsed_outputs = parsedOutputs;
  const jsonMode = await client.chat.completions.create({
    model: MODEL, messages: user("JSON please."), max_tokens: 200, seed: 2, response_format: { type: "json_object" },
  });
  if (jsonMode.choices[0].finish_reason === "stop") {
    const v = JSON.parse(jsonMode.choices[0].message.content);
    check(typeof v === "object" && !Array.isArray(v), "json_object: not an object");
  }

  // Models: any name is served; the list names the loaded model.
  const list = await client.models.list();
  check(list.data.length >= 1, "models.list: empty");
  const model = await client.models.retrieve(MODEL);
  check(model.id === MODEL, "models.retrieve: wrong id");

  // 64 concurrent requests.
  const many = await Promise.all(Array.from({ length: 64 }, (_, k) =>
    client.chat.completions.create({ model: MODEL, messages: user(`Question ${k}?`), max_tokens: 3, seed: k })));
  check(new Set(many.map((r) => r.id)).size === 64, "concurrency: ids not distinct");
  summary.concurrent = many.length;

  // Legacy completions with a prompt of token ids.
  const legacy = await client.completions.create({ model: MODEL, prompt: [9707, 11, 1879], max_tokens: 3, seed: 1 });
  check(legacy.choices[0].text !== undefined, "completions: no text");

  // Penalties and logit_bias are honoured (recorded, and replayed bitwise by the test): +100
  // on token 1000 makes it every draw.
  const biased = await client.chat.completions.create({
    model: MODEL, messages: user("Repeat after me."), max_tokens: 4, seed: 4, temperature: 0.8,
    frequency_penalty: 0.5, presence_penalty: 0.25, logit_bias: { "1000": 100 },
  });
  check(biased.trace && biased.trace.token_ids.length > 0 && biased.trace.token_ids.every((t) => t === 1000),
        `logit_bias: tokens ${JSON.stringify(biased.trace && biased.trace.token_ids)}`);

  // What OpenAI refuses with a 400.
  await expectStatus(400, { model: MODEL, messages: user("x"), frequency_penalty: 2.5 }, "frequency_penalty 2.5");
  await expectStatus(400, { model: MODEL, messages: user("x"), logit_bias: { x: 1 } }, "logit_bias key x");
  await expectStatus(400, { model: MODEL, messages: user("x"), temperature: 2.5 }, "temperature 2.5");
  await expectStatus(400, { model: MODEL, messages: user("x"), top_logprobs: 2 }, "top_logprobs without logprobs");
  await expectStatus(400, { model: MODEL, messages: user("x"), n: 2 }, "n = 2");
  await expectStatus(400, {
    model: MODEL, messages: user("x"),
    response_format: { type: "json_schema", json_schema: { name: "p", strict: true, schema: { type: "string", pattern: "^a$" } } },
  }, "strict schema with pattern");
  // A schema no finite value satisfies: a 400 before any token, not a generation stuck with
  // every token masked.
  await expectStatus(400, {
    model: MODEL, messages: user("x"),
    response_format: { type: "json_schema", json_schema: { name: "loop", schema: { $ref: "#" } } },
  }, "schema with no finite value");
  // A seed keeps its sign.
  const neg = await client.chat.completions.create({ model: MODEL, messages: user("x"), max_tokens: 2, seed: -5 });
  check(neg.trace.seed === -5, `seed -5 came back as ${neg.trace.seed}`);

  summary.failures = failures.length;
  console.log("agent-summary " + JSON.stringify(summary));
  if (failures.length) {
    for (const f of failures) console.error("FAIL " + f);
    process.exit(1);
  }
}

main().catch((e) => {
  console.error("agent crashed:", e);
  process.exit(1);
});
