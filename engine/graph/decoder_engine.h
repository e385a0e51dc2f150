// The Engine every backend shares: sequences and their KV-cache bookkeeping, the context
// clamp, batch validation and flattening, the cut into passes, the layers (graph/layers.h),
// and the final norm + LM head over the rows whose logits were asked for (and soft-capping). A
// backend (`Ops`: engine/cpu/cpu_ops.h, engine/cuda/cuda_ops.h) keeps memory and kernels only.
//
// What a backend supplies is the concept Backend below: the layer ops of graph/layers.h plus
// memory, passes and logits.
//
// Ownership: the engine owns the Ops and the sequences. Thread safety: one thread drives an
// Engine. Errors: every Forward check happens before any cache changes, with the messages of
// graph/batch_validation.h; backend failures come back as their Status.
#pragma once

#include <algorithm>
#include <concepts>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/graph/batch_validation.h"
#include "engine/graph/layers.h"
#include "kernels/canonical.h"

namespace trace::engine::graph {

// One sequence: its cached length, the positions allocated, and the backend's storage.
template <class Cache>
struct Sequence {
  int64_t length = 0;
  int64_t capacity = 0;
  Cache cache;
};

// One token of a batch, flattened.
template <class Cache>
struct Row {
  Sequence<Cache>* seq = nullptr;
  int32_t token = 0;
  int32_t position = 0;
  size_t item = 0;       // index of its BatchItem
  int32_t index = 0;     // index within the item's tokens
  int64_t out_row = -1;  // its row among the logits asked for, or -1
};

// Rows [begin, end) of the flattened batch, run as one pass through the layers.
template <class Cache>
struct Pass {
  std::span<const Row<Cache>> rows;
  int64_t max_position = 0;
  int64_t size() const { return static_cast<int64_t>(rows.size()); }
};

// A backend of the decoder graph: its layer ops (graph/layers.h) and the memory they run in.
template <class Ops>
concept Backend = LayerOps<Ops> &&
    requires(Ops& ops, const Ops& const_ops, Sequence<typename Ops::Cache>* seq,
             const Sequence<typename Ops::Cache>& from, const Pass<typename Ops::Cache>& pass,
             const LayerProbe* probe, const RouteProbe* route_probe, PassBuffers* buffers,
             const float* x, float* host_logits, int64_t n, Status (*run_layers)()) {
  // Ops::Cache: one sequence's KV storage (Sequence<Cache>::cache).
  typename Ops::Cache;
  // What runs the model, for Engine::DeviceDescription ("cpu avx2 x8", the GPU's name).
  { const_ops.DeviceDescription() } -> std::same_as<std::string>;
  // The model's weights as views in backend memory.
  { const_ops.weights() } -> std::same_as<const ModelWeights&>;
  // Makes the backend current on the calling thread before any work (cudaSetDevice).
  { ops.Activate() } -> std::same_as<Status>;
  // Grows seq's cache to `capacity` positions, keeping its first seq->length.
  { ops.GrowCache(seq, n) } -> std::same_as<Status>;
  // Copies the first n positions of from's cache into seq's (ForkSequence).
  { ops.CopyCache(from, seq, n) } -> std::same_as<Status>;
  // Most rows in one pass through the layers.
  { const_ops.MaxRowsPerPass() } -> std::same_as<int64_t>;
  // Whether a pass of `rows` rows up to position `max_position` fits in memory.
  { const_ops.PassFits(n, n) } -> std::same_as<bool>;
  // Sets up a pass (its tokens, positions, cache rows, probes) and its activations.
  { ops.BeginPass(pass, probe, route_probe, buffers) } -> std::same_as<Status>;
  // Runs run_layers() (the pass's RunLayers) once; CUDA through a captured graph.
  { ops.RunPass(run_layers) } -> std::same_as<Status>;
  // Keeps the final hidden rows x of the pass's asked-for rows as output rows.
  { ops.EndPass(pass, x) } -> std::same_as<Status>;
  // Room for `rows` output rows before the passes of a Forward.
  { ops.ReserveOutputRows(n) } -> std::same_as<Status>;
  // Most output rows Logits computes at once.
  { const_ops.MaxLogitRowsPerChunk() } -> std::same_as<int64_t>;
  // Final norm + LM head of output rows [first, first + rows) into host memory.
  { ops.Logits(n, n, host_logits) } -> std::same_as<Status>;
};

// The context an engine runs with: the asked-for limit, or the model's when none (or a
// larger one) is asked for.
inline int64_t ClampContext(int64_t asked, const ModelConfig& config) {
  return asked <= 0 || asked > config.max_position_embeddings ? config.max_position_embeddings
                                                              : asked;
}

// Capacity for a sequence that must hold `n` positions: doubling from 16, capped at the
// context (the caller has checked n <= context).
inline int64_t GrownCapacity(int64_t capacity, int64_t n, int64_t context) {
  return std::min(std::max<int64_t>({n, 2 * capacity, 16}), context);
}

template <Backend Ops>
class DecoderEngine final : public Engine {
 public:
  using Cache = typename Ops::Cache;

  // `options.max_context` must already be clamped (ClampContext).
  DecoderEngine(std::shared_ptr<const Model> model, const EngineOptions& options,
                std::unique_ptr<Ops> ops)
      : model_(std::move(model)), options_(options), ops_(std::move(ops)) {}

  const Model& model() const override { return *model_; }
  const EngineOptions& options() const override { return options_; }
  std::string DeviceDescription() const override { return ops_->DeviceDescription(); }
  Ops& ops() { return *ops_; }
  const Ops& ops() const { return *ops_; }

  SeqId NewSequence() override {
    const SeqId id = next_id_++;
    seqs_[id];
    return id;
  }
  void FreeSequence(SeqId seq) override { seqs_.erase(seq); }

  Result<SeqId> ForkSequence(SeqId src, int64_t n_tokens) override {
    auto it = seqs_.find(src);
    if (it == seqs_.end()) return NotFound("sequence " + std::to_string(src) + " does not exist");
    if (n_tokens < 0 || n_tokens > it->second.length) {
      return InvalidArgument("fork of sequence " + std::to_string(src) + ": " +
                             std::to_string(n_tokens) + " tokens asked, it holds " +
                             std::to_string(it->second.length));
    }
    TRACE_RETURN_IF_ERROR(ops_->Activate());
    const SeqId id = NewSequence();
    Sequence<Cache>& dst = seqs_[id];
    const Sequence<Cache>& from = seqs_[src];
    TRACE_RETURN_IF_ERROR(Reserve(&dst, n_tokens));
    TRACE_RETURN_IF_ERROR(ops_->CopyCache(from, &dst, n_tokens));
    dst.length = n_tokens;
    return id;
  }

  Status Truncate(SeqId seq, int64_t n_tokens) override {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return NotFound("sequence " + std::to_string(seq) + " does not exist");
    if (n_tokens < 0) return InvalidArgument("truncate to a negative length");
    it->second.length = std::min(it->second.length, n_tokens);
    return Status::Ok();
  }

  int64_t Length(SeqId seq) const override {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? -1 : it->second.length;
  }

  Status Forward(std::span<const BatchItem> items, ForwardOutput* out, const LayerProbe* probe,
                 const RouteProbe* route_probe) override;

 private:
  Status Reserve(Sequence<Cache>* s, int64_t n) {
    if (n <= s->capacity) return Status::Ok();
    return ops_->GrowCache(s, GrownCapacity(s->capacity, n, options_.max_context));
  }

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  std::unique_ptr<Ops> ops_;
  std::unordered_map<SeqId, Sequence<Cache>> seqs_;
  SeqId next_id_ = 1;
};

template <Backend Ops>
Status DecoderEngine<Ops>::Forward(std::span<const BatchItem> items, ForwardOutput* out,
                                   const LayerProbe* probe, const RouteProbe* route_probe) {
  TRACE_RETURN_IF_ERROR(ops_->Activate());
  const ModelConfig& c = model_->config();
  // Validate everything before any cache changes, so a bad request leaves no trace.
  TRACE_ASSIGN_OR_RETURN(const BatchShape shape,
                         ValidateBatch(items, c.vocab_size, options_.max_context,
                                       [this](SeqId seq) -> int64_t { return Length(seq); }));

  // Flatten: one row per token, items in order; the logits rows in request order.
  std::vector<Row<Cache>> rows;
  rows.reserve(static_cast<size_t>(shape.total_rows));
  int64_t out_rows = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence<Cache>* s = &seqs_[items[i].seq];
    TRACE_RETURN_IF_ERROR(Reserve(s, s->length + static_cast<int64_t>(items[i].tokens.size())));
    size_t next_logit = 0;
    for (size_t t = 0; t < items[i].tokens.size(); ++t) {
      Row<Cache> r;
      r.seq = s;
      r.token = items[i].tokens[t];
      r.position = static_cast<int32_t>(s->length + static_cast<int64_t>(t));
      r.item = i;
      r.index = static_cast<int32_t>(t);
      if (next_logit < items[i].logits_at.size() &&
          items[i].logits_at[next_logit] == static_cast<int32_t>(t)) {
        r.out_row = out_rows++;
        ++next_logit;
      }
      rows.push_back(r);
    }
  }

  TRACE_RETURN_IF_ERROR(ops_->ReserveOutputRows(shape.total_logits));
  for (int64_t begin = 0; begin < shape.total_rows;) {
    // Grow the pass while the backend can hold it. Any cut gives the same bits: each row is
    // computed from its own inputs and its sequence's cache.
    int64_t end = begin, max_position = 0;
    while (end < shape.total_rows && end - begin < ops_->MaxRowsPerPass()) {
      const int64_t next_max = std::max<int64_t>(max_position, rows[end].position);
      if (end > begin && !ops_->PassFits(end - begin + 1, next_max)) break;
      max_position = next_max;
      ++end;
    }
    Pass<Cache> pass{std::span<const Row<Cache>>(rows.data() + begin, end - begin), max_position};
    PassBuffers buffers;
    TRACE_RETURN_IF_ERROR(ops_->BeginPass(pass, probe, route_probe, &buffers));
    TRACE_RETURN_IF_ERROR(ops_->RunPass(
        [&]() { return RunLayers(*ops_, c, ops_->weights(), pass.size(), buffers); }));
    TRACE_RETURN_IF_ERROR(ops_->EndPass(pass, buffers.x));
    for (const Row<Cache>& r : pass.rows) r.seq->length = r.position + 1;
    begin = end;
  }

  // Final norm and the LM head, only for the rows asked for.
  out->vocab_size = c.vocab_size;
  out->logits.assign(static_cast<size_t>(shape.total_logits * c.vocab_size), 0.0f);
  const int64_t chunk = std::max<int64_t>(1, ops_->MaxLogitRowsPerChunk());
  for (int64_t first = 0; first < shape.total_logits; first += chunk) {
    const int64_t n = std::min(chunk, shape.total_logits - first);
    TRACE_RETURN_IF_ERROR(ops_->Logits(first, n, out->logits.data() + first * c.vocab_size));
  }
  // Final logit soft-capping (Gemma, where configured): on the host, the same code for every
  // backend.
  if (c.final_logit_softcap > 0.0f) {
    for (float& v : out->logits) v = kernels::canonical::SoftCap(v, c.final_logit_softcap);
  }
  return Status::Ok();
}

}  // namespace trace::engine::graph
