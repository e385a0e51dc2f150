"""Names the cause of a mismatch: known ways trace has been seen to differ from the
reference, each written as a change to the converted messages and tools (history from
earlier responses included). When the reference rendering with the change applied equals
trace's prompt, that change explains the mismatch.

This only labels failures, so a report groups them by cause; the case still fails. An
entry whose deviation trace no longer shows explains nothing and can go; a mismatch no
entry explains is reported by where the prompts first differ.
"""
import itertools


def system_lost(api, req, expected):
    """The system message (Anthropic `system`, Responses `instructions`) replaced by an
    element the template skips: what inserting nlohmann's initializer-list pair did (issue
    40), which also stops a later system/developer message from being the first."""
    if req.get("system" if api == "anthropic" else "instructions") is not None:
        expected.messages[0] = {"role": "", "content": ""}


def tool_functions(expected):
    return [t["function"] for t in expected.tools or []]


def drop_empty_description(api, req, expected):
    for fn in tool_functions(expected):
        if fn.get("description") == "":
            del fn["description"]


def empty_parameters(api, req, expected):
    for fn in tool_functions(expected):
        fn.setdefault("parameters", {})


def big_ints_as_doubles(api, req, expected):
    """Integers outside int64 (in schemas and tool-call arguments) as the nearest double."""
    def walk(v):
        if isinstance(v, int) and not isinstance(v, bool) and not -2**63 <= v < 2**63:
            return float(v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    expected.messages = walk(expected.messages)
    expected.tools = walk(expected.tools)


# name -> a change to the Expected (converters.py) of a request, in place.
DEVIATIONS = {
    "Anthropic system / Responses instructions never reach the prompt": system_lost,
    "a tool's empty description (\"\") is not rendered": drop_empty_description,
    "a tool sent without parameters is rendered with \"parameters\": {}": empty_parameters,
    "integers outside int64 are printed as doubles": big_ints_as_doubles,
}


def explain(api, req, got, convert, render, max_combined=3):
    """The smallest set of DEVIATIONS (at most max_combined) under which the reference
    equals got, as a label; None when none does."""
    for n in range(1, max_combined + 1):
        for names in itertools.combinations(DEVIATIONS, n):
            try:
                expected = convert(req)
                if expected.raw is not None:
                    return None
                for name in names:
                    DEVIATIONS[name](api, req, expected)
                if render(expected) == got:
                    return " + ".join(names)
            except Exception:  # a change the converter cannot take explains nothing
                continue
    return None
