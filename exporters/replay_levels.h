// The replay levels of a run, read from the JSON report of `trace replay RUN --json`, so
// an export can carry them as trace.replay.* attributes (docs/export.md).
//
// Ownership: value types. Thread safety: reentrant. Errors: text that is not such a
// report, or a report for another run, is InvalidArgument naming `source` and the run ids.
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace trace::exporters {

struct ReplayLevels {
  std::string run_level;                   // "bitwise" | "tokens" | "diverged"
  std::string numerics;                    // what the replay ran: "canonical-v2" | "fast"
  std::string device;                      // where it ran
  std::map<int, std::string> call_levels;  // 1-based model call number -> level
  std::map<int, std::string> skipped;      // 1-based model call number -> reason
};

Result<ReplayLevels> ParseReplayReport(const std::string& json_text, const std::string& run_id,
                                       const std::string& source);

}  // namespace trace::exporters
