// JSON views of runs, events and verdicts, written once for every reader that prints them:
// `trace ls --json` and `trace show --json` (cli/), and `trace ui`'s API (ui/api.h), so the
// UI shows the fields the CLI prints, under the same names.
//
// Ownership: values. Thread safety: reentrant. Errors: none (a field the event lacks is
// its default).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"
#include "store/store.h"
#include "store/verify_queue.h"

namespace trace::ui {

// How long a run took: to its RunEnd, else to its last committed event (an incomplete run).
int64_t RunDurationNs(const store::RunSummary& run);

// One run as `trace ls --json` lists it (without its verdicts).
nlohmann::json RunSummaryJson(const store::RunSummary& run);

// A run's header fields as `trace show --json` opens with them.
nlohmann::json RunJson(const std::string& run_id, const store::RunSummary& summary,
                       const proto::RunHeader& header);

// One event of `trace show --json`'s timeline: its kind, time offset from `start_ns` and the
// fields a reader looks at (a model call with its whole rendered prompt).
nlohmann::json EventSummaryJson(const proto::Event& e, int64_t start_ns);

// One verdict of `trace verify` (store/verify_queue.h).
nlohmann::json VerificationJson(const store::Verification& v);

// The newest of `rows` per machine kind, in machine order (rows: any order).
std::vector<store::Verification> NewestPerMachine(const std::vector<store::Verification>& rows);

}  // namespace trace::ui
