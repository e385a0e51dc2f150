// Checking a whole store (`trace fsck`): SQLite's own integrity check, every runs row and
// events row against its checksum, every event decoded (blobs and prompt prefixes
// resolved), the rows of each run against its count and RunEnd, the summary counters
// against the events, every blob against its SHA-256, blob references, rows that belong
// to no run; and for what is damaged, what can still be read.
//
// Ownership: plain values. Thread safety: reentrant; opens the store read-only (changes
// nothing, takes no write lock), so it may run while runs are being recorded. Errors: a
// store that cannot be opened at all is the returned Status; everything found inside is
// in the report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace trace::store {

struct FsckOptions {
  std::string run;  // a run id or unique prefix; empty: every run and every blob
  // SQLite's full integrity_check (reads every page) instead of quick_check.
  bool full_sqlite_check = true;
};

struct FsckRun {
  std::string run_id;
  std::string status;           // store::RunStatusName, as the summary says
  int64_t counted_events = 0;   // what the run's summary row counts
  int64_t rows = 0;             // events rows found
  int64_t readable_events = 0;  // rows that pass every check
  bool header_ok = true;
  std::vector<std::string> problems;  // one line each (capped at 50, then a count)
  std::string readable_seqs;          // "1..16, 18..39" (empty when none)
  std::string salvage;                // one line: what can be saved (empty when clean)
  bool ok() const { return problems.empty(); }
};

struct FsckReport {
  std::string path;
  int schema_version = 0;
  int64_t file_bytes = 0;
  std::vector<std::string> sqlite_problems;  // from integrity_check; empty: "ok"
  int64_t events_checked = 0;
  int64_t blobs_checked = 0;
  std::vector<std::string> blob_problems;
  int64_t unreferenced_blobs = 0;  // reclaimable, not damage (a later `trace rm` frees them)
  int64_t unreferenced_blob_bytes = 0;
  // Rows that belong to no runs row (e.g. a damaged run id), by run id.
  std::vector<std::string> orphan_problems;
  std::vector<FsckRun> runs;
  std::vector<std::string> notes;  // facts that are not damage (old schema, ...)
  std::string salvage;             // store-level advice when SQLite itself found damage

  int damaged_runs() const;
  bool clean() const;
};

Result<FsckReport> CheckStore(const std::string& path, const FsckOptions& options = {});

}  // namespace trace::store
