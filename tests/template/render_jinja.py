#!/usr/bin/python3
"""Reference renderer: Python's jinja2 configured exactly as transformers'
apply_chat_template does (transformers/utils/chat_template_utils.py, _compile_jinja_template
and render_jinja_template).

Usage: render_jinja.py CASES.json OUT.json
CASES.json is a list of {"name", "template", "messages", "tools", "add_generation_prompt",
"kwargs", "bos_token", "eos_token"}; OUT.json gets one {"ok": true, "output": ...} or
{"ok": false, "error": ...} per case, in order.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' {% generation %} tag; rendering it is transparent.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides jinja's tojson: no HTML escaping, json.dumps options exposed.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, case):
    return render_compiled(env.from_string(case["template"]), case)


def render_compiled(template, case):
    # render() for a template compiled once (env.from_string takes ~35 ms per call), for
    # callers rendering thousands of cases with one template; case["template"] is unused.
    kwargs = {}
    # transformers passes the tokenizer's special_tokens_map (unset tokens are absent).
    for key in ("bos_token", "eos_token"):
        if case.get(key):
            kwargs[key] = case[key]
    kwargs.update(case.get("kwargs") or {})
    return template.render(messages=case["messages"], tools=case.get("tools"), documents=None,
                           add_generation_prompt=case.get("add_generation_prompt", False),
                           **kwargs)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_env()
    results = []
    for case in cases:
        try:
            results.append({"ok": True, "output": render(env, case)})
        except Exception as e:  # any jinja2 or Python error: the case must fail in ours too
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
