// Fuzz target for the OpenAI Responses wire format: request parsing (every rejection a
// 4xx with a message, in OpenAI's shape), the resolution of previous_response_id and
// item_reference against a response store, the chat template's view of the result, an
// answer rendered whole and streamed folding back to the same object, and the readers of
// untrusted answers (proxy mode) never crashing.
#include "recorder/api/openai_responses.h"
#include "recorder/api/template_input.h"
#include "recorder/server/response_store.h"
#include "tests/fuzz/api_fuzz_target.h"

namespace {

using namespace trace::recorder;  // NOLINT: a fuzz target

// A store holding one response ("resp_1", items "msg_1" and "fc_1"), as a run would.
ResponseStore& Store() {
  static ResponseStore* store = [] {
    auto* s = new ResponseStore();
    CompletionRequest first;
    ChatMessage user;
    user.role = "user";
    user.content = "hi";
    first.messages = {user};
    auto resolved = s->Resolve(&first);
    CompletionResult r;
    r.id = "resp_1";
    r.message_item_id = "msg_1";
    r.text = "hello";
    r.tool_calls = {{"call_1", "f", "{}", "fc_1"}};
    s->Put(std::move(std::get<ResponseStore::Resolved>(resolved)), r, "{}");
    return s;
  }();
  return *store;
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {
      R"({"model": "m", "input": "hi"})",
      R"({"model": "m", "instructions": "Be terse.", "input": [{"role": "user", "content":
          [{"type": "input_text", "text": "q"}]}, {"type": "message", "role": "assistant",
          "id": "msg_0", "content": [{"type": "output_text", "text": "a"}]}, {"type":
          "function_call", "id": "fc_0", "call_id": "c", "name": "f", "arguments": "{}"},
          {"type": "function_call_output", "call_id": "c", "output": "r"}, {"type":
          "item_reference", "id": "msg_1"}, {"type": "reasoning", "id": "rs"}],
          "tools": [{"type": "function", "name": "f", "strict": false, "parameters":
          {"type": "object", "properties": {"a": {"type": "integer"}}}}], "tool_choice":
          {"type": "function", "name": "f"}, "parallel_tool_calls": false, "text": {"format":
          {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}, "temperature":
          0.5, "top_p": 0.9, "max_output_tokens": 9, "store": false, "stream": true,
          "include": ["message.output_text.logprobs"], "top_logprobs": 2})",
      R"({"model": "m", "previous_response_id": "resp_1", "input": [{"type":
          "function_call_output", "call_id": "call_1", "output": "ok"}]})",
      "event: response.completed\ndata: {\"type\": \"response.completed\", \"response\": "
      "{\"id\": \"r\", \"status\": \"completed\", \"output\": [{\"type\": \"function_call\", "
      "\"call_id\": \"c\", \"name\": \"f\", \"arguments\": \"{}\"}], \"usage\": {\"input_tokens\": "
      "1}}}\n\n",
  };
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const WireFormat& f = OpenAiResponsesFormat();
  auto parsed = f.Parse(text);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    fuzz::CheckRejection(f, *err);
  } else {
    CompletionRequest req = std::get<CompletionRequest>(parsed);
    std::string answer = req.messages.empty() ? "" : req.messages.front().content;
    auto resolved = Store().Resolve(&req);
    if (auto* e = std::get_if<ApiError>(&resolved)) {
      if (e->http_status != 404) fuzz::Fail("a reference failed with " + e->message);
    } else {
      (void)MessagesForTemplateOrdered(req.messages)
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    fuzz::CheckAnswerRoundTrip(f, req, answer, size % 2 == 1);
  }
  fuzz::CheckReaders(f, text);
  return 0;
}
