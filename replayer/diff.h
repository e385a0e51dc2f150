// The run diff: aligns two recorded runs' event streams and says what differs, where it
// first differs, and which of the eight sources of variation (DESIGN.md) changed.
//
// Alignment: events of each kind are paired in order (the n-th model call of A with the
// n-th of B, the n-th tool result with the n-th, ...); the first differing event is found
// by walking both streams in seq order, ignoring agent output, notes and timestamps. Model
// calls served by the engine compare by prompt tokens, params and sampled tokens; calls an
// upstream answered (no tokens) by request body and answer text.
// A difference counts towards a source only where it is a cause, not a consequence: a
// changed prompt after a changed tool result is the tool's doing, not "history".
//
// Ownership: DiffRuns borrows the store(s) and returns a self-contained RunDiff.
// Thread safety: reentrant. Errors: an unknown or ambiguous run id, or a corrupt event, is
// a Status naming the id or the event seq; --call beyond either run's calls is an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/line_diff.h"
#include "base/status.h"
#include "proto/trace.pb.h"
#include "replayer/replayer.h"
#include "replayer/run_link.h"
#include "store/store.h"

namespace trace::replayer {

// The eight sources of variation, in DESIGN.md's order.
enum class Source {
  kSampling = 0,
  kKernels,
  kPrompt,
  kContext,
  kTools,
  kTime,
  kModel,
  kHistory,
};
inline constexpr int kSourceCount = 8;
// "sampling", "kernels and stack", "prompt interpolation", "context", "tools", "time",
// "model version", "history".
const char* SourceName(Source source);

struct SourceVerdict {
  Source source = Source::kSampling;
  bool changed = false;
  std::string evidence;  // the first difference that shows it ("call 2: seed 7 vs 8")
};

// An aligned pair of events that differ (either side may be missing: seq 0).
struct EventDifference {
  std::string kind;  // "llm_call", "tool_result", "context_chunk", "template_var", ...
  uint64_t seq_a = 0;
  uint64_t seq_b = 0;
  std::string description;  // one line
};

struct SideBySideRow {
  int step = 0;
  int32_t id_a = -1;  // -1: no token at this step on that side
  int32_t id_b = -1;
  std::string text_a;
  std::string text_b;
  bool logits_differ = false;  // both recorded digests and they differ
};

// How one aligned pair of model calls differs.
struct CallDifference {
  int call = 0;  // 1-based
  uint64_t seq_a = 0;
  uint64_t seq_b = 0;
  std::vector<FieldDifference> params;  // temperature, top_p, top_k, max_tokens, stop,
                                        // penalties, logit_bias, seed
  int first_prompt_token = -1;          // index of the first differing prompt token; -1 same
  int32_t prompt_token_a = -1;          // -1: that prompt is shorter
  int32_t prompt_token_b = -1;
  std::string prompt_text_diff;      // line diff of the rendered prompts ("-"/"+"/" " lines)
  int first_logits_difference = -1;  // first step whose logits digest differs
  int first_output_token = -1;       // first step whose sampled token differs; -1 same
  int32_t output_token_a = -1;
  int32_t output_token_b = -1;
  std::string output_text_a;  // of the differing token; of the whole answer for upstream calls
  std::string output_text_b;
  // Calls answered by an upstream (no token ids): compared by the request, with the ids the
  // upstream assigned replaced by their place in the run, and by the answer.
  std::string request_diff;  // line diff of the requests (pretty JSON); empty: same
  bool answers_differ = false;
  std::string response_model_a;  // the model the upstream said it was
  std::string response_model_b;
};

struct RunDiff {
  std::string run_a;
  std::string run_b;
  RunLink link;  // one re-ran the other (trace rerun): said first
  std::vector<FieldDifference> fingerprint_differences;  // engine and device
  std::vector<FieldDifference> model_differences;
  std::vector<FieldDifference> header_differences;  // argv, cwd, env, run seed
  std::optional<EventDifference> first_difference;
  std::vector<CallDifference> calls;  // only the aligned calls that differ
  std::vector<EventDifference> tool_differences;
  std::vector<EventDifference> context_differences;
  std::vector<EventDifference> template_differences;
  std::vector<EventDifference> clock_differences;
  std::vector<EventDifference> other_differences;  // tool calls, run end, missing events
  std::vector<SourceVerdict> sources;              // all eight, in Source order
  int side_by_side_call = 0;                       // --call K, 0: none
  std::vector<SideBySideRow> side_by_side;

  bool identical() const;  // no difference found at all
};

struct DiffOptions {
  int call = 0;  // 1-based model call to show token by token; 0: none
};

// Diffs runs given by id or unique prefix, both in `store`.
Result<RunDiff> DiffRuns(store::Store& store, const std::string& run_a, const std::string& run_b,
                         const DiffOptions& options);

// Diffs two runs already loaded. `tokenizer` (may be null) gives token texts.
Result<RunDiff> DiffLoadedRuns(const proto::RunHeader& header_a,
                               const std::vector<proto::Event>& events_a,
                               const proto::RunHeader& header_b,
                               const std::vector<proto::Event>& events_b,
                               const engine::Tokenizer* tokenizer, const DiffOptions& options);

std::string RenderDiffText(const RunDiff& diff);
nlohmann::json DiffJson(const RunDiff& diff);

// base/line_diff.h, shared with the re-run's divergence report.
using trace::LineDiff;

}  // namespace trace::replayer
