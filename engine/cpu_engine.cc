// The CPU engine: the batched forward pass, op by op, every op one call of
// kernels/kernels.h (the CUDA engine mirrors this sequence). Batch invariance comes from
// the kernels: every op computes each row from that row's inputs alone, in a fixed order.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/batch_validation.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "kernels/thread_pool.h"

namespace trace::engine {
namespace {

using kernels::KernelContext;

// Rows (tokens) per internal pass: bounds the activation memory of a long prefill. Any value
// gives the same bits in canonical numerics (each row is computed alone).
constexpr int64_t kMaxRowsPerPass = 256;

struct Sequence {
  int64_t length = 0;
  int64_t capacity = 0;               // positions allocated in each cache
  std::vector<std::vector<float>> k;  // per layer [capacity, kv_heads, head_dim]
  std::vector<std::vector<float>> v;
};

class CpuEngine final : public Engine {
 public:
  CpuEngine(std::shared_ptr<const Model> model, const EngineOptions& options)
      : model_(std::move(model)), options_(options) {
    const ModelConfig& c = model_->config();
    if (options_.max_context <= 0 || options_.max_context > c.max_position_embeddings) {
      options_.max_context = c.max_position_embeddings;
    }
    int threads = options_.threads > 0 ? options_.threads
                                       : static_cast<int>(std::thread::hardware_concurrency());
    if (threads < 1) threads = 1;
    options_.threads = threads;
    pool_ = kernels::ThreadPool::Create(threads);
    ctx_.numerics = options_.numerics;
    ctx_.impl = options_.impl;
    ctx_.pool = pool_.get();
    const int64_t half = c.head_dim / 2;
    cos_.resize(options_.max_context * half);
    sin_.resize(options_.max_context * half);
    kernels::MakeRopeTables(options_.max_context, c.head_dim, c.rope_theta, cos_.data(),
                            sin_.data());
    RepackWeights();
  }

  const Model& model() const override { return *model_; }
  const EngineOptions& options() const override { return options_; }
  std::string DeviceDescription() const override {
    std::string isa = options_.impl == kernels::Impl::kReference ? "reference"
                      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2"
                                                                                        : "scalar";
    return "cpu " + isa + " x" + std::to_string(options_.threads);
  }

  SeqId NewSequence() override {
    SeqId id = next_id_++;
    Sequence& s = seqs_[id];
    s.k.resize(model_->config().num_layers);
    s.v.resize(model_->config().num_layers);
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
    SeqId id = NewSequence();
    Sequence& dst = seqs_[id];
    const Sequence& from = seqs_[src];
    Reserve(&dst, n_tokens);
    const size_t n = static_cast<size_t>(n_tokens * KvWidth());
    for (size_t l = 0; l < dst.k.size(); ++l) {
      std::copy_n(from.k[l].data(), n, dst.k[l].data());
      std::copy_n(from.v[l].data(), n, dst.v[l].data());
    }
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

  Status Forward(std::span<const BatchItem> items, ForwardOutput* out,
                 const LayerProbe* probe) override;

 private:
  int64_t KvWidth() const { return model_->config().num_kv_heads * model_->config().head_dim; }

  // Grows the caches of `s` to hold at least `n` positions (doubling, capped at the
  // context), keeping the cached positions.
  void Reserve(Sequence* s, int64_t n) {
    if (n <= s->capacity) return;
    int64_t cap = std::max<int64_t>({n, 2 * s->capacity, 16});
    cap = std::min(cap, options_.max_context);
    const size_t keep = static_cast<size_t>(s->length * KvWidth());
    for (size_t l = 0; l < s->k.size(); ++l) {
      for (auto* cache : {&s->k[l], &s->v[l]}) {
        std::vector<float> grown(static_cast<size_t>(cap * KvWidth()));
        std::copy_n(cache->data(), std::min(keep, cache->size()), grown.data());
        cache->swap(grown);
      }
    }
    s->capacity = cap;
  }

  // Copies every matrix into the kInterleaved32 layout (kernels/kernels.h), which lets the
  // AVX2 MatMul read 8 output columns per load: the same bits as row-major (the layout does
  // not change the order of any sum), and decode streams the weights ~2x faster. Both
  // numerics modes get the same layout so that canonical vs fast compares reduction order
  // alone. Each source tensor's mapped pages are dropped right after its copy, so peak
  // memory stays near one copy of the weights (the mapping re-reads from the file if a
  // caller touches it again). A tied embedding / LM head is copied once.
  void RepackWeights() {
    weights_ = model_->weights();
    std::unordered_map<const void*, kernels::WeightView> done;
    auto repack = [&](kernels::WeightView* w) {
      if (w->data == nullptr || w->layout != kernels::WeightLayout::kRowMajor) return;
      if (auto it = done.find(w->data); it != done.end()) {
        *w = it->second;
        return;
      }
      const size_t bytes = kernels::InterleavedWeightsBytes(*w);
      void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (buf == nullptr) return;  // out of memory: keep reading the row-major mapping
      repacked_.emplace_back(buf, &std::free);
      kernels::WeightView packed = kernels::InterleaveWeights(*w, buf);
      DropMappedPages(w->data,
                      static_cast<size_t>(w->rows * w->cols) * kernels::DTypeSize(w->dtype));
      done.emplace(w->data, packed);
      *w = packed;
    };
    repack(&weights_.embed_tokens);
    repack(&weights_.lm_head);
    for (LayerWeights& lw : weights_.layers) {
      for (kernels::WeightView* w : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj,
                                     &lw.up_proj, &lw.down_proj}) {
        repack(w);
      }
    }
  }

  // MADV_DONTNEED on the whole pages inside [data, data + size) of a read-only file
  // mapping: the kernel drops them and would fault them back in from the file.
  static void DropMappedPages(const void* data, size_t size) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }

  // One pass over rows [row_begin, row_end) of the flattened batch.
  void RunPass(int64_t row_begin, int64_t row_end, const std::vector<Sequence*>& row_seq,
               const std::vector<int32_t>& row_token, const std::vector<int32_t>& row_pos,
               const std::vector<int64_t>& row_out, const std::vector<size_t>& row_item,
               const std::vector<int32_t>& row_index, const LayerProbe* probe,
               std::vector<float>* final_hidden);

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  KernelContext ctx_;
  ModelWeights weights_;  // the model's views, matrices repointed at repacked_ copies
  std::vector<std::unique_ptr<void, decltype(&std::free)>> repacked_;
  std::vector<float> cos_, sin_;
  std::unordered_map<SeqId, Sequence> seqs_;
  SeqId next_id_ = 1;
  // Activations of one pass, reused.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
};

Status CpuEngine::Forward(std::span<const BatchItem> items, ForwardOutput* out,
                          const LayerProbe* probe) {
  const ModelConfig& c = model_->config();
  // Validate everything before any cache changes, so a bad request leaves no trace.
  TRACE_ASSIGN_OR_RETURN(
      const BatchShape shape,
      ValidateBatch(items, c.vocab_size, options_.max_context, [this](SeqId seq) -> int64_t {
        auto it = seqs_.find(seq);
        return it == seqs_.end() ? -1 : it->second.length;
      }));
  const int64_t total_rows = shape.total_rows, total_logits = shape.total_logits;

  // Flatten: one row per token, items in order.
  std::vector<Sequence*> row_seq;
  std::vector<int32_t> row_token, row_pos, row_index;
  std::vector<int64_t> row_out;  // index among the logits rows, or -1
  std::vector<size_t> row_item;
  row_seq.reserve(total_rows);
  int64_t out_rows = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence* s = &seqs_[items[i].seq];
    Reserve(s, s->length + static_cast<int64_t>(items[i].tokens.size()));
    size_t next_logit = 0;
    for (size_t t = 0; t < items[i].tokens.size(); ++t) {
      row_seq.push_back(s);
      row_token.push_back(items[i].tokens[t]);
      row_pos.push_back(static_cast<int32_t>(s->length + static_cast<int64_t>(t)));
      row_item.push_back(i);
      row_index.push_back(static_cast<int32_t>(t));
      if (next_logit < items[i].logits_at.size() &&
          items[i].logits_at[next_logit] == static_cast<int32_t>(t)) {
        row_out.push_back(out_rows++);
        ++next_logit;
      } else {
        row_out.push_back(-1);
      }
    }
  }

  const int64_t H = c.hidden_size;
  std::vector<float> final_hidden(static_cast<size_t>(total_logits * H));
  for (int64_t begin = 0; begin < total_rows; begin += kMaxRowsPerPass) {
    const int64_t end = std::min(total_rows, begin + kMaxRowsPerPass);
    RunPass(begin, end, row_seq, row_token, row_pos, row_out, row_item, row_index, probe,
            &final_hidden);
  }

  // Final norm and the LM head, only for the rows asked for.
  const ModelWeights& w = weights_;
  out->vocab_size = c.vocab_size;
  out->logits.assign(static_cast<size_t>(total_logits * c.vocab_size), 0.0f);
  if (total_logits > 0) {
    kernels::RmsNorm(ctx_, final_hidden.data(), total_logits, H, w.final_norm, c.rms_norm_eps,
                     final_hidden.data());
    kernels::MatMul(ctx_, final_hidden.data(), total_logits, w.lm_head, nullptr,
                    out->logits.data());
  }
  return Status::Ok();
}

void CpuEngine::RunPass(int64_t row_begin, int64_t row_end, const std::vector<Sequence*>& row_seq,
                        const std::vector<int32_t>& row_token, const std::vector<int32_t>& row_pos,
                        const std::vector<int64_t>& row_out, const std::vector<size_t>& row_item,
                        const std::vector<int32_t>& row_index, const LayerProbe* probe,
                        std::vector<float>* final_hidden) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = weights_;
  const int64_t M = row_end - row_begin;
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t QD = c.num_heads * D, KVD = c.num_kv_heads * D;
  auto fit = [](std::vector<float>* b, int64_t n) {
    if (static_cast<int64_t>(b->size()) < n) b->resize(static_cast<size_t>(n));
  };
  fit(&x_, M * H);
  fit(&h_, M * H);
  fit(&q_, M * QD);
  fit(&k_, M * KVD);
  fit(&v_, M * KVD);
  fit(&attn_, M * QD);
  fit(&gate_, M * I);
  fit(&up_, M * I);
  const int32_t* positions = row_pos.data() + row_begin;

  kernels::Embedding(ctx_, w.embed_tokens, row_token.data() + row_begin, M, x_.data());
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    // Attention block.
    kernels::RmsNorm(ctx_, x_.data(), M, H, lw.input_norm, c.rms_norm_eps, h_.data());
    kernels::MatMul(ctx_, h_.data(), M, lw.q_proj, lw.q_bias, q_.data());
    kernels::MatMul(ctx_, h_.data(), M, lw.k_proj, lw.k_bias, k_.data());
    kernels::MatMul(ctx_, h_.data(), M, lw.v_proj, lw.v_bias, v_.data());
    if (c.qk_norm) {
      kernels::RmsNorm(ctx_, q_.data(), M * c.num_heads, D, lw.q_norm, c.rms_norm_eps, q_.data());
      kernels::RmsNorm(ctx_, k_.data(), M * c.num_kv_heads, D, lw.k_norm, c.rms_norm_eps,
                       k_.data());
    }
    kernels::Rope(ctx_, q_.data(), M, c.num_heads, D, positions, cos_.data(), sin_.data());
    kernels::Rope(ctx_, k_.data(), M, c.num_kv_heads, D, positions, cos_.data(), sin_.data());
    for (int64_t r = 0; r < M; ++r) {  // append to each sequence's cache
      Sequence* s = row_seq[row_begin + r];
      const int64_t pos = positions[r];
      std::memcpy(s->k[l].data() + pos * KVD, k_.data() + r * KVD, KVD * sizeof(float));
      std::memcpy(s->v[l].data() + pos * KVD, v_.data() + r * KVD, KVD * sizeof(float));
    }
    // Rows in parallel when there are enough of them, else the kernel splits the heads.
    auto attend = [&](const KernelContext& ctx, int64_t r, std::vector<float>* scratch) {
      const Sequence* s = row_seq[row_begin + r];
      const int64_t pos = positions[r];
      if (static_cast<int64_t>(scratch->size()) < (pos + 1) * 2) scratch->resize((pos + 1) * 2);
      kernels::Attention(ctx, q_.data() + r * QD, s->k[l].data(), s->v[l].data(), pos, c.num_heads,
                         c.num_kv_heads, D, scratch->data(), attn_.data() + r * QD);
    };
    if (M >= pool_->num_threads() && pool_->num_threads() > 1) {
      KernelContext inline_ctx = ctx_;
      inline_ctx.pool = nullptr;
      kernels::ParallelFor(pool_.get(), M, [&](int64_t b, int64_t e) {
        std::vector<float> scratch;
        for (int64_t r = b; r < e; ++r) attend(inline_ctx, r, &scratch);
      });
    } else {
      std::vector<float> scratch;
      for (int64_t r = 0; r < M; ++r) attend(ctx_, r, &scratch);
    }
    kernels::MatMul(ctx_, attn_.data(), M, lw.o_proj, nullptr, h_.data());
    kernels::Add(ctx_, x_.data(), h_.data(), M * H, x_.data());
    // MLP block (SwiGLU).
    kernels::RmsNorm(ctx_, x_.data(), M, H, lw.post_attn_norm, c.rms_norm_eps, h_.data());
    kernels::MatMul(ctx_, h_.data(), M, lw.gate_proj, nullptr, gate_.data());
    kernels::MatMul(ctx_, h_.data(), M, lw.up_proj, nullptr, up_.data());
    kernels::SiluMul(ctx_, gate_.data(), up_.data(), M * I, gate_.data());
    kernels::MatMul(ctx_, gate_.data(), M, lw.down_proj, nullptr, h_.data());
    kernels::Add(ctx_, x_.data(), h_.data(), M * H, x_.data());
    if (probe != nullptr && *probe) {
      for (int64_t r = 0; r < M; ++r) {
        if (row_out[row_begin + r] < 0) continue;
        (*probe)(row_item[row_begin + r], row_index[row_begin + r], static_cast<int>(l),
                 std::span<const float>(x_.data() + r * H, static_cast<size_t>(H)));
      }
    }
  }
  for (int64_t r = 0; r < M; ++r) {
    row_seq[row_begin + r]->length = positions[r] + 1;
    if (row_out[row_begin + r] >= 0) {
      std::memcpy(final_hidden->data() + row_out[row_begin + r] * H, x_.data() + r * H,
                  H * sizeof(float));
    }
  }
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<const Model> model,
                                               const EngineOptions& options) {
  if (model == nullptr) return InvalidArgument("engine: no model");
  if (IsCudaDevice(options.device)) return CreateCudaEngine(std::move(model), options);
  if (options.device != "cpu") {
    return InvalidArgument("unknown device '" + options.device +
                           "' (expected cpu, cuda or cuda:N)");
  }
  if (options.threads < 0) return InvalidArgument("engine: threads must be >= 0");
  return std::unique_ptr<Engine>(new CpuEngine(std::move(model), options));
}

}  // namespace trace::engine
