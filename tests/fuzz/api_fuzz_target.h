// What the recorder's wire-format fuzz targets provide (tests/fuzz/responses_request_fuzz.cc,
// tests/fuzz/anthropic_request_fuzz.cc), the libFuzzer entry point and the seeds, and
// the checks they share. They are built like every target in tests/fuzz/ (fuzz_target.h,
// tests/fuzz/CMakeLists.txt: the corpus replay in CI, libFuzzer with scripts/fuzz.sh).
//
// Ownership: values. Thread safety: one input at a time. Errors: a broken promise prints
// what broke and aborts, so the driver or libFuzzer reports the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/api/model_call.h"

#include "tests/fuzz/fuzz_target.h"

namespace trace::recorder::fuzz {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// A rejection is a 4xx with a message, and its body in the format's shape is JSON.
inline void CheckRejection(const WireFormat& f, const ApiError& e) {
  if (e.http_status < 400 || e.http_status >= 500 || e.message.empty()) {
    Fail("bad rejection: " + std::to_string(e.http_status) + " " + e.message);
  }
  if (nlohmann::json::parse(f.ErrorBody(e), nullptr, false).is_discarded()) {
    Fail("error body is not JSON: " + f.ErrorBody(e));
  }
}

// For an accepted request: the answer rendered whole and as a stream (split in two text
// pieces) folds back to the same object, and reads back as what was answered.
inline void CheckAnswerRoundTrip(const WireFormat& f, const CompletionRequest& req,
                                 const std::string& text, bool with_tool_call) {
  CompletionResult r;
  r.id = std::string(f.id_prefix()) + "fuzz";
  r.message_item_id = "msg_fuzz";
  r.model = req.model;
  r.text = text;
  r.finish_reason = "stop";
  r.prompt_tokens = 7;
  r.completion_tokens = 2;
  if (with_tool_call && !req.tools.empty()) {
    r.tool_calls.push_back(
        {f.tool_call_id_prefix() + "1", req.tools[0].name, "{\"a\": 1}", "fc_1"});
    r.finish_reason = "tool_calls";
  }
  CompletionResult header = r;
  auto stream = f.NewStream(req, header);
  const size_t half = text.size() / 2;
  std::string events = stream->Begin();
  if (r.tool_calls.empty()) {
    events += stream->Text(text.substr(0, half), {});
    events += stream->End(r, text.substr(half), {});
  } else {
    events += stream->End(r, text, {});
  }
  nlohmann::json body = nlohmann::json::parse(f.Body(req, r), nullptr, false);
  if (body.is_discarded()) Fail("body is not JSON");
  nlohmann::json folded = f.FoldStream(events);
  if (folded != body) Fail("stream folds to " + folded.dump() + "\nbody: " + body.dump());
  ResponseSummary s = f.ReadResponse(body);
  if (s.text != r.text || s.tool_calls.size() != r.tool_calls.size()) {
    Fail("read back differs: " + s.text);
  }
}

// Untrusted answers (an upstream's) never crash the readers.
inline void CheckReaders(const WireFormat& f, std::string_view input) {
  (void)f.FoldStream(input);
  nlohmann::json j = nlohmann::json::parse(input, nullptr, false);
  if (!j.is_discarded()) (void)f.ReadResponse(j);
}

}  // namespace trace::recorder::fuzz
