"""A two-call agent for trace ui's browser test (ui_e2e_test.js): asks the model about a
kettle, looks the stock up through trace_client.tool (the result is argv[1], so two runs
can differ in exactly one tool result), then asks again with the result in the
conversation. Python standard library only; run it under `trace record`."""
import json
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "recorder", "clients", "python"))
import trace_client  # noqa: E402


def post(path, body):
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"].rstrip("/") + path,
                                 data=json.dumps(body).encode("utf-8"), method="POST")
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + os.environ.get("OPENAI_API_KEY", "none"))
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read().decode("utf-8"))


def main():
    stock = sys.argv[1]
    shop = "Ada's 茶器店"  # CJK text: the page must show it
    trace_client.template_var("shop", shop, template="system")
    messages = [{"role": "system", "content": "You answer for " + shop + ". Be brief."},
                {"role": "user", "content": "Is the blue kettle in stock?"}]
    first = post("/chat/completions", {"model": "any", "messages": messages, "max_tokens": 8})
    messages.append({"role": "assistant", "content": first["choices"][0]["message"]["content"]})
    result = trace_client.tool("check_stock", {"item": "blue kettle"}, lambda: stock,
                               call_id="stock-1")
    messages.append({"role": "user", "content": "The stock system says: " + result})
    second = post("/chat/completions", {"model": "any", "messages": messages, "max_tokens": 8})
    print("answer:", second["choices"][0]["message"]["content"])


if __name__ == "__main__":
    main()
