// Fuzz target: redaction (redact/), which reads whatever an agent, a model or a tool put in
// a run: free text, raw bytes, and JSON documents in the *_json fields that it parses and
// walks. The input becomes the fields of one event (tool-call arguments and name, a
// model call's request and response JSON and output text, a note, raw output bytes) with
// the run's own API key planted in it. Promises (docs/export.md, "Redaction"):
//   - no crash, whatever the bytes or the JSON nesting;
//   - the planted key is gone from every field;
//   - a *_json field that was valid JSON is still valid JSON;
//   - redacting twice changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"
#include "redact/redactor.h"
#include "redact/rules.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using trace::fuzz::Fail;

// What `trace record` hands the agent as OPENAI_API_KEY ("trace-" + 32 hex digits).
constexpr char kPlanted[] = "trace-0123456789abcdef0123456789abcdef";
constexpr char kPlantedCore[] = "0123456789abcdef0123456789abcdef";

const trace::redact::Redactor& Defaults() {
  static const trace::redact::Redactor* r = [] {
    auto created = trace::redact::Redactor::Create(trace::redact::RuleSet::Defaults());
    if (!created.ok()) Fail("cannot build the default redactor: " + created.status().message());
    return new trace::redact::Redactor(std::move(created).value());
  }();
  return *r;
}

// A JSON text by the standard. nlohmann's lexer takes a NUL byte for the end of the input,
// so it would pass "{...}\0{" (trailing bytes), which the redactor rightly treats as text.
bool IsJson(const std::string& text) {
  return text.find('\0') == std::string::npos && nlohmann::json::accept(text);
}

}  // namespace

std::vector<std::string> TraceFuzzSeeds() {
  return {};
}  // tests/fuzz/corpus/ holds them

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Fields that are not UTF-8 are expected here, and `trace` itself silences protobuf's
  // line about each one (cli/main.cc); printed, they were ten lines of log per input.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const std::string input(reinterpret_cast<const char*>(data), size);
  // The key goes in, space-delimited, at a place the input picks (its first bytes).
  const size_t at = size < 2 ? 0 : (data[0] | (data[1] << 8)) % (size + 1);
  const std::string planted = input.substr(0, at) + " " + kPlanted + " " + input.substr(at);

  std::vector<trace::proto::Event> events(3);
  auto* call = events[0].mutable_llm_call();
  call->set_request_json(input);  // unplanted: valid JSON documents stay JSON-shaped
  call->set_response_json(planted);
  call->set_output_text(planted);
  call->add_token_ids(7);
  auto* tool = events[1].mutable_tool_call();
  tool->set_name(input);
  tool->set_arguments_json(planted);
  events[2].mutable_note()->set_text(planted);
  events[2].mutable_note()->set_data_json(input);

  const bool input_has_core = input.find(kPlantedCore) != std::string::npos;
  const trace::redact::Redactor& redactor = Defaults();
  for (trace::proto::Event& e : events) {
    const trace::proto::Event before = e;
    trace::redact::RedactionReport report;
    redactor.RedactEvent(&e, &report);
    const std::string bytes = e.SerializeAsString();
    // (An input that holds the key's digits itself keeps them: they were not planted.)
    if (!input_has_core && bytes.find(kPlantedCore) != std::string::npos) {
      Fail("the planted key survived redaction: " + e.ShortDebugString());
    }
    for (auto [was, is] :
         {std::pair(&before.llm_call().request_json(), &e.llm_call().request_json()),
          std::pair(&before.llm_call().response_json(), &e.llm_call().response_json()),
          std::pair(&before.tool_call().arguments_json(), &e.tool_call().arguments_json()),
          std::pair(&before.note().data_json(), &e.note().data_json())}) {
      if (*was != *is && IsJson(*was) && !IsJson(*is)) {
        Fail("redaction made a *_json field invalid JSON: " + *was + " -> " + *is);
      }
    }
    trace::proto::Event again = e;
    redactor.RedactEvent(&again, nullptr);
    if (again.SerializeAsString() != bytes) {
      Fail("redacting twice changed: " + e.ShortDebugString() + " -> " + again.ShortDebugString());
    }
  }
  return 0;
}
