// CpuOps: the decoder graph's ops on the host (engine/cpu/cpu_ops.h). Every op is one call of
// kernels/kernels.h; batch invariance comes from the kernels, each of which computes a row
// from that row's inputs alone in the contract's order.
#include "engine/cpu/cpu_ops.h"

#include "kernels/canonical.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

namespace trace::engine {
namespace {

// MADV_DONTNEED on the whole pages inside [data, data + size) of a read-only file mapping:
// the kernel drops them and would fault them back in from the file.
void DropMappedPages(const void* data, size_t size) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void Fit(std::vector<float>* b, int64_t n) {
  if (static_cast<int64_t>(b->size()) < n) b->resize(static_cast<size_t>(n));
}

}  // namespace

CpuOps::CpuOps(std::shared_ptr<const Model> model, const EngineOptions& options)
    : model_(std::move(model)), config_(model_->config()), options_(options) {
  pool_ = kernels::ThreadPool::Create(options_.threads);
  ctx_.numerics = options_.numerics;
  ctx_.impl = options_.impl;
  ctx_.pool = pool_.get();
  const int64_t half = config_.head_dim / 2;
  cos_.resize(static_cast<size_t>(options_.max_context * half));
  sin_.resize(cos_.size());
  kernels::MakeRopeTables(options_.max_context, config_.head_dim, config_.rope_theta, cos_.data(),
                          sin_.data(), config_.rope_scaling);
  if (config_.rope_local_theta > 0) {  // no scaling on the local layers (transformers' Gemma 3)
    local_cos_.resize(cos_.size());
    local_sin_.resize(cos_.size());
    kernels::MakeRopeTables(options_.max_context, config_.head_dim, config_.rope_local_theta,
                            local_cos_.data(), local_sin_.data());
  }
  RepackWeights();
}

std::string CpuOps::DeviceDescription() const {
  return std::string("cpu ") + kernels::CpuIsaPathName(options_.impl) + " x" +
         std::to_string(options_.threads);
}

// Copies every matrix into the kInterleaved32 layout (kernels/kernels.h), which lets the AVX2
// MatMul read 8 output columns per load: the same bits as row-major (the layout does not
// change the order of any sum), and decode streams the weights ~2x faster. Both numerics
// modes get the same layout so that canonical vs fast compares reduction order alone. Each
// source tensor's mapped pages are dropped right after its copy, so peak memory stays near
// one copy of the weights (the mapping re-reads from the file if a caller touches it again).
// A tied embedding / LM head is copied once.
void CpuOps::RepackWeights() {
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
    DropMappedPages(w->data, kernels::WeightBytes(w->dtype, w->rows, w->cols));
    done.emplace(w->data, packed);
    *w = packed;
  };
  repack(&weights_.embed_tokens);
  repack(&weights_.lm_head);
  for (LayerWeights& lw : weights_.layers) {
    for (kernels::WeightView* w : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj,
                                   &lw.up_proj, &lw.down_proj, &lw.moe.router}) {
      repack(w);
    }
    for (ExpertWeights& ew : lw.moe.experts) {
      for (kernels::WeightView* w : {&ew.gate_proj, &ew.up_proj, &ew.down_proj}) repack(w);
    }
    ExpertWeights& se = lw.moe.shared_expert;
    for (kernels::WeightView* w :
         {&se.gate_proj, &se.up_proj, &se.down_proj, &lw.moe.shared_expert_gate}) {
      repack(w);
    }
  }
}

Status CpuOps::GrowCache(Seq* s, int64_t capacity) {
  const size_t layers = static_cast<size_t>(config_.num_layers);
  s->cache.k.resize(layers);
  s->cache.v.resize(layers);
  const size_t keep = static_cast<size_t>(s->length * KvWidth());
  for (size_t l = 0; l < layers; ++l) {
    for (auto* cache : {&s->cache.k[l], &s->cache.v[l]}) {
      std::vector<float> grown(static_cast<size_t>(capacity * KvWidth()));
      std::copy_n(cache->data(), std::min(keep, cache->size()), grown.data());
      cache->swap(grown);
    }
  }
  s->capacity = capacity;
  return Status::Ok();
}

Status CpuOps::CopyCache(const Seq& from, Seq* to, int64_t n) {
  const size_t count = static_cast<size_t>(n * KvWidth());
  for (size_t l = 0; l < to->cache.k.size() && count > 0; ++l) {
    std::copy_n(from.cache.k[l].data(), count, to->cache.k[l].data());
    std::copy_n(from.cache.v[l].data(), count, to->cache.v[l].data());
  }
  return Status::Ok();
}

Status CpuOps::BeginPass(const PassT& pass, const LayerProbe* probe, const RouteProbe* route_probe,
                         graph::PassBuffers* b) {
  pass_ = &pass;
  probe_ = probe != nullptr && *probe ? probe : nullptr;
  route_probe_ = route_probe != nullptr && *route_probe ? route_probe : nullptr;
  const int64_t M = pass.size();
  tokens_.resize(static_cast<size_t>(M));
  positions_.resize(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) {
    tokens_[r] = pass.rows[r].token;
    positions_[r] = pass.rows[r].position;
  }
  const int64_t H = config_.hidden_size;
  const int64_t I = std::max(config_.intermediate_size, config_.shared_expert_intermediate_size);
  const int64_t QD = config_.num_heads * config_.head_dim, KVD = KvWidth();
  for (auto [buffer, width] : {std::pair{&x_, H},
                               {&h_, H},
                               {&q_, QD},
                               {&k_, KVD},
                               {&v_, KVD},
                               {&attn_, QD},
                               {&gate_, I},
                               {&up_, I}}) {
    Fit(buffer, M * width);
  }
  *b = graph::PassBuffers{x_.data(), h_.data(),    q_.data(),    k_.data(),
                          v_.data(), attn_.data(), gate_.data(), up_.data()};
  if (config_.num_experts > 0) {
    const int64_t E = config_.num_experts, K = config_.num_experts_per_tok;
    Fit(&router_, M * E);
    Fit(&route_weights_, M * K);
    Fit(&expert_out_, M * K * H);
    if (static_cast<int64_t>(route_ids_.size()) < M * K) route_ids_.resize(M * K);
    b->router = router_.data();
    b->route_ids = route_ids_.data();
    b->route_weights = route_weights_.data();
    b->expert_out = expert_out_.data();
    if (config_.shared_expert_intermediate_size > 0) {
      Fit(&shared_out_, M * H);
      Fit(&shared_gate_, M);
      b->shared_out = shared_out_.data();
      b->shared_gate = shared_gate_.data();
    }
  }
  return Status::Ok();
}

void CpuOps::Embedding(int64_t rows, float* out) {
  kernels::Embedding(ctx_, weights_.embed_tokens, tokens_.data(), rows, out,
                     config_.embedding_scale);
}

void CpuOps::RmsNorm(const float* x, int64_t rows, int64_t width, const kernels::WeightView& w,
                     float eps, float* out) {
  kernels::RmsNorm(ctx_, x, rows, width, w, eps, out);
}

void CpuOps::MatMul(const float* x, int64_t rows, const kernels::WeightView& w, const float* bias,
                    float* y) {
  kernels::MatMul(ctx_, x, rows, w, bias, y);
}

void CpuOps::Rope(int64_t layer, float* x, int64_t rows, int64_t heads) {
  const bool local = config_.UsesLocalRope(layer);
  kernels::Rope(ctx_, x, rows, heads, config_.head_dim, positions_.data(),
                (local ? local_cos_ : cos_).data(), (local ? local_sin_ : sin_).data());
}

void CpuOps::AppendKv(int64_t layer, const float* k, const float* v) {
  const int64_t KVD = KvWidth();
  for (int64_t r = 0; r < pass_->size(); ++r) {
    Seq* s = pass_->rows[r].seq;
    const int64_t pos = positions_[r];
    std::memcpy(s->cache.k[layer].data() + pos * KVD, k + r * KVD, KVD * sizeof(float));
    std::memcpy(s->cache.v[layer].data() + pos * KVD, v + r * KVD, KVD * sizeof(float));
  }
}

void CpuOps::Attention(int64_t layer, const float* q, int64_t rows, float* out) {
  const int64_t QD = config_.num_heads * config_.head_dim, KVD = KvWidth();
  const float scale = kernels::canonical::AttentionScale(config_.attention_scale_dim);
  // Rows in parallel when there are enough of them, else the kernel splits the heads. A
  // sliding layer's row attends to the cache from the first position of its window on.
  auto attend = [&](const kernels::KernelContext& ctx, int64_t r, std::vector<float>* scratch) {
    const Seq* s = pass_->rows[r].seq;
    const int64_t first = config_.FirstVisiblePosition(layer, positions_[r]);
    const int64_t pos = positions_[r] - first;
    if (static_cast<int64_t>(scratch->size()) < (pos + 1) * 2) scratch->resize((pos + 1) * 2);
    kernels::Attention(ctx, q + r * QD, s->cache.k[layer].data() + first * KVD,
                       s->cache.v[layer].data() + first * KVD, pos, config_.num_heads,
                       config_.num_kv_heads, config_.head_dim, scale, scratch->data(),
                       out + r * QD);
  };
  if (rows >= pool_->num_threads() && pool_->num_threads() > 1) {
    kernels::KernelContext inline_ctx = ctx_;
    inline_ctx.pool = nullptr;
    // One row a chunk, the last (longest: a prefill row attends to every position before it)
    // first, so that the threads finish together.
    kernels::ParallelFor(pool_.get(), rows, /*grain=*/1, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> scratch;
      for (int64_t i = b; i < e; ++i) attend(inline_ctx, rows - 1 - i, &scratch);
    });
  } else {
    std::vector<float> scratch;
    for (int64_t r = 0; r < rows; ++r) attend(ctx_, r, &scratch);
  }
}

void CpuOps::Add(const float* a, const float* b, int64_t n, float* y) {
  kernels::Add(ctx_, a, b, n, y);
}

void CpuOps::SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  kernels::SiluMul(ctx_, gate, up, n, out);
}

void CpuOps::GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  kernels::GeluTanhMul(ctx_, gate, up, n, out);
}

void CpuOps::MoeRoute(const float* logits, int64_t rows, int32_t* ids, float* weights) {
  kernels::MoeRoute(ctx_, logits, rows, config_.num_experts, config_.num_experts_per_tok,
                    config_.norm_topk_prob, ids, weights);
}

void CpuOps::MoeExperts(const MoeWeights& moe, const float* h, int64_t rows, const int32_t* ids,
                        float* expert_out) {
  const int64_t E = config_.num_experts, K = config_.num_experts_per_tok;
  const int64_t H = config_.hidden_size, W = config_.moe_intermediate_size;
  expert_slots_.resize(static_cast<size_t>(E));
  for (auto& slots : expert_slots_) slots.clear();
  for (int64_t s = 0; s < rows * K; ++s) {
    if (ids[s] >= 0) expert_slots_[static_cast<size_t>(ids[s])].push_back(s);
  }
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int64_t>& slots = expert_slots_[static_cast<size_t>(e)];
    const int64_t n = static_cast<int64_t>(slots.size());
    if (n == 0) continue;
    Fit(&block_x_, n * H);
    Fit(&block_gate_, n * W);
    Fit(&block_up_, n * W);
    Fit(&block_y_, n * H);
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(block_x_.data() + r * H, h + (slots[r] / K) * H, H * sizeof(float));
    }
    const ExpertWeights& ew = moe.experts[static_cast<size_t>(e)];
    kernels::MatMul(ctx_, block_x_.data(), n, ew.gate_proj, nullptr, block_gate_.data());
    kernels::MatMul(ctx_, block_x_.data(), n, ew.up_proj, nullptr, block_up_.data());
    kernels::SiluMul(ctx_, block_gate_.data(), block_up_.data(), n * W, block_gate_.data());
    kernels::MatMul(ctx_, block_gate_.data(), n, ew.down_proj, nullptr, block_y_.data());
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(expert_out + slots[r] * H, block_y_.data() + r * H, H * sizeof(float));
    }
  }
}

void CpuOps::MoeCombine(const float* expert_out, const int32_t* ids, const float* weights,
                        int64_t rows, float* out) {
  kernels::MoeCombine(ctx_, expert_out, ids, weights, rows, config_.num_experts_per_tok,
                      config_.hidden_size, out);
}

void CpuOps::MoeAddShared(const float* shared_out, const float* gate_logits, int64_t rows,
                          float* out) {
  kernels::MoeAddShared(ctx_, shared_out, gate_logits, rows, config_.hidden_size, out);
}

Status CpuOps::AfterLayer(int64_t layer, const float* x, const int32_t* route_ids) {
  if (probe_ == nullptr && (route_probe_ == nullptr || route_ids == nullptr)) return Status::Ok();
  const int64_t H = config_.hidden_size, k = config_.num_experts_per_tok;
  for (int64_t r = 0; r < pass_->size(); ++r) {
    const auto& row = pass_->rows[r];
    if (row.out_row < 0) continue;
    if (probe_ != nullptr) {
      (*probe_)(row.item, row.index, static_cast<int>(layer),
                std::span<const float>(x + r * H, static_cast<size_t>(H)));
    }
    if (route_probe_ != nullptr && route_ids != nullptr) {
      (*route_probe_)(row.item, row.index, static_cast<int>(layer),
                      std::span<const int32_t>(route_ids + r * k, static_cast<size_t>(k)));
    }
  }
  return Status::Ok();
}

Status CpuOps::ReserveOutputRows(int64_t rows) {
  final_hidden_.assign(static_cast<size_t>(rows * config_.hidden_size), 0.0f);
  return Status::Ok();
}

Status CpuOps::EndPass(const PassT& pass, const float* x) {
  const int64_t H = config_.hidden_size;
  for (int64_t r = 0; r < pass.size(); ++r) {
    const int64_t out = pass.rows[r].out_row;
    if (out >= 0) std::memcpy(final_hidden_.data() + out * H, x + r * H, H * sizeof(float));
  }
  pass_ = nullptr;
  return Status::Ok();
}

Status CpuOps::Logits(int64_t first, int64_t rows, float* host_logits) {
  float* hidden = final_hidden_.data() + first * config_.hidden_size;
  kernels::RmsNorm(ctx_, hidden, rows, config_.hidden_size, weights_.final_norm,
                   config_.rms_norm_eps, hidden);
  kernels::MatMul(ctx_, hidden, rows, weights_.lm_head, nullptr, host_logits);
  return Status::Ok();
}

}  // namespace trace::engine
