// The verifier: re-executes one recorded model call on an engine and compares it token by
// token with what was recorded. The whole recorded output is checked in one teacher-forced
// prefill (canonical numerics make prefill and decode agree bit for bit); from the first
// token the sampler would not draw again, decoding goes step by step to show what the
// replay would have produced instead.
//
// Ownership: VerifyCall borrows the engine and tokenizer for the duration of the call and
// returns a self-contained CallReport. Thread safety: drives the engine, which is
// single-threaded; do not share one engine between concurrent VerifyCall calls.
// Errors: a bad recorded call (token id outside the vocabulary, mask of the wrong size,
// prompt longer than the context) or an engine failure is a Status naming the call and
// the field; a replay that merely disagrees is not an error, it is the report.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace trace::replayer {

// The text of token `id`: "" without a tokenizer or for a negative id (none recorded).
std::string TokenText(const engine::Tokenizer* tokenizer, int32_t id);

// One recorded candidate token (top candidates as recorded or as replayed).
struct Candidate {
  int32_t id = -1;
  float logit = 0.0f;
  double probability = 0.0;  // under the call's temperature and mask; display only
};

// One sampled token as the recorder saw it.
struct RecordedToken {
  int32_t id = -1;
  std::optional<uint64_t> logits_digest;  // XXH3-64 of the full logits row (LogitsDigest)
  std::optional<float> logit;             // the chosen token's raw logit
  int32_t runner_up = -1;                 // highest-logit other token, -1 if not recorded
  float runner_up_logit = 0.0f;
  std::vector<Candidate> top;           // further candidates, when recorded
  std::vector<uint64_t> layer_digests;  // XXH3-64 of each layer's output, when recorded
  // Mixture-of-experts models, when recorded (with layer digests): the expert ids of every
  // MoE layer in layer order, num_experts_per_tok each (LlmCall.route_ids).
  std::vector<int32_t> route;
};

// The first token of a call whose replayed route differs from the recorded one.
struct RouteDifference {
  int step = 0;                   // output token index within the call
  int layer = -1;                 // the first MoE layer whose experts differ (0-based)
  std::vector<int32_t> recorded;  // that layer's experts as recorded
  std::vector<int32_t> replayed;  // and as replayed (empty: the layer routed nothing)
};

// What replay needs of one recorded model call, independent of the on-disk format.
struct RecordedCall {
  int index = 0;         // 1-based model call number within the run
  std::string event_id;  // the store's id of the call event, for messages
  std::vector<int32_t> prompt_tokens;
  engine::SamplingParams params;
  uint64_t seed = 0;
  uint64_t first_step = 0;  // the sampler step of output token 0
  // Per output step, the allowed-token mask used (constrained decoding); empty when the
  // call was unconstrained. A step beyond the recorded masks is unconstrained.
  std::vector<std::vector<uint8_t>> allowed_masks;
  // The recorded constraint spec (LlmCall.constraint_json); empty when unconstrained. With
  // VerifyOptions::constraints the masks are rebuilt from it step by step. Without, a
  // token whose logits digest matches is accepted as drawn again (same logits and same
  // earlier tokens give the same mask and draw); a token whose logits differ is re-drawn
  // without the constraint.
  std::string constraint_json;
  std::vector<RecordedToken> output;
  // The numerics contract version the call was drawn under (LlmCall.numerics, else the run
  // header's engine.numerics); empty when unknown. When it is this build's
  // kernels::kNumericsVersion and the call is unconstrained or carries explicit masks, a
  // token whose logits digest matches is accepted as drawn again without re-running the
  // sampler; every other token is re-drawn.
  std::string numerics;
};

// How far a replay reproduced a recording, best first. kRecordedOnly: nothing could be
// re-executed (the calls were answered by an upstream model, which gives no token ids):
// not a divergence, but not a reproduction either.
enum class Level { kBitwise = 0, kTokens = 1, kRecordedOnly = 2, kDiverged = 3 };
const char* LevelName(Level level);  // "bitwise" | "tokens" | "recorded only" | "diverged"
// The same as one word for JSON: "bitwise" | "tokens" | "recorded_only" | "diverged".
const char* LevelKey(Level level);

// Per output token, what the replay saw (for reports and the HTML page).
struct TokenOutcome {
  int32_t id = -1;              // the recorded token
  std::string text;             // its text (empty without a tokenizer)
  int32_t replayed_id = -1;     // what the sampler drew from the replayed logits
  float replayed_logit = 0.0f;  // the recorded token's logit under replay
  float margin = 0.0f;          // replayed: chosen logit minus runner-up logit
  bool digest_checked = false;
  bool digest_equal = false;
};

struct Divergence {
  int call = 0;  // RecordedCall::index
  std::string event_id;
  int step = 0;  // output token index within the call
  int32_t recorded_token = -1;
  int32_t replayed_token = -1;
  std::string recorded_text;
  std::string replayed_text;
  std::optional<float> recorded_logit;         // as recorded (recorded token, recorded side)
  float replayed_logit = 0.0f;                 // replayed token's logit under replay
  float recorded_token_replayed_logit = 0.0f;  // the recorded token's logit under replay
  std::optional<float> recorded_margin;        // recorded chosen minus recorded runner-up
  float replayed_margin = 0.0f;                // replayed chosen minus replayed runner-up
  std::vector<Candidate> recorded_top;         // what was recorded (runner-up, top list)
  std::vector<Candidate> replayed_top;         // top 5 of the replayed logits
  std::string text_before;                     // up to 80 characters of output before it
  int first_differing_layer = -1;              // 0-based; -1 unknown or none recorded
  bool layer_digests_recorded = false;
  std::vector<int32_t> replay_continuation;  // step-by-step output from the divergence on
  std::string replay_continuation_text;
};

struct CallReport {
  int call = 0;
  std::string event_id;
  Level level = Level::kBitwise;
  int tokens_recorded = 0;
  int tokens_verified = 0;  // tokens compared before the divergence (inclusive)
  bool digests_recorded = false;
  int digests_differ = 0;       // tokens whose logits digest differs but token agrees
  float max_logit_diff = 0.0f;  // largest |recorded - replayed| logit of a chosen token
  int max_logit_diff_step = -1;
  // Routes (MoE models recorded with --layer-digests): tokens whose route was compared,
  // those whose replayed route differs, and the first such token.
  int routes_checked = 0;
  int routes_differ = 0;
  std::optional<RouteDifference> first_route_difference;
  std::vector<TokenOutcome> tokens;
  std::optional<Divergence> divergence;
  double seconds = 0.0;
};

// Token masks of a constrained call, rebuilt from its recorded spec. The recorder owns the
// grammar code (recorder/constrained.h); the replayer depends on it only through this
// interface, which the CLI fills in.
class ConstraintMasks {
 public:
  virtual ~ConstraintMasks() = default;
  // mask[id] = 1 for every token allowed next (resized to the vocabulary).
  virtual void AllowedMask(std::vector<uint8_t>* mask) const = 0;
  // Consumes a sampled token.
  virtual Status Advance(int32_t token) = 0;
};
using ConstraintFactory = std::function<Result<std::unique_ptr<ConstraintMasks>>(
    const std::string& constraint_json, const engine::Tokenizer* tokenizer)>;

struct VerifyOptions {
  // Replay alongside batch - 1 companion sequences of random tokens in every forward pass.
  int batch = 1;
  uint64_t companion_seed = 0x7261636550;
  // Logits rows per teacher-forced forward pass (bounds memory: rows * vocab floats).
  int chunk_rows = 64;
  // After a divergence, decode at most this many tokens (also bounded by max_tokens).
  int max_continuation = 64;
  // Stop tokens for the continuation (the model's eos ids).
  std::vector<int32_t> eos_token_ids;
  // Rebuilds the masks of constrained calls; empty: see RecordedCall::constraint_json.
  ConstraintFactory constraints;
};

// Verifies `call` on `engine`. `tokenizer` (may be null) supplies token texts.
Result<CallReport> VerifyCall(engine::Engine& engine, const engine::Tokenizer* tokenizer,
                              const RecordedCall& call, const VerifyOptions& options);

// The `n` highest logits (ties: lower id first), with probabilities under `params`'
// temperature, among the ids the sampler could draw (engine::EligibleIds: `allowed` empty
// allows all, ids past its end none; NaN and -inf logits never).
std::vector<Candidate> TopCandidates(std::span<const float> logits,
                                     const engine::SamplingParams& params,
                                     std::span<const uint8_t> allowed, int n);

// The last `max_chars` Unicode characters of `utf8`.
std::string LastCharacters(const std::string& utf8, size_t max_chars);

}  // namespace trace::replayer
