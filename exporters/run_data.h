// One run read whole from the store, redacted or not, as every exporter consumes it.
//
// Ownership: RunData owns copies of the header, events and summary. Thread safety: LoadRun
// uses the store as its header allows (any thread). Errors: an unknown run id, or the
// first row that does not decode, fails the load with the store's message naming the run
// id and seq; nothing is exported from a run that cannot be read whole.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "proto/trace.pb.h"
#include "redact/redactor.h"
#include "store/store.h"

namespace trace::exporters {

struct RunData {
  store::RunSummary summary;
  proto::RunHeader header;
  std::vector<proto::Event> events;
  bool redacted = false;                     // a Redactor was applied
  std::vector<std::string> redaction_rules;  // its rule names (Redactor::RuleNames)
  redact::RedactionReport redaction;         // what it changed (empty when nothing matched)
};

// Reads run `run_id` (a full id). With `rules`, the header and every event are redacted
// (redact/redactor.h) before they are returned, by those rules plus the values of the
// run's own recorded environment variables whose names look secret. With `bad_rows`, a row
// that does not decode is left out and its Corruption appended there (a viewer shows the
// rest of a damaged run); without, it fails the load.
struct BadRow {
  uint64_t seq = 0;
  Status status;
};
Result<RunData> LoadRun(store::Store& store, const std::string& run_id,
                        const redact::RuleSet* rules, std::vector<BadRow>* bad_rows = nullptr);

// "seq 12 llm_call.request_json (sk-api-key x2)": one line per redacted field.
std::vector<std::string> RedactedFieldLines(const redact::RedactionReport& report);

}  // namespace trace::exporters
