// The run replayer: loads a recorded run from the store, checks the model and the
// fingerprints against this machine and build, and verifies every recorded model call
// (replayer/verifier.h), producing one RunReport.
//
// Ownership: ReplayRun borrows the store for the duration of the call; the RunReport it
// returns owns everything it holds. Thread safety: one ReplayRun call drives its own
// engine; concurrent calls on one Store are fine (the store is thread-safe).
// Errors: an unknown or ambiguous run id, a corrupt event, a missing model folder, or a
// model whose hashes differ from the recorded ones without `model_dir` given on purpose
// is a Status naming the run id, event seq, folder or file. A replay that disagrees with
// the recording is not an error: the report says where.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/fingerprint.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/kernels.h"
#include "proto/trace.pb.h"
#include "replayer/verifier.h"
#include "store/store.h"

namespace trace::replayer {

// One difference between the recorded and the current value of a fingerprint field.
struct FieldDifference {
  std::string field;  // "engine.git_revision", "model.weights_sha256 (model.safetensors)"
  std::string recorded;
  std::string current;
  // A fingerprint field that says where the arithmetic runs (kernel path, ISA, device,
  // stack, build) while recording and replay ran the same canonical contract: the bits must
  // match anyway ("same contract, different path"), so it explains nothing by itself.
  bool same_contract = false;
};

struct ReplayProgress {
  int calls_done = 0;
  int calls_total = 0;
  int64_t tokens_done = 0;
  int64_t tokens_total = 0;
  double seconds = 0.0;
};

// Keeps the last model folder's model, engine and tokenizer between ReplayRun calls, so
// that a worker replaying many runs of one model (trace verify) loads and hashes it once.
// Reused while the folder's files (names, sizes, modification times) and the engine's
// options are what they were; anything else loads anew. One thread at a time.
class EngineCache {
 public:
  EngineCache();
  ~EngineCache();
  int loads() const { return loads_; }  // models loaded so far

 private:
  friend struct EngineCacheAccess;
  std::string key_;
  std::shared_ptr<const engine::Model> model_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  int loads_ = 0;
};

struct ReplayOptions {
  std::string device = "cpu";  // "cpu" | "cuda" | "cuda:N"
  // Empty: the numerics mode the run was recorded in; else "canonical" or "fast".
  std::string numerics;
  // Empty: the model folder the run names, which must hash as recorded. Non-empty: replay
  // against this folder on purpose, reporting how it differs.
  std::string model_dir;
  int batch = 1;           // replay each call alongside batch - 1 random companions
  std::vector<int> calls;  // 1-based model call numbers to replay; empty: all
  int threads = 0;         // engine threads; 0: all cores
  std::function<void(const ReplayProgress&)> progress;  // called after each call
  ConstraintFactory constraints;  // rebuilds constrained calls' masks (the CLI sets it)
  EngineCache* cache = nullptr;   // keep the model loaded between calls (null: load each time)
};

struct SkippedCall {
  int call = 0;
  uint64_t seq = 0;
  std::string reason;
};

struct RunReport {
  std::string run_id;
  std::string run_status;       // store::RunStatusName: complete | recording | incomplete | crashed
  std::string model_dir;        // the folder replayed against
  bool model_override = false;  // --model given and its hashes differ from the recording
  std::vector<FieldDifference> model_differences;
  std::vector<FieldDifference> fingerprint_differences;
  std::string numerics;  // what the replay ran: "canonical-v2" | "fast"
  std::string device;    // Engine::DeviceDescription()
  engine::EngineDeviceFingerprint device_fingerprint;  // this machine, as replayed on
  int batch = 1;
  int calls_in_run = 0;  // model calls recorded
  std::vector<CallReport> calls;
  std::vector<SkippedCall> skipped;  // calls not replayable (errored requests)
  // Calls answered by an upstream model (proxy mode): recorded, not re-executable. A run
  // recorded against an upstream loads no model (model_dir names none).
  std::vector<SkippedCall> recorded_only;
  std::string upstream;           // the upstream such a run was recorded against
  Level level = Level::kBitwise;  // the worst level over the calls (kRecordedOnly if any)
  int64_t tokens_verified = 0;
  // Over the calls: tokens whose MoE route was recorded and compared, and those that differ.
  int64_t routes_checked = 0;
  int64_t routes_differ = 0;
  double seconds = 0.0;

  // The first divergence in call order, or nullptr.
  const Divergence* first_divergence() const;
};

// Converts a recorded LlmCall to the verifier's form. `call_number` is 1-based.
Result<RecordedCall> ToRecordedCall(const proto::LlmCall& call, int call_number, uint64_t seq);

// Replays run `run_id_or_prefix` (a full id or a unique prefix).
Result<RunReport> ReplayRun(store::Store& store, const std::string& run_id_or_prefix,
                            const ReplayOptions& options);

// Parses "canonical", "canonical-v2" or "fast".
Result<kernels::Numerics> ParseNumerics(const std::string& text);

// Parses a call list "1,3,5-7" into sorted unique 1-based call numbers.
Result<std::vector<int>> ParseCallList(const std::string& text);

}  // namespace trace::replayer
