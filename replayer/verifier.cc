#include "replayer/verifier.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <list>
#include <map>
#include <numeric>
#include <random>
#include <span>

#include "base/hash.h"
#include "kernels/kernels.h"

namespace trace::replayer {

std::string TokenText(const engine::Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr || id < 0) return "";
  int32_t ids[1] = {id};
  return tokenizer->Decode(ids);
}

namespace {

std::string CallName(const RecordedCall& call) {
  std::string name = "call " + std::to_string(call.index);
  if (!call.event_id.empty()) name += " (event " + call.event_id + ")";
  return name;
}

Status ValidateCall(const RecordedCall& call, int64_t vocab_size) {
  if (call.prompt_tokens.empty()) {
    return InvalidArgument(CallName(call) + ": prompt_tokens is empty");
  }
  for (size_t i = 0; i < call.prompt_tokens.size(); ++i) {
    int32_t id = call.prompt_tokens[i];
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument(CallName(call) + ": prompt token " + std::to_string(i) + " id " +
                             std::to_string(id) + " is outside the model's vocabulary of " +
                             std::to_string(vocab_size));
    }
  }
  for (size_t i = 0; i < call.output.size(); ++i) {
    int32_t id = call.output[i].id;
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument(CallName(call) + ": output token " + std::to_string(i) + " id " +
                             std::to_string(id) + " is outside the model's vocabulary of " +
                             std::to_string(vocab_size));
    }
  }
  for (size_t i = 0; i < call.allowed_masks.size(); ++i) {
    const auto& mask = call.allowed_masks[i];
    if (!mask.empty() && static_cast<int64_t>(mask.size()) != vocab_size) {
      return InvalidArgument(CallName(call) + ": constraint mask of step " + std::to_string(i) +
                             " has " + std::to_string(mask.size()) + " entries, the vocabulary " +
                             std::to_string(vocab_size));
    }
  }
  Status params = engine::ValidateSamplingParams(call.params);
  if (!params.ok()) return params.WithContext(CallName(call) + ": recorded sampling params");
  return Status::Ok();
}

// Random companion sequences that share every forward pass with the call under replay.
class Companions {
 public:
  Companions(engine::Engine& engine, int count, uint64_t seed, int64_t vocab_size,
             int64_t max_context)
      : engine_(engine), rng_(seed), vocab_size_(vocab_size), max_context_(max_context) {
    for (int i = 0; i < count; ++i) seqs_.push_back(engine_.NewSequence());
  }
  ~Companions() {
    for (engine::SeqId s : seqs_) engine_.FreeSequence(s);
  }

  // Appends one item per companion to `items`, each up to `max_len` random tokens.
  Status AddItems(size_t max_len, std::vector<engine::BatchItem>* items) {
    tokens_.clear();
    for (engine::SeqId s : seqs_) {
      std::uniform_int_distribution<size_t> len_dist(1, std::max<size_t>(1, max_len));
      size_t len = len_dist(rng_);
      if (engine_.Length(s) + static_cast<int64_t>(len) > max_context_) {
        TRACE_RETURN_IF_ERROR(engine_.Truncate(s, 0));
        len = std::min<size_t>(len, static_cast<size_t>(max_context_));
      }
      std::uniform_int_distribution<int32_t> id_dist(0, static_cast<int32_t>(vocab_size_ - 1));
      std::vector<int32_t>& t = tokens_.emplace_back(len);
      for (auto& id : t) id = id_dist(rng_);
      engine::BatchItem item;
      item.seq = s;
      item.tokens = t;
      item.logits_at = {static_cast<int32_t>(len - 1)};
      items->push_back(std::move(item));
    }
    return Status::Ok();
  }

 private:
  engine::Engine& engine_;
  std::vector<engine::SeqId> seqs_;
  std::mt19937_64 rng_;
  int64_t vocab_size_;
  int64_t max_context_;
  std::list<std::vector<int32_t>> tokens_;  // stable addresses for the item spans
};

// The recorded token ids of `call`, whose prefix before a step is what the penalties count
// at that draw; empty when the call has no penalty or bias (Sample ignores them then).
std::vector<int32_t> PenaltyHistory(const RecordedCall& call) {
  std::vector<int32_t> out;
  if (!call.params.AdjustsLogits()) return out;
  out.reserve(call.output.size());
  for (const RecordedToken& t : call.output) out.push_back(t.id);
  return out;
}

// The first `step` ids of `history` (all of them when shorter).
std::span<const int32_t> Before(const std::vector<int32_t>& history, size_t step) {
  return std::span<const int32_t>(history).first(std::min(step, history.size()));
}

// What Sample reports as the margin of `token` (its logit minus the highest logit of any
// other eligible id: allowed, neither NaN nor -inf; 0 when there is none), by one scan.
float MarginOver(std::span<const float> logits, std::span<const uint8_t> allowed, int32_t token) {
  float best = -INFINITY;
  const size_t t = static_cast<size_t>(token);
  if (allowed.empty()) {
    for (size_t i = 0; i < t; ++i) best = logits[i] > best ? logits[i] : best;
    for (size_t i = t + 1; i < logits.size(); ++i) best = logits[i] > best ? logits[i] : best;
  } else {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (i == t || i >= allowed.size() || allowed[i] == 0) continue;
      best = logits[i] > best ? logits[i] : best;
    }
  }
  // NaN never compares greater and -inf never beats the -inf start: best stays -inf
  // exactly when no other id is eligible.
  const float runner_up = best == -INFINITY ? 0.0f : best;
  return logits[t] - runner_up;
}

struct SequenceGuard {
  engine::Engine& engine;
  engine::SeqId seq;
  ~SequenceGuard() { engine.FreeSequence(seq); }
};

// A replayed row's route: (layer, experts) per MoE layer, in layer order.
using RouteLayers = std::vector<std::pair<int, std::vector<int32_t>>>;

// Compares a recorded route (flat, layer order) with the replayed one; the first layer whose
// experts differ, or nothing when they are equal. A replayed model with a different mixture
// (other layers, other k) differs at its first layer that does not line up.
std::optional<RouteDifference> CompareRoute(const std::vector<int32_t>& recorded,
                                            const RouteLayers& replayed, int step) {
  size_t at = 0;
  for (const auto& [layer, ids] : replayed) {
    const size_t end = std::min(recorded.size(), at + ids.size());
    std::vector<int32_t> rec(recorded.begin() + static_cast<ptrdiff_t>(at),
                             recorded.begin() + static_cast<ptrdiff_t>(end));
    if (rec != ids) return RouteDifference{step, layer, std::move(rec), ids};
    at = end;
  }
  if (at == recorded.size()) return std::nullopt;
  // Recorded experts beyond what the replay routed (a model with fewer MoE layers).
  return RouteDifference{
      step,
      -1,
      std::vector<int32_t>(recorded.begin() + static_cast<ptrdiff_t>(at), recorded.end()),
      {}};
}

}  // namespace

const char* LevelName(Level level) {
  switch (level) {
    case Level::kBitwise:
      return "bitwise";
    case Level::kTokens:
      return "tokens";
    case Level::kRecordedOnly:
      return "recorded only";
    case Level::kDiverged:
      return "diverged";
  }
  return "unknown";
}

const char* LevelKey(Level level) {
  return level == Level::kRecordedOnly ? "recorded_only" : LevelName(level);
}

std::vector<Candidate> TopCandidates(std::span<const float> logits,
                                     const engine::SamplingParams& params,
                                     std::span<const uint8_t> allowed, int n) {
  // The sampler's own rule: a mask shorter than the logits (the tokenizer's vocabulary
  // inside the model's padded one) allows nothing past its end, and NaN (which would break
  // the sort's ordering) and -inf are never candidates.
  std::vector<int32_t> ids = engine::EligibleIds(logits, allowed);
  size_t k = std::min<size_t>(static_cast<size_t>(std::max(n, 0)), ids.size());
  auto before = [&](int32_t a, int32_t b) {
    if (logits[a] != logits[b]) return logits[a] > logits[b];
    return a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  // Probabilities in double, for display: softmax of logits / temperature over `allowed`.
  std::vector<Candidate> out;
  if (k == 0) return out;
  double max_logit = logits[ids[0]];
  double sum = 0.0;
  if (params.temperature > 0.0f) {
    for (int32_t id : ids) sum += std::exp((logits[id] - max_logit) / params.temperature);
  }
  for (size_t i = 0; i < k; ++i) {
    Candidate c;
    c.id = ids[i];
    c.logit = logits[ids[i]];
    if (params.temperature > 0.0f) {
      c.probability = std::exp((c.logit - max_logit) / params.temperature) / sum;
    } else {
      c.probability = i == 0 ? 1.0 : 0.0;
    }
    out.push_back(c);
  }
  return out;
}

std::string LastCharacters(const std::string& utf8, size_t max_chars) {
  size_t chars = 0;
  size_t i = utf8.size();
  while (i > 0 && chars < max_chars) {
    --i;
    // Count a character at each byte that is not a UTF-8 continuation byte.
    if ((static_cast<unsigned char>(utf8[i]) & 0xC0) != 0x80) ++chars;
  }
  return utf8.substr(i);
}

namespace {

// A report of `call` before any token is checked.
CallReport NewCallReport(const RecordedCall& call) {
  CallReport report;
  report.call = call.index;
  report.event_id = call.event_id;
  report.tokens_recorded = static_cast<int>(call.output.size());
  report.digests_recorded =
      !call.output.empty() &&
      std::all_of(call.output.begin(), call.output.end(),
                  [](const RecordedToken& t) { return t.logits_digest.has_value(); });
  return report;
}

// The context the call's sequence may grow to: the engine's (else the model's), which the
// recorded prompt and output must fit; without either, room for the call and more.
Result<int64_t> ReplayContext(const engine::Engine& engine, const RecordedCall& call) {
  const size_t prompt_len = call.prompt_tokens.size();
  const size_t n = call.output.size();
  int64_t max_context = engine.options().max_context > 0
                            ? engine.options().max_context
                            : engine.model().config().max_position_embeddings;
  if (max_context > 0 && static_cast<int64_t>(prompt_len + n) > max_context) {
    return InvalidArgument(CallName(call) + ": prompt (" + std::to_string(prompt_len) +
                           " tokens) plus output (" + std::to_string(n) +
                           ") exceeds the context of " + std::to_string(max_context));
  }
  if (max_context <= 0) max_context = static_cast<int64_t>(prompt_len + n) + 1024;
  return max_context;
}

// The call's constraint rebuilt from its recorded spec when a factory is given; none for
// an unconstrained call or without a factory.
Result<std::unique_ptr<ConstraintMasks>> RebuildConstraint(const RecordedCall& call,
                                                           const engine::Tokenizer* tokenizer,
                                                           const VerifyOptions& options) {
  if (call.constraint_json.empty() || !options.constraints) {
    return std::unique_ptr<ConstraintMasks>();
  }
  auto made = options.constraints(call.constraint_json, tokenizer);
  if (!made.ok()) return made.status().WithContext(CallName(call) + ": rebuilding its constraint");
  return std::move(*made);
}

// What the steps of one call's replay share: the engine with the call's sequence and its
// companions, the constraint followed, and the buffers reused from pass to pass.
struct CallReplay {
  engine::Engine& engine;
  const engine::Tokenizer* tokenizer;
  const RecordedCall& call;
  const VerifyOptions& options;
  const engine::SeqId seq;
  Companions& companions;
  const int64_t max_context;
  std::unique_ptr<ConstraintMasks> constraint;
  // A recorded constraint that was not rebuilt: its masks are unknown.
  const bool unknown_constraint = !call.constraint_json.empty() && !constraint;
  // The sampler may be skipped where the logits are bitwise the recorded ones only when it
  // is the one that drew them (same numerics contract version) and the mask is the
  // recorded one (no constraint rebuilt or unknown).
  const bool same_sampler =
      call.numerics == kernels::kNumericsVersion && call.constraint_json.empty();
  const std::vector<int32_t> history = PenaltyHistory(call);
  std::vector<uint8_t> mask;  // the rebuilt constraint's mask at the current step
  engine::ForwardOutput out;

  // Masks: rebuilt from the recorded constraint when a factory is given, else the explicit
  // per-step masks, else none.
  std::span<const uint8_t> MaskFor(size_t step) {
    if (constraint) {
      constraint->AllowedMask(&mask);
      return mask;
    }
    if (step < call.allowed_masks.size()) return call.allowed_masks[step];
    return {};
  }
};

// The layer digests and expert routes of the rows of one forward pass (item 0, the call),
// probed only for a call that recorded them.
class ChunkProbes {
 public:
  explicit ChunkProbes(const RecordedCall& call)
      : want_layers_(std::any_of(call.output.begin(), call.output.end(),
                                 [](const RecordedToken& t) { return !t.layer_digests.empty(); })),
        want_routes_(std::any_of(call.output.begin(), call.output.end(),
                                 [](const RecordedToken& t) { return !t.route.empty(); })) {}
  ChunkProbes(const ChunkProbes&) = delete;  // the probes point at this object
  ChunkProbes& operator=(const ChunkProbes&) = delete;

  Status Forward(engine::Engine& engine, std::span<const engine::BatchItem> items,
                 engine::ForwardOutput* out) {
    layer_digests_.clear();
    routes_.clear();
    return engine.Forward(items, out, want_layers_ ? &layer_probe_ : nullptr,
                          want_routes_ ? &route_probe_ : nullptr);
  }
  // Of the row at token index `row` of item 0: [layer] digests, and (layer, experts) pairs.
  std::vector<uint64_t> LayersAt(int32_t row) const {
    auto it = layer_digests_.find(row);
    return it == layer_digests_.end() ? std::vector<uint64_t>{} : it->second;
  }
  const RouteLayers& RouteAt(int32_t row) const {
    static const RouteLayers kNone;
    auto it = routes_.find(row);
    return it == routes_.end() ? kNone : it->second;
  }

 private:
  const bool want_layers_;
  const bool want_routes_;
  std::map<int32_t, std::vector<uint64_t>> layer_digests_;  // [row][layer]
  std::map<int32_t, RouteLayers> routes_;                   // [row] -> layers in order
  engine::LayerProbe layer_probe_ = [this](size_t item, int32_t token_index, int layer,
                                           std::span<const float> hidden) {
    if (item != 0) return;
    auto& v = layer_digests_[token_index];
    if (static_cast<int>(v.size()) <= layer) v.resize(layer + 1);
    v[layer] = Digest64(hidden.data(), hidden.size_bytes());
  };
  engine::RouteProbe route_probe_ = [this](size_t item, int32_t token_index, int layer,
                                           std::span<const int32_t> ids) {
    if (item == 0)
      routes_[token_index].emplace_back(layer, std::vector<int32_t>(ids.begin(), ids.end()));
  };
};

// One step of the teacher-forced pass as checked: the outcome, and whether the logits
// differ from the recorded ones (by digest, else by the chosen token's logit).
struct StepCheck {
  TokenOutcome outcome;
  bool logits_differ = false;
};

// What the replay draws at `step` from its logits, the recorded token against them.
StepCheck CheckDraw(const CallReplay& r, size_t step, std::span<const float> logits,
                    std::span<const uint8_t> allowed) {
  const RecordedToken& rec = r.call.output[step];
  StepCheck check;
  TokenOutcome& outcome = check.outcome;
  outcome.id = rec.id;
  outcome.text = TokenText(r.tokenizer, rec.id);
  outcome.replayed_logit = logits[rec.id];
  if (rec.logits_digest) {
    outcome.digest_checked = true;
    outcome.digest_equal = *rec.logits_digest == LogitsDigest(logits);
    check.logits_differ = !outcome.digest_equal;
  } else if (rec.logit) {
    check.logits_differ = std::memcmp(&*rec.logit, &logits[rec.id], sizeof(float)) != 0;
  }
  if (r.same_sampler && outcome.digest_equal) {
    // Bitwise the recorded logits, same sampler, params, seed, step and mask: the draw
    // is the recorded token (docs/replay.md, "Skipping the sampler").
    outcome.replayed_id = rec.id;
    outcome.margin = MarginOver(logits, allowed, rec.id);
  } else {
    engine::SampleResult sampled =
        engine::Sample(logits, r.call.params, r.call.seed, r.call.first_step + step, allowed,
                       Before(r.history, step));
    outcome.replayed_id = sampled.token;
    outcome.margin = sampled.logit - sampled.runner_up_logit;
    if (sampled.token != rec.id && r.unknown_constraint && outcome.digest_checked &&
        outcome.digest_equal) {
      outcome.replayed_id = rec.id;  // same logits, same prefix: the same constrained draw
    }
  }
  return check;
}

// Counts a recorded route against the replayed one; keeps the first that differs.
void CheckRoute(const std::vector<int32_t>& recorded, const RouteLayers& replayed, size_t step,
                CallReport* report) {
  ++report->routes_checked;
  std::optional<RouteDifference> diff = CompareRoute(recorded, replayed, static_cast<int>(step));
  if (diff) {
    ++report->routes_differ;
    if (!report->first_route_difference) report->first_route_difference = std::move(diff);
  }
}

// Counts a token drawn again from differing logits, and keeps the largest difference of a
// chosen token's logit.
void NoteLogitDifference(const RecordedToken& rec, std::span<const float> logits, size_t step,
                         CallReport* report) {
  ++report->digests_differ;
  if (!rec.logit) return;
  float diff = std::fabs(*rec.logit - logits[rec.id]);
  if (diff > report->max_logit_diff || report->max_logit_diff_step < 0) {
    report->max_logit_diff = diff;
    report->max_logit_diff_step = static_cast<int>(step);
  }
}

// Where the teacher-forced pass found the replay drawing another token: that step's
// logits, mask and layer digests, for the divergence report.
struct DivergencePoint {
  size_t step = 0;
  std::vector<float> logits;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> layers;
};

// Checks output step `step`, whose logits came from row `row` of item 0; the divergence
// point when the replay draws another token, else advances the constraint past it.
Result<std::optional<DivergencePoint>> CheckStep(CallReplay& r, const ChunkProbes& probes,
                                                 std::span<const float> logits, int32_t row,
                                                 size_t step, CallReport* report) {
  const RecordedToken& rec = r.call.output[step];
  std::span<const uint8_t> allowed = r.MaskFor(step);
  StepCheck check = CheckDraw(r, step, logits, allowed);
  if (!rec.route.empty()) CheckRoute(rec.route, probes.RouteAt(row), step, report);
  report->tokens.push_back(check.outcome);
  report->tokens_verified = static_cast<int>(step + 1);
  if (check.outcome.replayed_id != rec.id) {
    return std::optional<DivergencePoint>(DivergencePoint{
        step, std::vector<float>(logits.begin(), logits.end()),
        std::vector<uint8_t>(allowed.begin(), allowed.end()), probes.LayersAt(row)});
  }
  if (r.constraint) {
    Status advanced = r.constraint->Advance(rec.id);
    if (!advanced.ok()) {
      return advanced.WithContext(CallName(r.call) + ": constraint at step " +
                                  std::to_string(step));
    }
  }
  if (check.logits_differ) NoteLogitDifference(rec, logits, step, report);
  return std::optional<DivergencePoint>();
}

// The teacher-forced pass: the prompt and the recorded output fed in chunks of rows, each
// step checked; stops at the first step the replay draws differently.
Result<std::optional<DivergencePoint>> TeacherForce(CallReplay& r, CallReport* report) {
  const size_t prompt_len = r.call.prompt_tokens.size();
  const size_t n = r.call.output.size();
  // The teacher-forced sequence: prompt then every recorded output token but the last.
  std::vector<int32_t> forced(r.call.prompt_tokens);
  for (size_t i = 0; i + 1 < n; ++i) forced.push_back(r.call.output[i].id);
  ChunkProbes probes(r.call);
  const size_t chunk = static_cast<size_t>(std::max(r.options.chunk_rows, 1));
  size_t fed = 0;
  size_t step = 0;
  while (step < n) {
    size_t rows = std::min(chunk, n - step);
    // Logits for output step s come from forced position prompt_len - 1 + s.
    size_t end = prompt_len + step + rows - 1;
    std::vector<engine::BatchItem> items(1);
    items[0].seq = r.seq;
    items[0].tokens = std::span<const int32_t>(forced.data() + fed, end - fed);
    for (size_t row = 0; row < rows; ++row) {
      items[0].logits_at.push_back(static_cast<int32_t>(prompt_len - 1 + step + row - fed));
    }
    TRACE_RETURN_IF_ERROR(r.companions.AddItems(end - fed, &items));
    Status st = probes.Forward(r.engine, items, &r.out);
    if (!st.ok()) return st.WithContext("replaying " + CallName(r.call));
    for (size_t row = 0; row < rows; ++row, ++step) {
      TRACE_ASSIGN_OR_RETURN(
          std::optional<DivergencePoint> diverged,
          CheckStep(r, probes, r.out.row(row), items[0].logits_at[row], step, report));
      if (diverged) return diverged;
    }
    fed = end;
  }
  return std::optional<DivergencePoint>();
}

// What was recorded of the candidates: the runner-up first, then the recorded top list.
std::vector<Candidate> RecordedCandidates(const RecordedToken& rec) {
  std::vector<Candidate> out;
  if (rec.runner_up >= 0) {
    Candidate c;
    c.id = rec.runner_up;
    c.logit = rec.runner_up_logit;
    out.push_back(c);
  }
  for (const Candidate& c : rec.top) {
    if (c.id != rec.runner_up) out.push_back(c);
  }
  return out;
}

// The first layer whose replayed digest differs from the recorded one; -1 when none does.
int FirstDifferingLayer(const std::vector<uint64_t>& recorded,
                        const std::vector<uint64_t>& replayed) {
  size_t layers = std::min(recorded.size(), replayed.size());
  for (size_t l = 0; l < layers; ++l) {
    if (recorded[l] != replayed[l]) return static_cast<int>(l);
  }
  return -1;
}

// The divergence at `at`, described: both draws, their logits, margins and candidates, the
// text before it, and the first differing layer. `generated`: the tokens the penalties
// count at that draw.
Divergence DescribeDivergence(const CallReplay& r, const DivergencePoint& at,
                              const std::vector<int32_t>& generated) {
  const RecordedCall& call = r.call;
  const size_t s = at.step;
  const RecordedToken& rec = call.output[s];
  std::span<const float> logits(at.logits);
  engine::SampleResult sampled =
      engine::Sample(logits, call.params, call.seed, call.first_step + s, at.mask, generated);
  Divergence d;
  d.call = call.index;
  d.event_id = call.event_id;
  d.step = static_cast<int>(s);
  d.recorded_token = rec.id;
  d.replayed_token = sampled.token;
  d.recorded_text = TokenText(r.tokenizer, rec.id);
  d.replayed_text = TokenText(r.tokenizer, sampled.token);
  d.recorded_logit = rec.logit;
  d.replayed_logit = sampled.logit;
  d.recorded_token_replayed_logit = logits[rec.id];
  if (rec.logit && rec.runner_up >= 0) d.recorded_margin = *rec.logit - rec.runner_up_logit;
  d.replayed_margin = sampled.logit - sampled.runner_up_logit;
  d.recorded_top = RecordedCandidates(rec);
  // The candidates as the sampler ranked them: after penalties and bias, when the call had any.
  std::vector<float> ranked;
  if (call.params.AdjustsLogits()) ranked = engine::AdjustedLogits(logits, call.params, generated);
  d.replayed_top =
      TopCandidates(call.params.AdjustsLogits() ? std::span<const float>(ranked) : logits,
                    call.params, at.mask, 5);
  if (r.tokenizer != nullptr) {
    std::vector<int32_t> before;
    for (size_t i = 0; i < s; ++i) before.push_back(call.output[i].id);
    d.text_before = LastCharacters(r.tokenizer->Decode(before), 80);
  }
  d.layer_digests_recorded = !rec.layer_digests.empty();
  if (d.layer_digests_recorded)
    d.first_differing_layer = FirstDifferingLayer(rec.layer_digests, at.layers);
  return d;
}

// Decodes one token after `last` at output position `produced`; the constraint's mask
// (the only one known past the divergence) when there is one.
Result<int32_t> DecodeNext(CallReplay& r, const int32_t* last, size_t produced,
                           const std::vector<int32_t>& generated) {
  std::vector<engine::BatchItem> items(1);
  items[0].seq = r.seq;
  items[0].tokens = std::span<const int32_t>(last, 1);
  items[0].logits_at = {0};
  TRACE_RETURN_IF_ERROR(r.companions.AddItems(1, &items));
  Status st = r.engine.Forward(items, &r.out);
  if (!st.ok()) return st.WithContext("decoding " + CallName(r.call) + " after the divergence");
  std::span<const uint8_t> allowed;
  if (r.constraint) {
    r.constraint->AllowedMask(&r.mask);
    allowed = r.mask;
  }
  engine::SampleResult next = engine::Sample(r.out.row(0), r.call.params, r.call.seed,
                                             r.call.first_step + produced, allowed, generated);
  return next.token;
}

// What the replay would have produced from the divergence at step `s`: the replayed token,
// then decoding with the recorded params and seed (and the rebuilt constraint). Explicit
// per-step masks describe the recorded path only, and an unknown constraint cannot be
// followed, so those calls stop after the replayed token.
Status ContinueAfterDivergence(CallReplay& r, size_t s, std::vector<int32_t> generated,
                               Divergence* d) {
  const RecordedCall& call = r.call;
  const size_t prompt_len = call.prompt_tokens.size();
  d->replay_continuation.push_back(d->replayed_token);
  if (call.params.AdjustsLogits()) generated.push_back(d->replayed_token);
  bool can_continue = r.constraint ? r.constraint->Advance(d->replayed_token).ok()
                                   : call.allowed_masks.empty() && !r.unknown_constraint;
  auto is_eos = [&](int32_t id) {
    return std::find(r.options.eos_token_ids.begin(), r.options.eos_token_ids.end(), id) !=
           r.options.eos_token_ids.end();
  };
  TRACE_RETURN_IF_ERROR(r.engine.Truncate(r.seq, static_cast<int64_t>(prompt_len + s)));
  size_t limit = call.params.max_tokens > 0
                     ? static_cast<size_t>(call.params.max_tokens)
                     : call.output.size() + static_cast<size_t>(r.options.max_continuation);
  size_t produced = s + 1;
  int32_t last = d->replayed_token;
  while (can_continue && !is_eos(last) && produced < limit &&
         d->replay_continuation.size() < static_cast<size_t>(r.options.max_continuation) &&
         static_cast<int64_t>(prompt_len + produced) < r.max_context) {
    TRACE_ASSIGN_OR_RETURN(last,
                           DecodeNext(r, &d->replay_continuation.back(), produced, generated));
    if (r.constraint && !r.constraint->Advance(last).ok()) can_continue = false;
    d->replay_continuation.push_back(last);
    if (call.params.AdjustsLogits()) generated.push_back(last);
    ++produced;
  }
  if (r.tokenizer != nullptr)
    d->replay_continuation_text = r.tokenizer->Decode(d->replay_continuation);
  return Status::Ok();
}

// The divergence at `at`: described, then decoded step by step from it.
Result<Divergence> ReportDivergence(CallReplay& r, const DivergencePoint& at) {
  // The tokens the penalties count on the replay's path: the recorded ones before the
  // divergence, then each token the continuation draws.
  std::span<const int32_t> before = Before(r.history, at.step);
  std::vector<int32_t> generated(before.begin(), before.end());
  Divergence d = DescribeDivergence(r, at, generated);
  TRACE_RETURN_IF_ERROR(ContinueAfterDivergence(r, at.step, std::move(generated), &d));
  return d;
}

}  // namespace

// Checks the call in one teacher-forced pass; from a divergence, reports it and decodes on.
Result<CallReport> VerifyCall(engine::Engine& engine, const engine::Tokenizer* tokenizer,
                              const RecordedCall& call, const VerifyOptions& options) {
  auto started = std::chrono::steady_clock::now();
  const int64_t vocab = engine.model().config().vocab_size;
  TRACE_RETURN_IF_ERROR(ValidateCall(call, vocab));
  CallReport report = NewCallReport(call);
  TRACE_ASSIGN_OR_RETURN(const int64_t max_context, ReplayContext(engine, call));

  engine::SeqId seq = engine.NewSequence();
  SequenceGuard guard{engine, seq};
  Companions companions(engine, std::max(options.batch, 1) - 1, options.companion_seed, vocab,
                        std::min<int64_t>(max_context, 4096));
  TRACE_ASSIGN_OR_RETURN(std::unique_ptr<ConstraintMasks> constraint,
                         RebuildConstraint(call, tokenizer, options));
  CallReplay r{engine, tokenizer,  call,        options,
               seq,    companions, max_context, std::move(constraint)};

  TRACE_ASSIGN_OR_RETURN(std::optional<DivergencePoint> diverged, TeacherForce(r, &report));
  if (!diverged) {
    report.level =
        (report.digests_recorded && report.digests_differ == 0) ? Level::kBitwise : Level::kTokens;
    if (call.output.empty()) report.level = Level::kBitwise;
  } else {
    report.level = Level::kDiverged;
    TRACE_ASSIGN_OR_RETURN(report.divergence, ReportDivergence(r, *diverged));
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace trace::replayer
