#!/usr/bin/python3
"""Checks what the model saw in a recorded run: every model call the local engine answered
is converted from its recorded request (converters.py, written from the APIs' documentation)
and rendered with Jinja2 and the model's template (reference.py), and the result must equal
the call's recorded rendered_prompt byte for byte.

The real-SDK end-to-end tests run it on the runs their agents recorded, so what the
official SDKs send (system prompts, instructions, tool results, streamed or not) is checked
by what the model was shown, not only by the request having succeeded.

Usage: check_run.py TRACE_BIN RUN_ID   (the store from $TRACE_STORE, as for trace itself)
Prints one line per call that differs (with a diff) and a summary; exit 0 when every call
is equal, 1 when one differs, 2 when the run cannot be read.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance_test  # noqa: E402
import converters  # noqa: E402
import reference  # noqa: E402

APIS = {"openai.chat_completions": "chat", "openai.completions": "completions",
        "openai.responses": "responses", "anthropic.messages": "anthropic"}


def response_object(call):
    """The response body a client got: as sent, or for a stream the response object of its
    final event (Responses' response.completed / .incomplete carry the whole response)."""
    if call.get("response_json"):
        return json.loads(call["response_json"])
    final = None
    for line in call.get("response_stream", "").split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[len("data: "):])
            if isinstance(event, dict) and isinstance(event.get("response"), dict):
                final = event["response"]
    return final


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    trace, run_id = sys.argv[1:]
    r = subprocess.run([trace, "export", run_id, "--format", "json", "--no-redact"],
                       capture_output=True)
    if r.returncode != 0:
        print(f"check_run: trace export {run_id} exited {r.returncode}: "
              f"{r.stderr.decode(errors='replace')}", file=sys.stderr)
        return 2
    events = json.loads(r.stdout)["events"]
    renderer, convs = reference.Renderer(), converters.make_converters()
    checked = differ = 0
    for e in events:
        call = e.get("llm_call")
        api = APIS.get(call.get("api")) if call else None
        if api is None or call.get("upstream") or int(call.get("http_status", 0)) != 200:
            continue
        req = json.loads(call["request_json"])
        converted = convs[api].convert(req)
        convs[api].answered(req, response_object(call))
        checked += 1
        if converted.tokens is not None:  # a prompt of token ids: the ids are what it saw
            ids = [int(i) for i in call.get("prompt_token_ids", [])]
            if ids != converted.tokens:
                differ += 1
                print(f"call seq {e['seq']} ({call['api']}): prompt ids {ids} are not the "
                      f"request's {converted.tokens}")
            continue
        expected = renderer.render(converted)
        if call["rendered_prompt"] != expected:
            differ += 1
            print(f"call seq {e['seq']} ({call['api']}): the prompt differs from the "
                  f"reference\n{conformance_test.unified(expected, call['rendered_prompt'])}")
    print(f"check_run: {checked} model calls checked, {differ} differ from the reference")
    return 1 if differ or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
