// Fuzz target for the recorder's request parsing: ParseCompletionRequest (chat and
// completions), the template view of parsed messages and Qwen tool-call extraction must
// never crash, and every rejection must be a 4xx with a message. Built with g++, so a
// small driver main runs the target over a seeded corpus and random mutations of it for a
// bounded time (TRACE_FUZZ_SECONDS, default 3).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "recorder/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    auto parsed = trace::recorder::ParseCompletionRequest(text, chat);
    if (auto* err = std::get_if<trace::recorder::ApiError>(&parsed)) {
      if (err->http_status < 400 || err->http_status >= 500 || err->message.empty()) {
        std::fprintf(stderr, "bad rejection: %d %s\n", err->http_status, err->message.c_str());
        std::abort();
      }
      (void)err->Body();
    } else {
      const auto& req = std::get<trace::recorder::CompletionRequest>(parsed);
      (void)trace::recorder::MessagesForTemplate(req.messages).dump();
      (void)trace::recorder::ToolsForTemplate(req.tools);
    }
  }
  auto calls = trace::recorder::ExtractToolCalls(text, "f");
  for (const auto& c : calls.calls) {
    if (c.name.empty() && c.id.empty()) std::abort();
  }
  return 0;
}

int main(int argc, char** argv) {
  std::vector<std::string> corpus = {
      R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})",
      R"({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "assistant",
          "content": null, "tool_calls": [{"id": "c", "type": "function", "function":
          {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c",
          "content": "r"}], "tools": [{"type": "function", "function": {"name": "f",
          "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
          "tool_choice": "required", "temperature": 0.5, "top_p": 0.9, "top_k": 5,
          "seed": 3, "max_tokens": 7, "stop": ["x", "y"], "logprobs": true,
          "top_logprobs": 2, "stream": true, "stream_options": {"include_usage": true}})",
      R"({"model": "m", "prompt": "abc", "logprobs": 3, "guided_choice": ["a", "b"]})",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call> tail",
  };
  double seconds = 3;
  if (const char* s = std::getenv("TRACE_FUZZ_SECONDS")) seconds = std::atof(s);
  std::mt19937_64 rng(argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  size_t runs = 0;
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsnul\\u\n<>/_abcmodelrsgtp";
  for (const std::string& seed : corpus) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
  }
  while (std::chrono::steady_clock::now() < deadline) {
    std::string s = corpus[rng() % corpus.size()];
    int mutations = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < mutations && !s.empty(); ++m) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(at, 1 + rng() % 8);
          break;
        case 2:
          s.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 3:
          s.insert(at, corpus[rng() % corpus.size()].substr(0, rng() % 40));
          break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++runs;
  }
  std::printf("openai_request_fuzz: %zu inputs, no crash\n", runs);
  return 0;
}
