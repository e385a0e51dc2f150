// A `trace verify` batch from the outside (docs/verify.md): which runs it takes (the
// selection: run ids, label, start time, model, newest N) and what its verdicts add up to
// (counts per verdict, per model and per fingerprint difference, the divergences and
// errors). The jobs themselves run in replayer/verify_worker.h.
//
// Ownership: values. Thread safety: reentrant. Errors: an unknown or ambiguous run id, or
// a store that cannot be read, is a Status naming it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/store.h"
#include "store/verify_queue.h"

namespace trace::replayer {

struct RunSelection {
  std::vector<std::string> runs;  // ids or unique prefixes; empty: every run
  std::string label;              // only runs with this label
  int64_t since_ns = 0;           // only runs started at or after this time
  std::string model;              // only runs of this model: its folder, or the folder's name
  size_t limit = 0;               // the newest N of those (0: all)
};

struct SelectedRuns {
  std::vector<store::JobSpec> jobs;  // oldest first, so results read in recording order
  // Runs left out although the selection named them: still being recorded.
  std::vector<std::string> recording;
};

Result<SelectedRuns> SelectRunsToVerify(store::Store& store, const RunSelection& selection);

struct VerifySummary {
  int64_t runs = 0;
  std::map<std::string, int64_t> by_verdict;  // verdict -> runs
  // model folder -> verdict -> runs
  std::map<std::string, std::map<std::string, int64_t>> by_model;
  // fingerprint field that differs from the recording ("engine.git_revision", ...) -> runs
  std::map<std::string, int64_t> by_fingerprint_difference;
  std::vector<const store::Verification*> diverged;  // in batch order
  std::vector<const store::Verification*> errors;
  std::vector<std::string> machines;  // the machine kinds that replayed them
};

// `verdicts` must outlive the summary (it points into them); `model_of` gives each run's
// model folder (the jobs' grouping key).
VerifySummary Summarize(const std::vector<store::Verification>& verdicts,
                        const std::map<std::string, std::string>& model_of);

// Whether a verdict meets `require` ("bitwise" or "tokens"): the levels of `trace replay
// --require` (bitwise < tokens < recorded_only < diverged; an error meets none).
bool MeetsRequirement(const std::string& verdict, const std::string& require);

}  // namespace trace::replayer
