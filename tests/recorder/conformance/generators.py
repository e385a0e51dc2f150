"""Random valid requests, one generator per API.

A generator returns a Case: the route, the body as the exact text to send, extra headers and
tags (what the case exercises, used only to describe groups of mismatches; the converters
never see them). Requests are valid as each API's documentation defines validity (e.g.
Anthropic's roles alternate and its text blocks are not blank; every OpenAI function call
in a Responses input is answered), so every one must be answered 200.

Generation is cheap and shape-driven; what the model should see is decided elsewhere
(converters.py) from the request text alone.
"""
import dataclasses

import randgen as R

MODEL = "conformance-model"


@dataclasses.dataclass
class Case:
    api: str
    route: str
    body: str
    headers: dict
    tags: list


def finish(api, route, body, tags, rng, headers=None):
    """The body as text, top-level keys in a random order (order must not matter there)."""
    return Case(api, route, R.dumps(R.shuffled(rng, body), ensure_ascii=rng.random() < 0.2),
                headers or {}, sorted(set(tags)))


def content_or_parts(rng, text, part_type, tags, refusals=False):
    """text as a plain string or as typed parts whose concatenation is text; refusals: an
    assistant's parts may be refusal parts (what the model said when it refused)."""
    if rng.random() < 0.65:
        return text
    tags.append("parts")
    parts = []
    for p in R.split_parts(rng, text, rng.randint(1, 3)):
        if refusals and rng.random() < 0.05:
            tags.append("refusal_part")
            parts.append({"type": "refusal", "refusal": p})
        else:
            parts.append({"type": part_type, "text": p})
    return parts


def call_id(rng, prefix):
    return f"{prefix}{rng.getrandbits(48):012x}"


# --- OpenAI Chat Completions --------------------------------------------------------------

def chat_tool(rng, name, desc, params, strict):
    fn = {"name": name}
    if desc is not None:
        fn["description"] = desc
    if params is not None:
        fn["parameters"] = params
    if strict is not None:
        fn["strict"] = strict
    return {"type": "function", "function": R.shuffled(rng, fn)}


def chat_tool_exchange(rng, tools, tags):
    """An assistant turn calling 1-3 tools, then one tool message per call."""
    tags.append("tool_calls")
    calls = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        name, _, params, _ = rng.choice(tools)
        args = R.json_text(rng, R.arguments_for(rng, params))
        calls.append({"id": call_id(rng, "call_"), "type": "function",
                      "function": R.shuffled(rng, {"name": name, "arguments": args})})
    assistant = {"role": "assistant", "tool_calls": calls}
    r = rng.random()
    if r < 0.4:
        assistant["content"] = None
    elif r < 0.55:
        assistant["content"] = ""
    elif r < 0.9:
        assistant["content"] = content_or_parts(rng, R.text(rng), "text", tags, refusals=True)
    out = [R.shuffled(rng, assistant)]
    answered = list(calls)
    if len(answered) > 1 and rng.random() < 0.3:
        rng.shuffle(answered)
        tags.append("tool_results_reordered")
    for c in answered:
        out.append({"role": "tool", "tool_call_id": c["id"],
                    "content": content_or_parts(rng, R.text(rng), "text", tags)})
    return out


def chat_function_exchange(rng, tools, tags):
    """The deprecated functions API's turn: an assistant function_call, then the function
    message (role "function", the function's name) with its result."""
    tags.append("legacy_function_call")
    name, _, params, _ = rng.choice(tools)
    call = R.shuffled(rng, {"name": name, "arguments": R.json_text(rng, R.arguments_for(rng, params))})
    assistant = {"role": "assistant", "content": rng.choice([None, ""]), "function_call": call}
    result = {"role": "function", "name": name, "content": R.text(rng)}
    return [R.shuffled(rng, assistant), result]


def chat_assistant_answer(rng, tags):
    t = R.text(rng)
    if rng.random() < 0.2:
        tags.append("think_in_history")
        t = f"<think>\n{R.text(rng)}\n</think>\n\n{t}"
    return {"role": "assistant", "content": content_or_parts(rng, t, "text", tags, refusals=True)}


def chat_system(rng, tags):
    role = rng.choice(["system", "developer"])
    tags.append(role)
    return {"role": role, "content": content_or_parts(rng, R.text(rng), "text", tags)}


def chat(rng, state):
    tags = []
    tools = R.tool_defs(rng) if rng.random() < 0.5 else []
    # The deprecated spelling of tools: `functions`, `function_call`, role "function".
    legacy = bool(tools) and rng.random() < 0.2
    exchange = chat_function_exchange if legacy else chat_tool_exchange
    messages = [chat_system(rng, tags) for _ in range(rng.choice([0, 0, 1, 1, 1, 2]))]
    turns = rng.randint(1, 4)
    for turn in range(turns):
        if messages and rng.random() < 0.08:
            tags.append("system_mid_conversation")
            messages.append(chat_system(rng, tags))
        user = {"role": "user", "content": content_or_parts(rng, R.text(rng), "text", tags)}
        if rng.random() < 0.1:
            user["name"] = rng.choice(["alice", "bob_2"])
        messages.append(user)
        if tools and rng.random() < 0.6:
            messages += exchange(rng, tools, tags)
        if turn < turns - 1 or rng.random() < 0.04:
            messages.append(chat_assistant_answer(rng, tags))
    if messages[-1]["role"] == "assistant":
        tags.append("ends_with_assistant")
    body = {"model": MODEL, "messages": messages, "temperature": 0,
            rng.choice(["max_tokens", "max_completion_tokens"]): 1}
    if legacy:
        tags.append("legacy_functions")
        body["functions"] = [chat_tool(rng, *t)["function"] for t in tools]
        choice = rng.choice([None, "none", "auto", "named"])
        if choice == "named":
            body["function_call"] = {"name": rng.choice(tools)[0]}
        elif choice:
            body["function_call"] = choice
        tags.append(f"function_call={choice}")
    elif tools:
        tags.append("tools")
        body["tools"] = [chat_tool(rng, *t) for t in tools]
        choice = rng.choice([None, "none", "auto", "required", "named"])
        if choice == "named":
            body["tool_choice"] = {"type": "function", "function": {"name": rng.choice(tools)[0]}}
        elif choice:
            body["tool_choice"] = choice
        tags.append(f"tool_choice={choice}")
        if rng.random() < 0.2:
            body["parallel_tool_calls"] = rng.random() < 0.5
    return finish("chat", "/v1/chat/completions", body, tags, rng)


# --- OpenAI legacy Completions ------------------------------------------------------------

def completions(rng, state):
    tags = []
    prompt = "".join(R.visible_text(rng) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.2:
        tags.append("chat_markup_prompt")
        prompt = f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 1, "temperature": 0}
    if rng.random() < 0.2:
        tags.append("prompt_array")
        body["prompt"] = [prompt]
    return finish("completions", "/v1/completions", body, tags, rng)


# --- OpenAI Responses ---------------------------------------------------------------------

class ResponsesState:
    """What one worker's Responses generator may point back to: its most recent stored
    responses whose output is plain messages (a function call cut by max_output_tokens 1 is
    not history a client would send on), the items each holds, each one's conversation
    item ids and how many responses its chain holds (kept short, so prompts stay small)."""

    RECENT = 40
    MAX_CHAIN = 4

    def __init__(self, worker):
        self.worker = worker
        self.counter = 0
        # {"id", "items": [(item id, kind, call_id)], "conv": set of item ids, "chain": n}
        self.stored = []
        self.pending = {}  # body of a request sent -> its entry, until answered

    def new_id(self, prefix):
        self.counter += 1
        return f"{prefix}w{self.worker}_{self.counter}"

    def answered(self, case, status, response):
        """Called with each Responses reply, in order, so later requests can point back."""
        entry = self.pending.pop(case.body, None)
        if entry is None or status != 200:
            return
        output = response.get("output") or []
        if not response.get("store", True) or any(i.get("type") != "message" for i in output):
            return
        entry["id"] = response["id"]
        entry["items"] += [(i["id"], "message", None) for i in output]
        entry["conv"] |= {i["id"] for i in output}
        self.stored = self.stored[1 - self.RECENT:] + [entry]

    def continuable(self):
        return [e for e in self.stored if e["chain"] < self.MAX_CHAIN]


def responses_message(rng, role, text, state, tags):
    part = "output_text" if role == "assistant" else "input_text"
    content = content_or_parts(rng, text, part, tags, refusals=role == "assistant")
    if isinstance(content, list) and part == "output_text" and rng.random() < 0.5:
        for p in content:
            p["annotations"] = []
    item = {"role": role, "content": content}
    if rng.random() < 0.5:
        item["type"] = "message"
        if rng.random() < 0.5:
            item["id"] = state.new_id("msg_")
            tags.append("input_item_id")
        if role == "assistant" and rng.random() < 0.5:
            item["status"] = "completed"
    return R.shuffled(rng, item)


def reasoning_items(rng, state, tags):
    """Sometimes a reasoning item, as a reasoning model's earlier output carries them."""
    if rng.random() > 0.1:
        return []
    tags.append("reasoning_item")
    return [{"type": "reasoning", "id": state.new_id("rs_"),
             "summary": [{"type": "summary_text", "text": R.text(rng)}]}]


def responses_function_exchange(rng, tools, state, tags):
    """Optional assistant text, 1-2 function_call items, then their outputs."""
    tags.append("function_call")
    items = reasoning_items(rng, state, tags)
    if rng.random() < 0.4:
        tags.append("assistant_text_before_call")
        items.append(responses_message(rng, "assistant", R.text(rng), state, tags))
    calls = []
    for _ in range(rng.choice([1, 1, 2])):
        name, _, params, _ = rng.choice(tools)
        call = {"type": "function_call", "call_id": call_id(rng, "call_"), "name": name,
                "arguments": R.json_text(rng, R.arguments_for(rng, params))}
        if rng.random() < 0.4:
            call["id"] = state.new_id("fc_")
        if rng.random() < 0.3:
            call["status"] = "completed"
        calls.append(R.shuffled(rng, call))
    items += calls
    for c in calls:
        out = {"type": "function_call_output", "call_id": c["call_id"], "output": R.text(rng)}
        if rng.random() < 0.1:
            tags.append("function_output_parts")
            out["output"] = [{"type": "input_text", "text": p}
                             for p in R.split_parts(rng, out["output"], 2)]
        items.append(R.shuffled(rng, out))
    return items


def item_references(rng, state, exclude, tags):
    """0-1 references to an item of an earlier stored response (not already in this
    conversation); a referenced function call is followed by its output."""
    pool = [it for e in state.stored for it in e["items"] if it[0] not in exclude]
    if not pool or rng.random() < 0.7:
        return []
    item_id, kind, cid = rng.choice(pool)
    exclude.add(item_id)
    tags.append(f"item_reference_{kind}")
    out = [{"type": "item_reference", "id": item_id}]
    if kind == "function_call":
        out.append({"type": "function_call_output", "call_id": cid, "output": R.text(rng)})
    return out


def responses_tool(rng, name, desc, params, strict):
    # OpenAI's default for Responses is strict: true, which needs a strict-mode schema.
    if strict is None or strict:
        params = R.object_schema(rng, True)
    t = {"type": "function", "name": name, "parameters": params or R.object_schema(rng, True)}
    if desc is not None:
        t["description"] = desc
    if strict is not None:
        t["strict"] = strict
    return R.shuffled(rng, t)


def responses(rng, state):
    tags = []
    body = {"model": MODEL, "max_output_tokens": 1, "temperature": 0}
    tools = R.tool_defs(rng) if rng.random() < 0.45 else []
    conv, chain = set(), 1
    if state.continuable() and rng.random() < 0.35:
        prev = rng.choice(state.continuable())
        body["previous_response_id"] = prev["id"]
        conv, chain = set(prev["conv"]), prev["chain"] + 1
        tags.append("previous_response_id")
        if chain > 2:
            tags.append("previous_response_chain_3+")
    if rng.random() < 0.5:
        body["instructions"] = R.text(rng, empty_ok=False)
        tags.append("instructions")
    entry = {"items": [], "conv": conv, "chain": chain}
    if rng.random() < 0.15:
        tags.append("input_string")
        body["input"] = R.text(rng)
    else:
        items = []
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            role = rng.choice(["system", "developer"])
            tags.append(f"input_{role}")
            items.append(responses_message(rng, role, R.text(rng), state, tags))
        turns = rng.randint(1, 3)
        for turn in range(turns):
            items += item_references(rng, state, conv, tags)
            items.append(responses_message(rng, "user", R.text(rng), state, tags))
            if tools and rng.random() < 0.5:
                items += responses_function_exchange(rng, tools, state, tags)
            if turn < turns - 1:
                items += reasoning_items(rng, state, tags)
                items.append(responses_message(rng, "assistant", R.text(rng), state, tags))
        body["input"] = items
        for it in items:
            if "id" in it and it.get("type") in ("message", "function_call"):
                entry["items"].append((it["id"], it["type"], it.get("call_id")))
                entry["conv"].add(it["id"])
    forced = False
    if tools:
        tags.append("tools")
        body["tools"] = [responses_tool(rng, *t) for t in tools]
        choice = rng.choice([None, "none", "auto", "required", "named"])
        if choice == "named":
            body["tool_choice"] = {"type": "function", "name": rng.choice(tools)[0]}
        elif choice:
            body["tool_choice"] = choice
        forced = choice in ("required", "named")
        tags.append(f"tool_choice={choice}")
    if rng.random() < 0.1:
        body["store"] = False
        tags.append("store_false")
    case = finish("responses", "/v1/responses", body, tags, rng)
    if body.get("store", True) and not forced:
        state.pending[case.body] = entry
    return case


# --- Anthropic Messages -------------------------------------------------------------------

def anthropic_text_content(rng, tags, last=None):
    """A string, or 1-3 text blocks (Anthropic refuses empty or blank ones); last, when
    given, is the string or the last block's text."""
    if rng.random() < 0.6:
        return last if last is not None else R.visible_text(rng)
    tags.append("blocks")
    blocks = []
    for _ in range(rng.randint(1, 3)):
        b = {"type": "text", "text": R.visible_text(rng)}
        if rng.random() < 0.1:
            b["cache_control"] = {"type": "ephemeral"}
        blocks.append(R.shuffled(rng, b))
    if last is not None:
        blocks[-1] = {"type": "text", "text": last}
    return blocks


def anthropic_tool_results(rng, pending, tags):
    tags.append("tool_result")
    order = list(pending)
    if len(order) > 1 and rng.random() < 0.3:
        rng.shuffle(order)
    out = []
    for tid in order:
        b = {"type": "tool_result", "tool_use_id": tid}
        r = rng.random()
        if r < 0.55:
            b["content"] = R.text(rng)
        elif r < 0.85:
            tags.append("tool_result_blocks")
            b["content"] = [{"type": "text", "text": R.visible_text(rng)}
                            for _ in range(rng.randint(1, 2))]
        else:
            tags.append("tool_result_no_content")
        if rng.random() < 0.2:
            b["is_error"] = rng.random() < 0.7
            tags.append("is_error")
        out.append(R.shuffled(rng, b))
    return out


def thinking_blocks(rng, tags):
    """Sometimes the thinking block a turn with extended thinking starts with."""
    if rng.random() > 0.1:
        return []
    tags.append("thinking_block")
    if rng.random() < 0.3:
        return [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}]
    return [{"type": "thinking", "thinking": R.text(rng), "signature": "EqQBCgIYAhIM1gbcDa9"}]


def anthropic_assistant(rng, tools, tags):
    """An assistant turn: text, and when tools are offered maybe tool_use blocks; returns
    (message, ids of the tool_use blocks)."""
    if not tools or rng.random() < 0.5:
        content = anthropic_text_content(rng, tags)
        if isinstance(content, list):
            content = thinking_blocks(rng, tags) + content
        return {"role": "assistant", "content": content}, []
    tags.append("tool_use")
    blocks = thinking_blocks(rng, tags)
    if rng.random() < 0.5:
        blocks.append({"type": "text", "text": R.visible_text(rng)})
    ids = []
    for _ in range(rng.choice([1, 1, 2])):
        name, _, params, _ = rng.choice(tools)
        ids.append(call_id(rng, "toolu_"))
        blocks.append(R.shuffled(rng, {"type": "tool_use", "id": ids[-1], "name": name,
                                       "input": R.arguments_for(rng, params)}))
    return {"role": "assistant", "content": blocks}, ids


def anthropic_system(rng, tags):
    if rng.random() < 0.5:
        tags.append("system_string")
        return R.visible_text(rng)
    tags.append("system_blocks")
    return [R.shuffled(rng, {"type": "text", "text": R.visible_text(rng)})
            for _ in range(rng.randint(1, 3))]


def anthropic_tool(rng, name, desc, params, strict):
    t = {"name": name, "input_schema": params or {"type": "object", "properties": {}}}
    if desc is not None:
        t["description"] = desc
    return R.shuffled(rng, t)


def anthropic(rng, state):
    tags = []
    body = {"model": MODEL, "max_tokens": 1, "temperature": 0}
    if rng.random() < 0.7:
        body["system"] = anthropic_system(rng, tags)
    tools = R.tool_defs(rng, strict_ok=False) if rng.random() < 0.5 else []
    choice = None
    if tools:
        tags.append("tools")
        body["tools"] = [anthropic_tool(rng, *t) for t in tools]
        choice = rng.choice([None, "auto", "any", "tool", "none"])
        if choice:
            body["tool_choice"] = {"type": choice}
            if choice == "tool":
                body["tool_choice"]["name"] = rng.choice(tools)[0]
        tags.append(f"tool_choice={choice}")
    messages, pending = [], []
    turns = rng.randint(1, 4)
    for turn in range(turns):
        if pending:
            content = anthropic_tool_results(rng, pending, tags)
            if rng.random() < 0.3:
                tags.append("text_after_tool_result")
                content += [{"type": "text", "text": R.visible_text(rng)}]
        else:
            content = anthropic_text_content(rng, tags)
        messages.append({"role": "user", "content": content})
        pending = []
        if turn < turns - 1:
            assistant, pending = anthropic_assistant(rng, tools, tags)
            messages.append(assistant)
    # Anthropic's prefill: the last message is the assistant's, continued by the model.
    if choice not in ("any", "tool") and rng.random() < 0.25:
        tags.append("prefill")
        if rng.random() < 0.05:
            tags.append("prefill_empty")
            prefill = ""
        else:
            prefill = anthropic_text_content(rng, tags, last=R.prefill_text(rng))
        messages.append({"role": "assistant", "content": prefill})
    body["messages"] = messages
    return finish("anthropic", "/v1/messages", body, tags, rng,
                  {"anthropic-version": rng.choice(["2023-06-01", "2026-10-21"])})


GENERATORS = {"chat": chat, "completions": completions, "responses": responses,
              "anthropic": anthropic}
