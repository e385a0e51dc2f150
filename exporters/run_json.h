// The trace-run JSON export (`trace export --format json`): the whole run, every event in
// protobuf's canonical JSON, plus what redaction changed (docs/export.md).
//
// Ownership: reads the caller's RunData. Thread safety: reentrant. Errors: a message that
// protobuf cannot print as JSON, or a failed write to `out`, is an error naming the run.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "exporters/run_data.h"

namespace trace::exporters {

// Writes {"format":"trace-run","format_version":N,"summary":{...},"redaction":{...},
// "header":{...},"events":[...]}. Without redaction every event parses back to the
// identical message (store::JsonToMessage).
Status WriteRunJson(const RunData& run, std::ostream& out);

// The "redaction" member: {"applied":false}, or what was replaced where, which calls lost
// token ids, and the note on what an import of the export can still be checked for.
nlohmann::json RedactionJson(const RunData& run);

}  // namespace trace::exporters
