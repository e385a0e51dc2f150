#!/usr/bin/python3
"""Conversation and snippet generator for the chat-template conformance test.

Usage: gen_cases.py QWEN3_TOKENIZER_CONFIG TEMPLATES_DIR OUT.json [SEED]

Writes a list of cases (see render_jinja.py) in four groups, named by prefix:
  qwen3/     the real Qwen3 template over generated conversations covering every branch
  llama3/    a Llama-3.1-style template (templates/llama3.jinja)
  qwen25/    a Qwen2.5-style template (templates/qwen25.jinja)
  snippet/   small templates exercising one Jinja feature each
Deterministic for a given seed (random.Random).
"""
import json
import os
import random
import sys

TEXTS = [
    "Hello!",
    "What's the weather in Paris today?",
    "Write a Python function that reverses a list.\n\n```python\ndef f(x):\n    return x[::-1]\n```",
    "안녕하세요, 오늘 날씨 어때요?",
    "你好，世界！请帮我查一下北京的天气。",
    "東京の天気を教えてください。",
    "Emoji test 👩‍💻🚀🇫🇷 and ZWJ 👨‍👩‍👧",
    "café naïve résumé Ångström",
    "مرحبا بالعالم",
    "Quotes \"double\" and 'single' and back\\slash",
    "tabs\tand\nnewlines\n\n  indented",
    "  leading and trailing spaces  ",
    "control \u0001 char and \u007f del",
    "<tool_response>\nnot really a tool response",
    "mentions </think> in the middle",
    "",
    "{\"json\": \"looking\", \"n\": 1}",
    "Line one\r\nline two",
    "\u2028line separator\u2029 and nbsp\u00a0here",
]

THOUGHTS = [
    "The user wants the weather. I should call the tool.",
    "Let me think step by step.\n1. parse\n2. answer",
    "思考一下这个问题。",
    "\nLeading newline thought\n",
    "",
]

TOOL_NAMES = ["get_weather", "search", "calculator", "read_file", "send_email"]


def rand_scalar(rng):
    return rng.choice([
        0, 1, -7, 42, 123456789012, 0.1, 1e-07, 2.5e20, 3.0, -0.0, 1e16, 1e15, 0.0001,
        12345.678, True, False, None, "Paris", "北京", "a \"quoted\" \\ value\n", "emoji 🚀",
        "", "</tool_call>",
    ])


def rand_value(rng, depth=0):
    r = rng.random()
    if depth >= 2 or r < 0.6:
        return rand_scalar(rng)
    if r < 0.8:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}_{rng.choice(['x', 'ключ', 'y'])}": rand_value(rng, depth + 1)
            for i in range(rng.randint(0, 3))}


def rand_args(rng):
    keys = ["location", "unit", "query", "limit", "options", "path", "flag", "ratio"]
    return {k: rand_value(rng) for k in rng.sample(keys, rng.randint(0, 4))}


def rand_tool(rng, name):
    props = {}
    for p in rng.sample(["location", "unit", "query", "limit", "path"], rng.randint(0, 3)):
        props[p] = {"type": rng.choice(["string", "integer", "number"]),
                    "description": rng.choice(TEXTS[:6] + ["Température en °C"])}
        if rng.random() < 0.3:
            props[p]["enum"] = ["celsius", "fahrenheit"]
    fn = {"name": name, "description": rng.choice(TEXTS[:8]),
          "parameters": {"type": "object", "properties": props,
                         "required": list(props)[:1]}}
    if rng.random() < 0.8:
        return {"type": "function", "function": fn}
    return fn


def rand_tool_call(rng):
    name = rng.choice(TOOL_NAMES)
    args = rand_args(rng)
    if rng.random() < 0.35:
        args = json.dumps(args, ensure_ascii=rng.random() < 0.5)  # arguments as a string
    style = rng.random()
    if style < 0.7:
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        if rng.random() < 0.5:
            call["id"] = f"call_{rng.randint(0, 99999)}"
        return call
    return {"name": name, "arguments": args}  # no "function" wrapper


def assistant_message(rng, final):
    msg = {"role": "assistant"}
    mode = rng.random()
    answer = rng.choice(TEXTS)
    if mode < 0.25:
        msg["content"] = answer
    elif mode < 0.45:
        msg["content"] = f"<think>\n{rng.choice(THOUGHTS)}\n</think>\n\n{answer}"
    elif mode < 0.55:
        msg["content"] = f"<think>{rng.choice(THOUGHTS)}</think>{answer}"
    elif mode < 0.6:
        msg["content"] = f"{rng.choice(THOUGHTS)}</think>\n{answer}"
    elif mode < 0.85:
        msg["content"] = answer
        msg["reasoning_content"] = rng.choice(THOUGHTS)
    else:
        msg["content"] = answer
        msg["reasoning_content"] = None
    return msg


def tool_turn(rng, calls_per_turn):
    msgs = []
    assistant = assistant_message(rng, False)
    if rng.random() < 0.4:
        assistant["content"] = ""
    assistant["tool_calls"] = [rand_tool_call(rng) for _ in range(calls_per_turn)]
    msgs.append(assistant)
    for _ in range(calls_per_turn):
        result = rng.choice(['{"temperature": 22, "unit": "celsius"}', "42", "결과: 성공 ✅",
                             "line1\nline2", ""])
        if rng.random() < 0.15:
            # Some clients send tool output as a user message wrapped in tool_response tags.
            msgs.append({"role": "user",
                         "content": f"<tool_response>\n{result}\n</tool_response>"})
        else:
            msgs.append({"role": "tool", "content": result})
    return msgs


def conversation(rng, allow_tools=True):
    msgs = []
    has_tools = allow_tools and rng.random() < 0.5
    if rng.random() < 0.55:
        msgs.append({"role": "system", "content": rng.choice(TEXTS)})
    turns = rng.randint(1, 4)
    for t in range(turns):
        if rng.random() < 0.06 and msgs:
            msgs.append({"role": "system", "content": "Mid-conversation system note."})
        msgs.append({"role": "user", "content": rng.choice(TEXTS)})
        last_turn = t == turns - 1
        for _ in range(rng.randint(0, 2) if has_tools else 0):
            msgs.extend(tool_turn(rng, rng.choice([1, 1, 2, 3])))
        if not last_turn or rng.random() < 0.5:
            msgs.append(assistant_message(rng, last_turn))
    tools = None
    if has_tools:
        tools = [rand_tool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 3))]
    return msgs, tools


def gen_qwen3(rng, template, n):
    cases = []
    for i in range(n):
        msgs, tools = conversation(rng)
        if not msgs or (msgs[0]["role"] == "system" and len(msgs) == 1):
            msgs.append({"role": "user", "content": "hi"})
        kwargs = rng.choice([{}, {"enable_thinking": True}, {"enable_thinking": False}])
        cases.append({"name": f"qwen3/{i}", "template": template, "messages": msgs,
                      "tools": tools, "add_generation_prompt": rng.random() < 0.6,
                      "kwargs": kwargs, "bos_token": "", "eos_token": "<|im_end|>"})
    # Hand-picked shapes: a conversation that starts with tool output, and a long
    # run of tool responses, and tools without a system message.
    fixed = [
        [{"role": "tool", "content": "orphan tool output"}, {"role": "user", "content": "ok"}],
        [{"role": "user", "content": "run all"},
         {"role": "assistant", "content": "", "tool_calls": [rand_tool_call(rng) for _ in range(4)]},
         {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
         {"role": "tool", "content": "c"}, {"role": "tool", "content": "d"}],
        [{"role": "user", "content": "q"},
         {"role": "assistant", "content": "<think>\nonly thought\n</think>"}],
    ]
    for j, msgs in enumerate(fixed):
        for gen in (False, True):
            cases.append({"name": f"qwen3/fixed{j}_{int(gen)}", "template": template,
                          "messages": msgs, "tools": [rand_tool(rng, "search")] if j else None,
                          "add_generation_prompt": gen, "kwargs": {"enable_thinking": gen},
                          "bos_token": "", "eos_token": "<|im_end|>"})
    return cases


def check_qwen3_coverage(cases):
    """Fails unless the Qwen3 cases reach every branch of its template."""
    def count(pred):
        return sum(1 for c in cases if pred(c))

    def msgs(c, role=None):
        return [m for m in c["messages"] if role is None or m["role"] == role]

    def calls(c):
        return [tc for m in msgs(c, "assistant") for tc in m.get("tool_calls", [])]

    def args_of(tc):
        return tc.get("function", tc)["arguments"]

    def tool_runs(c):
        roles = [m["role"] for m in c["messages"]]
        return any(a == b == "tool" for a, b in zip(roles, roles[1:]))

    features = {
        "tools": count(lambda c: c["tools"]),
        "no tools": count(lambda c: not c["tools"]),
        "system + tools": count(lambda c: c["tools"] and c["messages"][0]["role"] == "system"),
        "system, no tools": count(lambda c: not c["tools"] and c["messages"][0]["role"] == "system"),
        "no system message": count(lambda c: c["messages"][0]["role"] != "system"),
        "system not first": count(lambda c: any(m["role"] == "system" for m in c["messages"][1:])),
        "reasoning_content": count(lambda c: any(isinstance(m.get("reasoning_content"), str) for m in msgs(c, "assistant"))),
        "reasoning_content null": count(lambda c: any("reasoning_content" in m and m["reasoning_content"] is None for m in msgs(c, "assistant"))),
        "<think> in content": count(lambda c: any("</think>" in (m.get("content") or "") for m in msgs(c, "assistant"))),
        "multi-turn": count(lambda c: len(msgs(c, "user")) >= 3),
        "arguments object": count(lambda c: any(isinstance(args_of(t), dict) for t in calls(c))),
        "arguments string": count(lambda c: any(isinstance(args_of(t), str) for t in calls(c))),
        "call without function wrapper": count(lambda c: any("function" not in t for t in calls(c))),
        "several calls in one message": count(lambda c: any(len(m.get("tool_calls", [])) > 1 for m in msgs(c, "assistant"))),
        "tool responses in a row": count(tool_runs),
        "tool output as wrapped user message": count(lambda c: any(m["content"].startswith("<tool_response>") and m["content"].endswith("</tool_response>") for m in msgs(c, "user"))),
        "conversation ends with assistant": count(lambda c: c["messages"][-1]["role"] == "assistant"),
        "conversation starts with tool": count(lambda c: c["messages"][0]["role"] == "tool"),
        "add_generation_prompt": count(lambda c: c["add_generation_prompt"]),
        "no generation prompt": count(lambda c: not c["add_generation_prompt"]),
        "enable_thinking false": count(lambda c: c["kwargs"].get("enable_thinking") is False and c["add_generation_prompt"]),
        "enable_thinking true": count(lambda c: c["kwargs"].get("enable_thinking") is True),
        "enable_thinking absent": count(lambda c: "enable_thinking" not in c["kwargs"]),
        "non-ASCII text": count(lambda c: any(ord(ch) > 0x7f for m in c["messages"] for ch in (m.get("content") or ""))),
    }
    missing = [k for k, v in features.items() if v == 0]
    if missing:
        sys.exit(f"gen_cases.py: Qwen3 cases miss: {', '.join(missing)}")
    return features


def gen_llama3(rng, template, n):
    cases = []
    for i in range(n):
        msgs = []
        if rng.random() < 0.6:
            msgs.append({"role": "system", "content": rng.choice(TEXTS)})
        msgs.append({"role": "user", "content": rng.choice(TEXTS)})
        tools = None
        if rng.random() < 0.5:
            tools = [rand_tool(rng, n) for n in rng.sample(TOOL_NAMES, rng.randint(1, 2))]
            call = {"type": "function",
                    "function": {"name": rng.choice(TOOL_NAMES), "arguments": rand_args(rng)}}
            msgs.append({"role": "assistant", "tool_calls": [call]})
            msgs.append({"role": rng.choice(["tool", "ipython"]),
                         "content": rng.choice(["sunny", {"temp": 21.5}, ["a", 1]])})
        if rng.random() < 0.5:
            msgs.append({"role": "assistant", "content": rng.choice(TEXTS)})
            msgs.append({"role": "user", "content": rng.choice(TEXTS)})
        kwargs = {}
        if rng.random() < 0.3:
            kwargs["tools_in_user_message"] = False
        if rng.random() < 0.3:
            kwargs["date_string"] = "29 Nov 2026"
        if rng.random() < 0.2:
            kwargs["builtin_tools"] = ["brave_search", "wolfram_alpha", "code_interpreter"]
        cases.append({"name": f"llama3/{i}", "template": template, "messages": msgs,
                      "tools": tools, "add_generation_prompt": rng.random() < 0.5,
                      "kwargs": kwargs, "bos_token": "<|begin_of_text|>",
                      "eos_token": "<|eot_id|>"})
    # Errors both sides must raise: two tool calls at once; tools with no user message.
    two_calls = {"role": "assistant", "tool_calls": [rand_tool_call(rng), rand_tool_call(rng)]}
    cases.append({"name": "llama3/raise_two_calls", "template": template,
                  "messages": [{"role": "user", "content": "x"}, two_calls],
                  "tools": None, "add_generation_prompt": False, "kwargs": {},
                  "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
    cases.append({"name": "llama3/raise_no_user", "template": template,
                  "messages": [{"role": "system", "content": "s"}],
                  "tools": [rand_tool(rng, "search")], "add_generation_prompt": False,
                  "kwargs": {}, "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
    return cases


def gen_qwen25(rng, template, n):
    cases = []
    for i in range(n):
        msgs, tools = conversation(rng)
        for m in msgs:  # Qwen2.5 has no reasoning; keep content strings
            m.pop("reasoning_content", None)
        cases.append({"name": f"qwen25/{i}", "template": template, "messages": msgs,
                      "tools": tools, "add_generation_prompt": rng.random() < 0.5, "kwargs": {},
                      "bos_token": "", "eos_token": "<|im_end|>"})
    return cases


# (template, variables) pairs, each exercising a feature; rendered by both sides.
SNIPPETS = [
    # output, literals, whitespace control, trim_blocks/lstrip_blocks
    ("Hello {{ name }}!", {"name": "wörld"}),
    ("{{ 'a' }}{{ \"b\" }}{{ 1 }}{{ 1.5 }}{{ true }}{{ none }}{{ [1, 'x', none] }}{{ {'k': 'v'} }}", {}),
    ("{{ True }} {{ False }} {{ None }} {{ (1, 2) }} {{ (1,) }}", {}),
    ("{{ 'adjacent' 'strings' }}|{{ 'esc\\n\\t\\\\\\x41\\u00e9' }}", {}),
    ("a\n  {% if x %}\n    yes\n  {% endif %}\nb\n", {"x": True}),
    ("a  {%- if x -%}  yes  {%- endif -%}  b", {"x": True}),
    ("a\n  {%+ if x %}keep{% endif +%}\nz", {"x": True}),
    ("  {{ x }}  \n  {# comment #}\n{{- y -}}\n", {"x": 1, "y": 2}),
    ("line1\n{# a comment #}\nline2\n  {#- trimmed -#}  \nline3", {}),
    ("{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("{% for i in items %}\n  - {{ i }}\n{% endfor %}\n", {"items": [1, 2, 3]}),
    ("x\r\ny\rz\n", {}),
    # arithmetic and operators
    ("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}", {}),
    ("{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 10 / 4 }}", {}),
    ("{{ 'ab' ~ 1 ~ none ~ true }} {{ 'x' * 3 }} {{ [1] + [2] }} {{ -x }} {{ +x }}", {"x": 5}),
    ("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 }} {{ 'b' >= 'a' }} {{ [1, 2] < [1, 3] }} {{ true == 1 }}", {}),
    ("{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }} {{ 3 not in [1] }}", {"d": {"k": 1}}),
    ("{{ x and y }} {{ x or y }} {{ not x }} {{ none or 'dflt' }} {{ 0 and 1 }}", {"x": "", "y": "y"}),
    ("{{ 'yes' if x else 'no' }} [{{ 'only' if false }}] {{ 1 if x > 1 else 2 if x > 0 else 3 }}", {"x": 1}),
    # attribute, subscript, slicing
    ("{{ d.a }} {{ d['a'] }} {{ d.missing }} {{ l[0] }} {{ l[-1] }} {{ l[10] }} {{ s[1] }}", {"d": {"a": 1}, "l": [1, 2, 3], "s": "héllo"}),
    ("{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ s[::-1] }} {{ s[1:3] }} {{ l[5:] }}", {"l": [1, 2, 3, 4], "s": "añb😀c"}),
    ("{{ d['items'] }} {{ d.get('items') }} {{ d.items() | list }}", {"d": {"items": 5}}),
    ("{{ m.content is defined }} {{ m.nothing is defined }} {{ m.nothing is undefined }}", {"m": {"content": None}}),
    # undefined semantics
    ("[{{ undef }}] [{{ undef ~ 'x' }}] {{ undef | length }} {{ undef is defined }} {{ undef | default('d') }}", {}),
    ("{% for x in undef %}never{% else %}empty{% endfor %} {{ 'a' in undef }} {{ not undef }}", {}),
    ("{{ undef.attr }}", {}),
    ("{{ d.x.y }}", {"d": {}}),
    ("{{ undef + 1 }}", {}),
    ("{{ undef == undef }} {{ undef == none }} {{ undef | list }} {{ undef | string }}|", {}),
    ("{{ none.attr }}|{{ (5).attr }}|{{ 'str'.nope }}", {}),
    # for loops
    ("{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}", {"l": ["a", "b", "c"]}),
    ("{% for i in l if i % 2 %}{{ i }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("{% for k in d %}{{ k }}{% endfor %}{% for c in 'héj' %}[{{ c }}]{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("{% for i in [] %}x{% else %}else{% endfor %}{% for i in [1] %}x{% else %}else{% endfor %}", {}),
    ("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("{% for i in l %}{{ loop.previtem }}>{{ i }}>{{ loop.nextitem }} {{ loop.cycle('odd', 'even') }};{% endfor %}", {"l": [1, 2, 3]}),
    ("{% for (a, b) in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {}),
    ("{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}", {}),
    # scoping
    ("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% for i in [1, 2] %}{% set y = i %}{% endfor %}[{{ y }}]{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {}),
    ("{% set ns = namespace(n=0, items=[]) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}", {}),
    ("{% set x = 1 %}{% set x = x + 1 %}{{ x }}", {}),
    ("{% set v = 3 %}{{ v.attr }}", {}),
    ("{% set ns = 3 %}{% set ns.x = 1 %}", {}),
    # macros and call
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}", {}),
    ("{% macro m(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body {{ 1 }}{% endcall %}", {}),
    ("{% macro show(x) %}{{ x | tojson }}{% endmacro %}{% for m in ms %}{{ show(m) }}{% endfor %}", {"ms": [{"a": 1}, [1, "é"]]}),
    # filters
    ("{{ d | tojson }} {{ d | tojson(indent=2) }} {{ l | tojson }} {{ 'é\"\\n' | tojson }}", {"d": {"b": 1, "a": [1.0, None, True, "ü"]}, "l": []}),
    ("{{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }} {{ d | tojson(ensure_ascii=true) }}", {"d": {"z": "北京🚀", "a": {}}}),
    ("{{ x | tojson }}", {"x": [1e-07, 2.5e+20, 1e16, 1e15, 0.0001, -0.0, 3.0, 123456789012345678]}),
    ("{{ undef | tojson }}", {}),
    ("[{{ '  pad  ' | trim }}] [{{ 'xxhixx' | trim('x') }}] {{ 'MiXeD' | upper }} {{ 'MiXeD' | lower }} {{ 'hello world' | capitalize }} {{ 'hello wORLD-foo (bar' | title }}", {}),
    ("{{ l | length }} {{ s | length }} {{ d | length }} {{ l | count }} {{ 'a b  c' | wordcount }}", {"l": [1, 2], "s": "日本語", "d": {"a": 1}}),
    ("{{ l | join(', ') }} {{ l | join }} {{ ms | join('-', attribute='n') }} {{ l | first }} {{ l | last }} {{ 'abc' | first }}", {"l": [1, "b", 3.5], "ms": [{"n": "x"}, {"n": "y"}]}),
    ("{{ l | list }} {{ 'ab' | list }} {{ d | list }} {{ l | reverse | list }} {{ 'abc' | reverse }}", {"l": [1, 2], "d": {"k": 1}}),
    ("{{ x | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ undef | d('dd') }} {{ 0 | default(5, boolean=true) }}", {"x": "set"}),
    ("{{ 'a-b-a' | replace('a', 'x') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 3 | string }} {{ [1] | string }}", {}),
    ("{{ ms | selectattr('role', 'equalto', 'user') | list | length }} {{ ms | rejectattr('role', 'equalto', 'user') | map(attribute='c') | list }}", {"ms": [{"role": "user", "c": 1}, {"role": "x", "c": 2}, {"role": "user", "c": 3}]}),
    ("{{ ms | selectattr('flag') | map(attribute='c') | join(',') }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('even') | list }}", {"ms": [{"flag": True, "c": 1}, {"flag": False, "c": 2}]}),
    ("{{ ['a', 'B'] | map('upper') | list }} {{ ms | map(attribute='x', default='none') | list }}", {"ms": [{"x": 1}, {}]}),
    ("{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 2 | float }} {{ -3 | abs }} {{ -2.5 | abs }}", {}),
    ("{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(method='ceil') }} {{ 2.9 | round(0, 'floor') }} {{ 5 | round }}", {}),
    ("{{ ['a', 'A', 'b', 'a'] | unique | list }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ms | sort(attribute='n') | map(attribute='n') | list }}", {"ms": [{"n": 2}, {"n": 1}]}),
    ("{{ d | dictsort }} {{ d | dictsort(by='value') }} {{ d | dictsort(reverse=true) }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }}", {"d": {"b": 2, "A": 3, "c": 1}}),
    ("{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}|{{ 'x' | indent('> ', first=true) }}", {}),
    ("{{ '<b>&\"x\"</b>' | e }} {{ 'x' | safe }} {{ d | items | list }}", {"d": {"a": 1}}),
    # tests
    ("{{ x is string }} {{ x is mapping }} {{ d is mapping }} {{ l is iterable }} {{ x is iterable }} {{ 5 is iterable }} {{ l is sequence }} {{ d is sequence }}", {"x": "s", "d": {}, "l": []}),
    ("{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 'x' is number }} {{ true is boolean }} {{ 1 is boolean }} {{ 1 is integer }} {{ 1.0 is float }}", {}),
    ("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ none is none }} {{ x is none }} {{ x is not none }}", {"x": 0}),
    ("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 2 is eq 2 }} {{ 2 is ne 3 }} {{ 1 is lt 2 }} {{ 3 is gt(2) }} {{ 2 is in [1, 2] }}", {}),
    ("{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }} {{ x is sameas none }}", {"x": None}),
    # string methods
    ("{{ s.startswith('he') }} {{ s.endswith('lo') }} {{ s.startswith(('x', 'h')) }} {{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }}", {"s": "hello wORLD"}),
    ("{{ s.split() }} {{ s.split(',') }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ '  a  b '.split() }} {{ 'a\\nb\\r\\nc'.splitlines() }}", {"s": "a,b,,c"}),
    ("[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ 'xxaxx'.strip('x') }}] [{{ '\\n\\nq\\n'.rstrip('\\n') }}] [{{ '\\n\\nq'.lstrip('\\n') }}]", {"s": " \t pad \n"}),
    ("{{ 'a-b-c'.replace('-', '+') }} {{ 'abcabc'.find('c') }} {{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'aXbXc'.count('X') }}", {}),
    ("{{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ 'Hi {name}!'.format(name='Bob') }} {{ '{{literal}}'.format() }}", {}),
    ("{{ ', '.join(['a', 'b']) }} {{ 'abc'.isalpha() }} {{ '123'.isdigit() }} {{ ' '.isspace() }} {{ 'x'.zfill(3) }} {{ 'ab'.center(6, '*') }}", {}),
    ("{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {"c": "<think>\nreason\n</think>\n\nanswer"}),
    # dict methods
    ("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}", {"d": {"a": 1, "b": [2]}}),
    ("{% for k, v in d.items() | sort %}{{ k }}{{ v }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    # globals
    ("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }} {{ dict(a=1, b='x') }}", {}),
    ("{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("before{% if bad %}{{ raise_exception('bad input: ' ~ bad) }}{% endif %}", {"bad": "role"}),
    # errors both sides must report
    ("{{ 1 + 'a' }}", {}),
    ("{{ [1, 2] | length + none }}", {}),
    ("{{ 'abc'.startswith(1) }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{{ messages.append(1) }}", {}),
    # values from JSON: unicode keys and nested objects print as Python reprs
    ("{{ m }} {{ m.content }} {{ m['tool_calls'][0]['function']['arguments'] }}", {"m": {"role": "assistant", "content": "it's \"quoted\"", "tool_calls": [{"function": {"arguments": {"x": 1.5, "y": [True, None]}}}]}}),
    ("{% generation %}assistant text {{ 1 }}{% endgeneration %}", {}),
    # whitespace corners
    ("a\n\u3000 {% if true %}x{% endif %}\n  {#- c -#}  \n{%- raw -%}  {{ r }}  {%- endraw %}\nz", {}),
    ("{% for m in ms %}\n    {{- m }}  \n  {% endfor %}  \nend  ", {"ms": [1, 2]}),
    ("{% set x %}\n  line {{ 1 }}\n{% endset %}[{{ x }}]{{ '\\'' }}", {}),
    ("x {{- ' y' -}} \n\n {{ 'z' }}\n", {}),
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", {"a": 0, "b": "", "c": [1]}),
    # numbers and reprs
    ("{{ 1e100 }} {{ 1.0e-5 }} {{ 12345678901234567.0 }} {{ 0.5e1 }} {{ 1_000 }} {{ 2.5 | string | length }}", {}),
    ("{{ [\"it's\", 'say \"x\"', 'both \\' \"', '\\n\\t\\x01'] }} {{ {'a': 1,} }} {{ [1, 2,] }}", {}),
    ("{{ s | tojson }} {{ s2 | tojson }} {{ e | tojson(indent=2) }}", {"s": "\u2028 \u007f \u0000 😀 \u00e9", "s2": "\ud7ff", "e": {"a": [], "b": {}, "c": [[]]}}),
    # scoping in macros and calls
    ("{% set g = 'outer' %}{% macro m() %}{% set g = 'inner' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}", {}),
    ("{% macro m() %}[{{ caller(5) }}]{% endmacro %}{% call(x) m() %}got {{ x }}{% endcall %}", {}),
    ("{% for m in ms if m.role != 'system' %}{{ loop.index }}{{ m.role }}{{ loop.depth }}{% endfor %}", {"ms": [{"role": "system"}, {"role": "user"}, {"role": "assistant"}]}),
    ("{{ ms | length > 0 and ms[0].role }} {% if not x is defined %}nd{% endif %} {{ x is not defined }}", {"ms": [{"role": "u"}]}),
    ("{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}", {}),
]


def gen_snippets():
    cases = []
    for i, (template, variables) in enumerate(SNIPPETS):
        cases.append({"name": f"snippet/{i}", "template": template, "messages": [],
                      "tools": None, "add_generation_prompt": False, "kwargs": variables,
                      "bos_token": "", "eos_token": ""})
    return cases


def main():
    config_path, templates_dir, out_path = sys.argv[1:4]
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 20261129
    rng = random.Random(seed)
    with open(config_path, encoding="utf-8") as f:
        qwen3 = json.load(f)["chat_template"]
    with open(os.path.join(templates_dir, "llama3.jinja"), encoding="utf-8") as f:
        llama3 = f.read()
    with open(os.path.join(templates_dir, "qwen25.jinja"), encoding="utf-8") as f:
        qwen25 = f.read()
    qwen3_cases = gen_qwen3(rng, qwen3, 260)
    for name, n in check_qwen3_coverage(qwen3_cases).items():
        print(f"qwen3 cases with {name}: {n}", file=sys.stderr)
    cases = (qwen3_cases + gen_llama3(rng, llama3, 60) +
             gen_qwen25(rng, qwen25, 60) + gen_snippets())
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
