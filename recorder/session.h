// The two things a user runs: `trace record -- CMD` (serve the model, run the agent
// against it, record everything into one run) and `trace serve` (the same server
// standalone, optionally recording what it serves as one run).
//
// Ownership: each call owns every object it creates (store, model, server, child) for
// its duration. Thread safety: one session per process (they handle SIGINT/SIGTERM).
// Errors: a model, store or command that cannot be used is a Status naming it; the
// agent failing is not an error (its status is the outcome).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "recorder/run_log.h"
#include "recorder/scheduler.h"
#include "recorder/server.h"
#include "store/store.h"

namespace trace::recorder {

struct SessionOptions {
  std::string model_dir;  // empty: the built-in demo model (created on first use)
  std::string store_path;
  std::string label;
  std::optional<uint64_t> seed;  // run seed; random when absent
  engine::EngineOptions engine;
  SchedulerOptions scheduler;
  // Forward to this OpenAI-compatible base URL ("http://host:port/v1") instead of the
  // local engine; requests and responses are recorded as given.
  std::string upstream;
  std::string host = "127.0.0.1";
  int port = 0;
  std::string api_key;  // record: random when empty; serve: no check when empty
  HttpLimits http_limits;
  // Model names served (repeatable --served-model-name); empty: any requested name.
  std::vector<std::string> served_model_names;
  std::vector<std::string> trace_argv;  // the `trace ...` command line
  // Progress lines ("using the demo model ..."); default: stderr.
  std::function<void(const std::string&)> log;
};

struct RecordOutcome {
  std::string run_id;
  int exit_status = 0;  // what `trace record` exits with (child code or 128 + signal)
  bool signalled = false;
  int signal = 0;
  RunCounts counts;
  int64_t events = 0;
  int64_t stored_bytes = 0;
  double duration_ms = 0;
  std::string store_path;
  // Requests refused before authentication (no or a wrong key, foreign Host or Origin).
  int64_t refused_requests = 0;
};

// This process's argv, from /proc/self/cmdline (recorded as the trace command line).
std::vector<std::string> OwnCommandLine();

// Runs `argv` under the recorder. The agent's exit status is in the outcome.
Result<RecordOutcome> RecordCommand(const SessionOptions& options,
                                    const std::vector<std::string>& argv);

// ---- building blocks shared with `trace rerun` (recorder/rerun.h) ----------------------

// The server options of a session (a random API key when none is given).
ServerOptions ServerOptionsFor(const SessionOptions& options, uint64_t run_seed);
// A run header with the host facts, the agent's (redacted) argv and the run seed.
proto::RunHeader NewRunHeader(const SessionOptions& options, const std::vector<std::string>& argv,
                              uint64_t run_seed);
// The local engine's server (its fingerprints into the header), or the upstream proxy.
Result<std::unique_ptr<Server>> MakeServer(const SessionOptions& options,
                                           const ServerOptions& server_options,
                                           proto::RunHeader* header);

// What a caller of RunAgentRecorded adds to a plain `trace record`.
struct RecordHooks {
  CallGate* gate = nullptr;                 // set on the server before it starts
  std::function<void(int pid)> on_started;  // the agent runs
  // After the agent exited and the server stopped, before the RunEnd: last header changes.
  std::function<void(proto::RunHeader*)> before_end;
};

// Starts `server`, begins the run in `store` with `header`, runs `argv` against it with the
// agent's environment (key `api_key`), and ends the run with how the agent ended.
Result<RecordOutcome> RunAgentRecorded(const SessionOptions& options,
                                       const std::vector<std::string>& argv, store::Store& store,
                                       Server& server, proto::RunHeader header,
                                       const std::string& api_key, const RecordHooks& hooks,
                                       std::chrono::steady_clock::time_point started);

// One paragraph: run id, calls, tokens, tool results, events, size, time, exit status.
std::string SummaryParagraph(const RecordOutcome& outcome);

// Serves until SIGINT or SIGTERM. `record` set: everything served is one run with that
// label. `on_ready` gets the base URL once listening.
Status Serve(const SessionOptions& options, bool record,
             const std::function<void(const std::string& origin)>& on_ready);

}  // namespace trace::recorder
