// `trace rerun RUN -- CMD`: re-runs the agent's own code against the recording of RUN (a
// cassette, recorder/cassette/), recording a new run linked to RUN (RunHeader.rerun), and
// says whether the agent still asks what it asked then, and where it first does not.
//
// The server is the one `trace record` starts, with a CassetteGate in front of its model
// API, clock and tool lookups. What serves the calls that go live: --upstream URL, else
// --model DIR, else (a run recorded through --upstream) nothing: such a run re-runs offline
// and a call beyond the recording gets a 503; else the model folder the recording names.
//
// Ownership: RerunCommand owns everything it creates for its duration. Thread safety: one
// re-run per process (it runs the agent like RecordCommand). Errors: an unknown run id, a
// run without model calls, a model folder that is gone, a bad --edit-call file: a Status
// naming it. The agent diverging is not an error: it is the outcome.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "recorder/cassette/cassette_gate.h"
#include "recorder/cassette/divergence.h"
#include "recorder/session.h"

namespace trace::recorder {

struct RerunOptions {
  SessionOptions session;  // store, model / upstream, seed (for the live calls), label, ...
  std::string run;         // the recorded run: a full id or a unique prefix
  int live_from = 0;       // fork at this model call (1-based); 0: cassette mode
  bool strict = false;
  bool tools_recorded_only = false;
  int edit_call = 0;           // replace this call's request body (implies a fork there)
  std::string edit_body_path;  // with edit_call: the JSON body file
};

struct RerunOutcome {
  RecordOutcome record;  // the new run
  std::string parent_run_id;
  std::string mode;  // "cassette" | "fork"
  int live_from = 0;
  bool strict = false;
  std::string live_backend;  // what served live calls: "local engine (DIR)", ...
  CassetteStats stats;
  std::optional<Divergence> divergence;
  std::optional<int> recorded_exit;  // the recorded agent's exit status, when it exited
  // 0: the agent followed the recording to its end (same requests, every recorded call
  // used, same exit status); 1: it diverged (or, --strict, was stopped). A fork exits 0
  // unless the calls before its fork point diverged.
  int exit_code = 0;
};

Result<RerunOutcome> RerunCommand(const RerunOptions& options,
                                  const std::vector<std::string>& argv);

// For people: the verdict, where it diverged (fields, prompt diff), the counts.
std::string RerunReportText(const RerunOutcome& outcome);
nlohmann::json RerunReportJson(const RerunOutcome& outcome);

}  // namespace trace::recorder
