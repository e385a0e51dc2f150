"""The reference: each API's request -> the chat messages and tools the model's template is
given (Hugging Face's apply_chat_template format), or the raw prompt.

Written from the APIs' public documentation (OpenAI Chat Completions, Completions and
Responses; Anthropic Messages), not from trace's parsers. Where the documentation leaves a
choice open, the choice is made once, here, and said why:

- Text parts of one message (Chat `text` and an assistant's `refusal` parts, Responses
  `input_text` / `output_text` / `refusal`, Anthropic `text` blocks and system blocks) are
  one message whose text is the parts back to back, no separator: the documentation
  presents them as consecutive pieces of one content, and Qwen's own templates for list
  content (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) print text parts one after the other with
  nothing between. (vLLM and llama.cpp join with "\\n" for string-only templates; that
  would add a character nobody sent.)
- `tool_choice` none (Chat, Responses; Anthropic `{"type": "none"}`): the tools are still
  given to the template. OpenAI says "none" means the model "will not call any tool", not
  that it does not see them; Anthropic's pricing counts the same tool-use system prompt for
  `auto` and `none`; vLLM renders them unless told otherwise
  (--exclude-tools-when-tool-choice-none). Applied to every API alike.
- Tool-call arguments sent as JSON text are parsed back to objects (key order kept), as HF
  messages carry them; the template prints them with tojson.
- A tool definition becomes {"type": "function", "function": {name, description,
  parameters}} with only the keys sent, as sent (an empty description is printed; a tool
  sent without parameters has none); `strict` is a decoding option, not prompt text.
- Numbers are what Python's json makes of the request text, as transformers gets them:
  integers exact at any size, other numbers as floats printed by repr.
- Anthropic `is_error` has no textual form in the HF format: the result's text is given as
  it is.

Input is the request as parsed by json.loads (dicts keep the order sent). The output:
Expected(messages, tools, prefill) for chat-like APIs (rendered with add_generation_prompt,
then the prefill appended), Expected(raw=prompt) for Completions.
"""
import dataclasses
import json


@dataclasses.dataclass
class Expected:
    messages: list = None
    tools: list = None
    prefill: str = ""
    raw: str = None
    tokens: list = None  # Completions' prompt given as token ids: the ids the model saw


def join_text(parts):
    """Text parts of one message, back to back (see the module's note). An assistant's
    refusal part (Chat, Responses) is what it said: its text is part of the content."""
    return "".join(p["refusal"] if p["type"] == "refusal" else p["text"] for p in parts)


def text_of(content):
    """A content that is a string, null or a list of text parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return join_text(content)


def hf_tool(fields):
    """fields: a definition holding name, and description / parameters when sent."""
    fn = {"name": fields["name"]}
    fn |= {k: fields[k] for k in ("description", "parameters") if k in fields}
    return {"type": "function", "function": fn}


def hf_tool_call(call_id, name, arguments):
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def offered(tools):
    """The tools the template is given: None when the request offers none (see the
    module's note on tool_choice none)."""
    return tools or None


# --- OpenAI Chat Completions --------------------------------------------------------------
# messages[].role system | developer (the same instruction role, newer spelling) | user |
# assistant (content may be null with tool_calls) | tool (tool_call_id).

# The deprecated functions API (still served by OpenAI): `functions` are function
# definitions (tools), `function_call` the tool choice, an assistant message's
# `function_call` one call and a role "function" message (with the function's name) its
# result. HF messages know only tool calls and tool messages: a function call becomes a
# tool call, its result the tool message answering it. The format gives such a call no id;
# it gets "call_fn_<index of its message>", an id the template may print (Qwen3's does not).

CHAT_ROLES = {"system": "system", "developer": "system", "user": "user",
              "assistant": "assistant", "tool": "tool", "function": "tool"}


def chat_message(m, index, last_call_id):
    out = {"role": CHAT_ROLES[m["role"]], "content": text_of(m.get("content"))}
    if m["role"] == "function":
        out["name"] = m["name"]
    if m.get("tool_calls"):
        out["tool_calls"] = [hf_tool_call(c["id"], c["function"]["name"],
                                          c["function"]["arguments"]) for c in m["tool_calls"]]
    if m.get("function_call"):
        fc = m["function_call"]
        out["tool_calls"] = [hf_tool_call(f"call_fn_{index}", fc["name"], fc["arguments"])]
    if m["role"] == "tool":
        out["tool_call_id"] = m["tool_call_id"]
    if m["role"] == "function":
        out["tool_call_id"] = last_call_id
    return out


class Chat:
    def convert(self, req):
        definitions = [t["function"] for t in req.get("tools") or []] + (req.get("functions") or [])
        tools = [hf_tool(d) for d in definitions]
        messages, last_call_id = [], ""
        for i, m in enumerate(req["messages"]):
            messages.append(chat_message(m, i, last_call_id))
            if messages[-1].get("tool_calls"):
                last_call_id = messages[-1]["tool_calls"][0]["id"]
        return Expected(messages, offered(tools))

    def answered(self, req, response):
        pass


# --- OpenAI legacy Completions ------------------------------------------------------------
# `prompt` is the text the model continues: no template.

class Completions:
    def convert(self, req):
        prompt = req["prompt"]
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
            prompt = prompt[0]  # [[ids]]: one prompt of token ids
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            return Expected(tokens=prompt)
        return Expected(raw=prompt[0] if isinstance(prompt, list) else prompt)

    def answered(self, req, response):
        pass


# --- OpenAI Responses ---------------------------------------------------------------------
# `instructions`: a system (developer) message inserted first, not carried over to a
# response that continues this one. `input`: a string (one user message) or items:
# messages (role user | assistant | system | developer; content a string or input_text /
# output_text parts), function_call (an assistant tool call; consecutive ones and the
# assistant message just before them are one assistant turn, also when that message ends
# the previous response: the conversation is one list of items), function_call_output (the
# tool's answer), item_reference (an item of a stored response, by id), reasoning (a
# reasoning model's own state, no text of the conversation: not rendered).
# `previous_response_id`: that response's conversation (its previous conversation, its
# input items, its output items) comes first.

RESPONSES_ROLES = {"system": "system", "developer": "system", "user": "user",
                   "assistant": "assistant"}


class Responses:
    def __init__(self):
        self.items = {}  # item id -> item (input items sent with an id, output items)
        self.conversations = {}  # response id -> its items: history, input, output

    def resolve(self, req):
        """The request's conversation as items: the previous one, then the input."""
        history = list(self.conversations[req["previous_response_id"]]) \
            if req.get("previous_response_id") else []
        inp = req["input"]
        if isinstance(inp, str):
            return history + [{"type": "message", "role": "user", "content": inp}]
        return history + [self.items[i["id"]] if i.get("type") == "item_reference" else i
                          for i in inp]

    def convert(self, req):
        messages = []
        if req.get("instructions") is not None:
            messages.append({"role": "system", "content": req["instructions"]})
        messages += items_to_messages(self.resolve(req))
        tools = [hf_tool(t) for t in req.get("tools") or []]
        return Expected(messages, offered(tools))

    def answered(self, req, response):
        """Keeps what a later request may continue or point at (from the body the client
        got, the only view of the response a client has)."""
        if not req.get("store", True):
            return
        items = self.resolve(req)
        for i in req["input"] if isinstance(req["input"], list) else []:
            if i.get("type") != "item_reference" and "id" in i:
                self.items[i["id"]] = i
        for o in response["output"]:
            self.items[o["id"]] = o
        self.conversations[response["id"]] = items + response["output"]


def items_to_messages(items):
    messages = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": RESPONSES_ROLES[item["role"]],
                             "content": text_of(item["content"])})
        elif kind == "function_call":
            call = hf_tool_call(item["call_id"], item["name"], item["arguments"])
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": text_of(item["output"])})
        elif kind != "reasoning":
            raise ValueError(f"item type {kind!r} has no conversion")
    return messages


# --- Anthropic Messages -------------------------------------------------------------------
# `system`: a string or text blocks, the system prompt. messages alternate user /
# assistant; content a string or blocks. A user turn's tool_result blocks (they come
# first) are the tool messages answering the tool_use blocks of the assistant turn before,
# in the order given; its text blocks are the user's message. An assistant turn's text
# blocks are its text, its tool_use blocks its tool calls (input: the arguments object);
# thinking / redacted_thinking blocks of earlier turns are not part of the context
# (Anthropic's extended-thinking documentation: previous turns' thinking is stripped).
# A last assistant message is a prefill: the model's answer continues it (docs/recorder.md:
# "the prefill is appended to the rendered prompt").

def anthropic_user(content):
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out = [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": text_of(b.get("content"))}
           for b in content if b["type"] == "tool_result"]
    texts = [b for b in content if b["type"] == "text"]
    if texts:
        out.append({"role": "user", "content": join_text(texts)})
    return out


def anthropic_assistant(content):
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    out = {"role": "assistant", "content": join_text(b for b in content if b["type"] == "text")}
    calls = [hf_tool_call(b["id"], b["name"], b["input"])
             for b in content if b["type"] == "tool_use"]
    if calls:
        out["tool_calls"] = calls
    return out


class Anthropic:
    def convert(self, req):
        messages = []
        if req.get("system") is not None:
            messages.append({"role": "system", "content": text_of(req["system"])})
        turns = list(req["messages"])
        prefill = ""
        if turns[-1]["role"] == "assistant":
            prefill = text_of(turns.pop()["content"])
        for m in turns:
            if m["role"] == "user":
                messages += anthropic_user(m["content"])
            else:
                messages.append(anthropic_assistant(m["content"]))
        tools = [hf_tool(t | {"parameters": t["input_schema"]}) for t in req.get("tools") or []]
        return Expected(messages, offered(tools), prefill)

    def answered(self, req, response):
        pass


def make_converters():
    """api -> a fresh converter (Responses keeps state across a run's requests)."""
    return {"chat": Chat(), "completions": Completions(), "responses": Responses(),
            "anthropic": Anthropic()}
