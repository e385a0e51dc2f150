// Fuzz target for the recorder's request parsing: ParseCompletionRequest (chat and
// completions), the template view of parsed messages and Qwen tool-call extraction must
// never crash, and every rejection must be a 4xx with a message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "recorder/openai_api.h"
#include "tests/fuzz/fuzz_target.h"

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

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
