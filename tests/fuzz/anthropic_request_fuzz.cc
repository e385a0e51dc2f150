// Fuzz target for the Anthropic Messages wire format: request parsing (every rejection a
// 4xx with a message, in Anthropic's error shape), the chat template's view of the result,
// an answer rendered whole and streamed folding back to the same object, the conversion of
// OpenAI-shaped errors, and the readers of untrusted answers (proxy mode) never crashing.
#include "recorder/api/anthropic_messages.h"
#include "recorder/api/template_input.h"
#include "tests/fuzz/api_fuzz_target.h"

std::vector<std::string> TraceFuzzSeeds() {
  return {
      R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})",
      R"({"model": "m", "max_tokens": 50, "system": [{"type": "text", "text": "s"}],
          "messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]},
          {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type":
          "text", "text": "a"}, {"type": "tool_use", "id": "toolu_1", "name": "f", "input":
          {"b": 2, "a": 1}}]}, {"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "r"}], "is_error":
          true}, {"type": "text", "text": "more"}]}, {"role": "assistant", "content": "It"}],
          "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object",
          "properties": {"a": {"type": "integer"}}}}], "tool_choice": {"type": "tool", "name":
          "f", "disable_parallel_tool_use": true}, "temperature": 0.3, "top_p": 0.8, "top_k":
          4, "stop_sequences": ["END"], "stream": true, "output_config": {"format": {"type":
          "json_schema", "schema": {"type": "object"}}}})",
      "event: message_start\ndata: {\"type\": \"message_start\", \"message\": {\"id\": \"m\", "
      "\"content\": [], \"usage\": {\"input_tokens\": 3}}}\n\nevent: content_block_start\ndata: "
      "{\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": "
      "\"tool_use\", \"id\": \"t\", \"name\": \"f\", \"input\": {}}}\n\nevent: "
      "content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": "
      "{\"type\": \"input_json_delta\", \"partial_json\": \"{\\\"a\\\": 1}\"}}\n\n",
      R"({"error": {"message": "bad", "type": "invalid_request_error"}})",
  };
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trace::recorder;  // NOLINT: a fuzz target
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const WireFormat& f = AnthropicMessagesFormat();
  auto parsed = f.Parse(text);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    fuzz::CheckRejection(f, *err);
  } else {
    const CompletionRequest& req = std::get<CompletionRequest>(parsed);
    (void)MessagesForTemplateOrdered(req.messages)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (req.messages.empty()) fuzz::Fail("accepted a request with no messages");
    fuzz::CheckAnswerRoundTrip(f, req, req.messages.front().content, size % 2 == 1);
  }
  std::string converted = AnthropicErrorFromOpenAi(400, std::string(text));
  if (!converted.empty() && nlohmann::json::parse(converted, nullptr, false).is_discarded()) {
    fuzz::Fail("converted error is not JSON");
  }
  fuzz::CheckReaders(f, text);
  return 0;
}
