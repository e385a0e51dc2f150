"""trace_client: tell the trace recorder what the model API cannot see.

One file, Python standard library only. Under `trace record` the environment carries
TRACE_ENDPOINT and OPENAI_API_KEY and every call below becomes one event of the run:

    import trace_client as tc
    tc.tool_result(call_id, result_text, name="lookup_customer")
    tc.context(chunk_text, source="policies/refunds.md", chunk_id="refunds#2")
    tc.template_var("customer_name", "Ada")
    now = tc.clock()            # the recorder's wall clock, recorded as a ClockRead
    tc.note("escalating to a human")
    out = tc.tool("delete_customer", {"customer_id": 4}, lambda: db.delete(4))

`tool(name, args, fn)` runs fn() and records its result; under `trace rerun` it returns the
recorded result instead, without calling fn (a tool with side effects is not run again),
until the re-run leaves the recording. fn returns the result (text, or anything
json.dumps takes); it raises ToolError(content) for a result that is an error.

Outside `trace record` (no TRACE_ENDPOINT) the calls do nothing and clock() reads the
local clock, so an agent runs unchanged with or without the recorder.

Errors: a rejected event raises TraceError with the server's one-line message; a
recorder that cannot be reached raises TraceError naming the endpoint.
"""

import datetime
import json
import os
import time
import urllib.error
import urllib.request

__all__ = ["TraceClient", "TraceError", "ToolError", "default_client", "tool", "tool_call",
           "tool_result", "context", "template_var", "note", "clock", "flush"]


class TraceError(RuntimeError):
    """An event the recorder rejected, or a recorder that could not be reached."""


class ToolError(Exception):
    """A tool result that is an error: raised by a tool function for `tool()` to record
    (is_error) and raise again, and by `tool()` when the recorded result was an error."""

    def __init__(self, content):
        super().__init__(content)
        self.content = content


class TraceClient:
    """Posts events to one recorder. Thread-safe: each call is one HTTP request."""

    def __init__(self, endpoint=None, api_key=None, timeout=30.0):
        self.endpoint = (endpoint if endpoint is not None
                         else os.environ.get("TRACE_ENDPOINT", "")).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout = timeout

    @property
    def enabled(self):
        return bool(self.endpoint)

    def _request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.endpoint + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", "Bearer " + self.api_key)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read().decode("utf-8"))["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = "HTTP %d" % e.code
            raise TraceError("trace recorder rejected %s %s: %s" % (method, path, message))
        except (urllib.error.URLError, OSError) as e:
            raise TraceError("trace recorder at %s unreachable: %s" % (self.endpoint, e))

    def _event(self, event):
        if not self.enabled:
            return 0
        return self._request("POST", "/trace/v1/events", event)["seqs"][0]

    def tool(self, name, arguments, fn, call_id=None):
        """Runs the tool `name` as fn() and records its result, or, under `trace rerun`
        while the run follows its recording, returns the recorded result without calling
        fn. `call_id`: the model's tool-call id when the model asked for it (its call is
        recorded already); else one is made and the call is recorded as the agent's."""
        arguments = arguments if arguments is not None else {}
        if self.enabled:
            reply = self._request("POST", "/trace/v1/tool",
                                  {"name": name, "arguments": arguments, "call_id": call_id})
            if reply.get("recorded"):
                if reply.get("is_error"):
                    raise ToolError(reply["content"])
                return reply["content"]
            if call_id is None:
                call_id = "agent_%s_%d" % (name, time.monotonic_ns())
                self.tool_call(name, arguments, call_id=call_id)
        started = time.monotonic()
        is_error = False
        try:
            result = fn()
        except ToolError as e:
            result, is_error = e.content, True
        except Exception as e:  # recorded as the tool's error, then raised again
            self.tool_result(call_id, "%s: %s" % (type(e).__name__, e), name=name,
                             is_error=True, duration_ms=(time.monotonic() - started) * 1e3)
            raise
        content = result if isinstance(result, str) else json.dumps(result)
        self.tool_result(call_id, content, name=name, is_error=is_error,
                         duration_ms=(time.monotonic() - started) * 1e3)
        if is_error:
            raise ToolError(content)
        return content

    def tool_call(self, name, arguments=None, call_id=None):
        """A tool call the agent made on its own (model-issued calls are recorded already)."""
        return self._event({"type": "tool_call", "name": name, "call_id": call_id,
                            "arguments": arguments if arguments is not None else {}})

    def tool_result(self, call_id, content, name=None, is_error=False, duration_ms=None):
        """A tool's raw result. Recorded once per call_id (a later `role: tool` message
        with the same id is not recorded again). Returns the event's seq (0: duplicate)."""
        return self._event({"type": "tool_result", "call_id": call_id, "name": name,
                            "content": content, "is_error": bool(is_error),
                            "duration_ms": duration_ms})

    def context(self, content, source=None, chunk_id=None, score=None, query=None):
        """A retrieved chunk the agent put into a prompt."""
        return self._event({"type": "context", "content": content, "source": source,
                            "chunk_id": chunk_id, "score": score, "query": query})

    def template_var(self, name, value, template=None):
        """A variable interpolated into a prompt template."""
        return self._event({"type": "template_var", "name": name, "value": value,
                            "template": template})

    def note(self, text, topic="agent", data=None):
        """Anything else worth keeping with the run."""
        return self._event({"type": "note", "text": text, "topic": topic, "data": data})

    def clock(self, clock="wall"):
        """Reads the recorder's clock (recorded) and returns it as a timezone-aware
        datetime (wall) or integer nanoseconds (monotonic)."""
        if not self.enabled:
            if clock == "monotonic":
                return time.monotonic_ns()
            return datetime.datetime.now(datetime.timezone.utc)
        reply = self._request("GET", "/trace/v1/clock?clock=" + clock)
        if clock == "monotonic":
            return reply["monotonic_ns"]
        return datetime.datetime.fromtimestamp(reply["wall_ns"] / 1e9, datetime.timezone.utc)

    def flush(self):
        """Waits until every event recorded so far is durable; returns the durable seq."""
        if not self.enabled:
            return 0
        return self._request("POST", "/trace/v1/flush", {})["durable_seq"]


_default = None


def default_client():
    """The client configured from the environment (created on first use)."""
    global _default
    if _default is None:
        _default = TraceClient()
    return _default


def tool(*args, **kwargs):
    return default_client().tool(*args, **kwargs)


def tool_call(*args, **kwargs):
    return default_client().tool_call(*args, **kwargs)


def tool_result(*args, **kwargs):
    return default_client().tool_result(*args, **kwargs)


def context(*args, **kwargs):
    return default_client().context(*args, **kwargs)


def template_var(*args, **kwargs):
    return default_client().template_var(*args, **kwargs)


def note(*args, **kwargs):
    return default_client().note(*args, **kwargs)


def clock(*args, **kwargs):
    return default_client().clock(*args, **kwargs)


def flush():
    return default_client().flush()
