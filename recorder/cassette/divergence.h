// Where a re-run's agent first asked something the recording did not hold: the model call
// (its number in the re-run and the recorded call expected there), the fields that differ
// (which message, which field, both values) and a line diff of the two prompts; or a tool
// call the recording has no result for; or an agent that stopped before using every
// recorded call.
//
// Ownership: values. Thread safety: reentrant. Errors: none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "recorder/cassette/request_identity.h"

namespace trace::recorder {

struct Divergence {
  enum Kind {
    kRequest,     // call `call` asked something else than recorded call `expected_call`
    kExtraCall,   // call `call` came after every recorded call was used
    kFewerCalls,  // the agent ended with recorded calls left unused (from `expected_call`)
    kTool,        // a tool call (name, arguments) the recording has no result for
  };
  Kind kind = kRequest;
  int call = 0;           // the re-run's model call number (1-based); 0 for kFewerCalls
  int expected_call = 0;  // the recorded call expected (1-based); 0 for kExtraCall
  uint64_t expected_seq = 0;
  std::vector<FieldChange> changes;  // kRequest
  std::string prompt_diff;           // kRequest: "-" recorded, "+" now
  std::string tool_name;             // kTool
  std::string tool_arguments;        // kTool

  // One line: "call 3 differs from the recording: messages[1].content (user) ..."
  std::string Summary() const;
  // The summary, every field change with both values, and the prompt diff.
  std::string Describe() const;
  nlohmann::json Json() const;
};

// The report for request `now` (the re-run's call `call`) that matched no unused recorded
// call, `expected` (recorded call `expected_call` at `expected_seq`) being the one the
// recording held next.
Divergence RequestDivergence(int call, int expected_call, uint64_t expected_seq,
                             const RequestIdentity& expected, const RequestIdentity& now);

}  // namespace trace::recorder
