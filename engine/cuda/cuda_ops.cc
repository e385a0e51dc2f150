// CudaOps: the decoder graph's ops on the device (engine/cuda/cuda_ops.h).
#include "engine/cuda/cuda_ops.h"

#include <algorithm>
#include <unordered_map>

#include "engine/cuda/kv_ops.h"
#include "kernels/canonical.h"
#include "kernels/cuda/cuda_check.h"

namespace trace::engine {
namespace {

namespace kc = kernels::cuda;
using kernels::WeightView;

// Scratch of the canonical attention (scores, then probabilities): rows * heads * stride
// floats per pass; passes are cut so it stays under this. Any cut gives the same bits.
constexpr int64_t kAttentionScratchBytes = int64_t{256} << 20;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// The per-row stride of the attention scratch for a pass whose largest position is
// `max_position`: a power of two from 64, so that decode steps share a CUDA graph until the
// positions cross the next power of two. The stride is layout only (no bit depends on it).
int64_t AttentionStride(int64_t max_position) {
  int64_t stride = 64;
  while (stride < max_position + 1) stride *= 2;
  return stride;
}

}  // namespace

Status DeviceScratch::Reserve(size_t bytes, const char* what, bool* moved) {
  if (bytes <= buffer_.bytes()) return Status::Ok();
  buffer_ = kc::DeviceBuffer();  // free first: peak memory is the larger buffer alone
  TRACE_ASSIGN_OR_RETURN(buffer_, kc::DeviceBuffer::Allocate(bytes, what));
  *moved = true;
  return Status::Ok();
}

CudaOps::CudaOps(std::shared_ptr<const Model> model, const EngineOptions& options, int ordinal)
    : model_(std::move(model)),
      config_(model_->config()),
      options_(options),
      ordinal_(ordinal),
      graphs_(options.cuda_graphs) {}

CudaOps::~CudaOps() {
  graphs_.Clear();
  if (cublas_ != nullptr) kc::LoadedCublas().Destroy(cublas_);
}

Result<std::unique_ptr<CudaOps>> CudaOps::Create(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options, int ordinal) {
  std::unique_ptr<CudaOps> ops(new CudaOps(std::move(model), options, ordinal));
  TRACE_RETURN_IF_ERROR(ops->Init());
  return ops;
}

Status CudaOps::Activate() {
  // The current device is per host thread, and the driving thread may not be the creator.
  CUDA_CHECK(cudaSetDevice(ordinal_));
  return Status::Ok();
}

Result<WeightView> CudaOps::Upload(const WeightView& host, const std::string& what) {
  WeightView dev = host;
  if (host.data == nullptr) return dev;
  if (kernels::IsQuantized(host.dtype) || kernels::IsKQuant(host.dtype)) {
    return Unsupported("the CUDA backend has no kernels for quantized weights yet (" + what +
                       "): run this GGUF file with --device cpu");
  }
  const size_t bytes = kernels::WeightBytes(host.dtype, host.rows, host.cols);
  TRACE_ASSIGN_OR_RETURN(kc::DeviceBuffer buffer, kc::DeviceBuffer::Allocate(bytes, what));
  TRACE_RETURN_IF_ERROR(kc::CopyToDevice(buffer.data(), host.data, bytes));
  dev.data = buffer.data();
  weight_buffers_.push_back(std::move(buffer));
  return dev;
}

Status CudaOps::UploadRopeTables(double theta, const kernels::RopeScaling& scaling,
                                 const std::string& what, kc::DeviceBuffer* cos,
                                 kc::DeviceBuffer* sin) {
  const int64_t half = config_.head_dim / 2;
  std::vector<float> cos_host(static_cast<size_t>(options_.max_context * half));
  std::vector<float> sin_host(cos_host.size());
  kernels::MakeRopeTables(options_.max_context, config_.head_dim, theta, cos_host.data(),
                          sin_host.data(), scaling);
  TRACE_ASSIGN_OR_RETURN(*cos,
                         kc::DeviceBuffer::Allocate(cos_host.size() * 4, what + " cos table"));
  TRACE_ASSIGN_OR_RETURN(*sin,
                         kc::DeviceBuffer::Allocate(sin_host.size() * 4, what + " sin table"));
  TRACE_RETURN_IF_ERROR(kc::CopyToDevice(cos->data(), cos_host.data(), cos_host.size() * 4));
  return kc::CopyToDevice(sin->data(), sin_host.data(), sin_host.size() * 4);
}

Result<const float*> CudaOps::UploadBias(const float* host, int64_t n, const std::string& what) {
  if (host == nullptr) return static_cast<const float*>(nullptr);
  TRACE_ASSIGN_OR_RETURN(WeightView v, Upload(WeightView{host, kernels::DType::kF32, 1, n}, what));
  return static_cast<const float*>(v.data);
}

Status CudaOps::Init() {
  TRACE_RETURN_IF_ERROR(kc::UseCudaDevice(ordinal_));
  TRACE_ASSIGN_OR_RETURN(std::string name, kc::CudaDeviceDescription(ordinal_));
  description_ = "cuda:" + std::to_string(ordinal_) + " " + name;
  if (config_.head_dim > 256 || config_.head_dim % 2 != 0) {
    return Unsupported("CUDA engine: head_dim " + std::to_string(config_.head_dim) +
                       " (supported: even, at most 256)");
  }
  TRACE_ASSIGN_OR_RETURN(stream_, kc::Stream::Create());
  if (options_.numerics == kernels::Numerics::kFast) {
    // Only fast MatMul calls cuBLAS: canonical numerics never open it (cublas_loader.h), so a
    // canonical run needs neither its libraries nor its handle's device memory.
    TRACE_ASSIGN_OR_RETURN(const kc::CublasApi* blas, kc::Cublas());
    CUBLAS_CHECK(blas->Create(&cublas_));
    CUBLAS_CHECK(blas->SetStream(cublas_, stream_.get()));
    // Our own workspace, so that cuBLAS allocates nothing while a CUDA graph is captured.
    TRACE_ASSIGN_OR_RETURN(cublas_workspace_,
                           kc::DeviceBuffer::Allocate(kCublasWorkspaceBytes, "cuBLAS workspace"));
    CUBLAS_CHECK(blas->SetWorkspace(cublas_, cublas_workspace_.data(), kCublasWorkspaceBytes));
  }
  ctx_.numerics = options_.numerics;
  ctx_.stream = stream_.get();
  ctx_.cublas = cublas_;

  const ModelWeights& w = model_->weights();
  weights_.bytes = w.bytes;
  TRACE_ASSIGN_OR_RETURN(weights_.embed_tokens, Upload(w.embed_tokens, "embed_tokens"));
  TRACE_ASSIGN_OR_RETURN(weights_.final_norm, Upload(w.final_norm, "final norm"));
  if (w.lm_head.data == w.embed_tokens.data) {
    weights_.lm_head = weights_.embed_tokens;  // tied: one device copy
  } else {
    TRACE_ASSIGN_OR_RETURN(weights_.lm_head, Upload(w.lm_head, "lm_head"));
  }
  weights_.layers.resize(w.layers.size());
  const int64_t qd = config_.num_heads * config_.head_dim;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& hl = w.layers[l];
    LayerWeights& dl = weights_.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    TRACE_ASSIGN_OR_RETURN(dl.input_norm, Upload(hl.input_norm, p + "input_layernorm"));
    TRACE_ASSIGN_OR_RETURN(dl.q_proj, Upload(hl.q_proj, p + "q_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.k_proj, Upload(hl.k_proj, p + "k_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.v_proj, Upload(hl.v_proj, p + "v_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.o_proj, Upload(hl.o_proj, p + "o_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.q_norm, Upload(hl.q_norm, p + "q_norm"));
    TRACE_ASSIGN_OR_RETURN(dl.k_norm, Upload(hl.k_norm, p + "k_norm"));
    TRACE_ASSIGN_OR_RETURN(dl.ffn_norm, Upload(hl.ffn_norm, p + "feed-forward norm"));
    TRACE_ASSIGN_OR_RETURN(dl.attn_out_norm, Upload(hl.attn_out_norm, p + "attention output norm"));
    TRACE_ASSIGN_OR_RETURN(dl.ffn_out_norm,
                           Upload(hl.ffn_out_norm, p + "feed-forward output norm"));
    TRACE_ASSIGN_OR_RETURN(dl.gate_proj, Upload(hl.gate_proj, p + "gate_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.up_proj, Upload(hl.up_proj, p + "up_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.down_proj, Upload(hl.down_proj, p + "down_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.q_bias, UploadBias(hl.q_bias, qd, p + "q bias"));
    TRACE_ASSIGN_OR_RETURN(dl.k_bias, UploadBias(hl.k_bias, KvWidth(), p + "k bias"));
    TRACE_ASSIGN_OR_RETURN(dl.v_bias, UploadBias(hl.v_bias, KvWidth(), p + "v bias"));
    if (!hl.moe.experts.empty()) TRACE_RETURN_IF_ERROR(UploadMoe(hl.moe, p, &dl.moe));
  }
  // RoPE tables: computed once on the host in double (the CPU engine's function), shared;
  // Gemma 3's local layers have a second pair (rope_local_theta, no scaling).
  TRACE_RETURN_IF_ERROR(
      UploadRopeTables(config_.rope_theta, config_.rope_scaling, "rope", &cos_, &sin_));
  if (config_.rope_local_theta > 0) {
    TRACE_RETURN_IF_ERROR(
        UploadRopeTables(config_.rope_local_theta, {}, "local rope", &local_cos_, &local_sin_));
  }
  return Status::Ok();
}

Status CudaOps::UploadMoe(const MoeWeights& host, const std::string& what, MoeWeights* dev) {
  TRACE_ASSIGN_OR_RETURN(dev->router, Upload(host.router, what + "router"));
  dev->experts.resize(host.experts.size());
  const size_t E = host.experts.size();
  std::vector<const void*> gate(E), up(E), down(E);
  bool aligned = true;
  for (size_t e = 0; e < E; ++e) {
    const ExpertWeights& he = host.experts[e];
    ExpertWeights& de = dev->experts[e];
    const std::string x = what + "expert " + std::to_string(e) + " ";
    TRACE_ASSIGN_OR_RETURN(de.gate_proj, Upload(he.gate_proj, x + "gate_proj"));
    TRACE_ASSIGN_OR_RETURN(de.up_proj, Upload(he.up_proj, x + "up_proj"));
    TRACE_ASSIGN_OR_RETURN(de.down_proj, Upload(he.down_proj, x + "down_proj"));
    gate[e] = de.gate_proj.data;
    up[e] = de.up_proj.data;
    down[e] = de.down_proj.data;
    for (const void* p : {gate[e], up[e], down[e]}) {
      aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
    }
  }
  const ExpertWeights& hs = host.shared_expert;
  TRACE_ASSIGN_OR_RETURN(dev->shared_expert.gate_proj,
                         Upload(hs.gate_proj, what + "shared gate_proj"));
  TRACE_ASSIGN_OR_RETURN(dev->shared_expert.up_proj, Upload(hs.up_proj, what + "shared up_proj"));
  TRACE_ASSIGN_OR_RETURN(dev->shared_expert.down_proj,
                         Upload(hs.down_proj, what + "shared down_proj"));
  TRACE_ASSIGN_OR_RETURN(dev->shared_expert_gate,
                         Upload(host.shared_expert_gate, what + "shared_expert_gate"));
  ExpertTables& t = expert_tables_[dev];
  t.vector_ok = aligned;
  for (auto [table, ptrs] : {std::pair{&t.gate, &gate}, {&t.up, &up}, {&t.down, &down}}) {
    TRACE_ASSIGN_OR_RETURN(*table,
                           kc::DeviceBuffer::Allocate(E * sizeof(const void*), "expert table"));
    TRACE_RETURN_IF_ERROR(kc::CopyToDevice(table->data(), ptrs->data(), E * sizeof(const void*)));
  }
  return Status::Ok();
}

float* CudaOps::KCache(const Seq& s, int64_t layer) const {
  return s.cache.buffer.as<float>() + (2 * layer) * s.capacity * KvWidth();
}

float* CudaOps::VCache(const Seq& s, int64_t layer) const {
  return s.cache.buffer.as<float>() + (2 * layer + 1) * s.capacity * KvWidth();
}

Status CudaOps::GrowCache(Seq* s, int64_t capacity) {
  const int64_t layers = config_.num_layers;
  const size_t bytes = static_cast<size_t>(2 * layers * capacity * KvWidth()) * sizeof(float);
  TRACE_ASSIGN_OR_RETURN(kc::DeviceBuffer grown, kc::DeviceBuffer::Allocate(bytes, "KV cache"));
  if (s->length > 0) {
    const size_t keep = static_cast<size_t>(s->length * KvWidth()) * sizeof(float);
    for (int64_t part = 0; part < 2 * layers; ++part) {
      TRACE_RETURN_IF_ERROR(kc::CopyDeviceToDeviceAsync(
          grown.as<float>() + part * capacity * KvWidth(),
          s->cache.buffer.as<float>() + part * s->capacity * KvWidth(), keep, stream_.get()));
    }
    TRACE_RETURN_IF_ERROR(stream_.Synchronize());  // the old buffer is freed below
  }
  s->cache.buffer = std::move(grown);
  s->capacity = capacity;
  return Status::Ok();
}

Status CudaOps::CopyCache(const Seq& from, Seq* to, int64_t n) {
  const size_t bytes = static_cast<size_t>(n * KvWidth()) * sizeof(float);
  if (bytes == 0) return Status::Ok();
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    TRACE_RETURN_IF_ERROR(
        kc::CopyDeviceToDeviceAsync(KCache(*to, l), KCache(from, l), bytes, stream_.get()));
    TRACE_RETURN_IF_ERROR(
        kc::CopyDeviceToDeviceAsync(VCache(*to, l), VCache(from, l), bytes, stream_.get()));
  }
  return Status::Ok();
}

bool CudaOps::PassFits(int64_t rows, int64_t max_position) const {
  return rows * config_.num_heads * AttentionStride(max_position) * 4 <= kAttentionScratchBytes;
}

Status CudaOps::Reserve(DeviceScratch* s, size_t bytes, const char* what) {
  bool moved = false;
  TRACE_RETURN_IF_ERROR(s->Reserve(bytes, what, &moved));
  if (moved) {
    ++generation_;
    graphs_.Clear();
  }
  return Status::Ok();
}

Status CudaOps::BeginPass(const PassT& pass, const LayerProbe* probe, const RouteProbe* route_probe,
                          graph::PassBuffers* b) {
  pass_ = &pass;
  probe_ = probe != nullptr && *probe ? probe : nullptr;
  route_probe_ = route_probe != nullptr && *route_probe ? route_probe : nullptr;
  const int64_t M = pass.size();
  rows_ = M;
  scratch_stride_ = AttentionStride(pass.max_position);
  const int64_t L = config_.num_layers, H = config_.hidden_size;
  const int64_t I = std::max(config_.intermediate_size, config_.shared_expert_intermediate_size);
  const int64_t QD = config_.num_heads * config_.head_dim, KVD = KvWidth();
  const size_t f = sizeof(float);
  TRACE_RETURN_IF_ERROR(Reserve(&x_, M * H * f, "activations x"));
  TRACE_RETURN_IF_ERROR(Reserve(&h_, M * H * f, "activations h"));
  TRACE_RETURN_IF_ERROR(Reserve(&q_, M * QD * f, "activations q"));
  TRACE_RETURN_IF_ERROR(Reserve(&k_, M * KVD * f, "activations k"));
  TRACE_RETURN_IF_ERROR(Reserve(&v_, M * KVD * f, "activations v"));
  TRACE_RETURN_IF_ERROR(Reserve(&attn_, M * QD * f, "activations attention"));
  TRACE_RETURN_IF_ERROR(Reserve(&gate_, M * I * f, "activations gate"));
  TRACE_RETURN_IF_ERROR(Reserve(&up_, M * I * f, "activations up"));
  TRACE_RETURN_IF_ERROR(Reserve(&tokens_, M * sizeof(int32_t), "token ids"));
  TRACE_RETURN_IF_ERROR(Reserve(&positions_, M * sizeof(int32_t), "positions"));
  TRACE_RETURN_IF_ERROR(Reserve(&cache_ptrs_, 2 * L * M * sizeof(float*), "cache pointers"));
  TRACE_RETURN_IF_ERROR(
      Reserve(&attn_scratch_, M * config_.num_heads * scratch_stride_ * f, "attention scratch"));
  if (options_.numerics == kernels::Numerics::kFast) {
    // Fast MatMul converts activations to bf16 here: the widest layer input or LM head chunk.
    const int64_t widest = std::max({H, I, QD});
    TRACE_RETURN_IF_ERROR(
        Reserve(&work_, std::max(M, MaxLogitRowsPerChunk()) * widest * 2, "fast matmul workspace"));
    ctx_.workspace = work_.as<void>();
    ctx_.workspace_bytes = work_.bytes();
  }
  // Per-row metadata: token ids, positions, and each row's K and V cache per layer. The
  // host arrays stay valid until EndPass synchronises.
  host_tokens_.resize(static_cast<size_t>(M));
  host_positions_.resize(static_cast<size_t>(M));
  host_cache_ptrs_.resize(static_cast<size_t>(2 * L * M));
  for (int64_t r = 0; r < M; ++r) {
    host_tokens_[r] = pass.rows[r].token;
    host_positions_[r] = pass.rows[r].position;
    for (int64_t l = 0; l < L; ++l) {
      host_cache_ptrs_[(2 * l) * M + r] = KCache(*pass.rows[r].seq, l);
      host_cache_ptrs_[(2 * l + 1) * M + r] = VCache(*pass.rows[r].seq, l);
    }
  }
  cudaStream_t stream = stream_.get();
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(tokens_.as<int32_t>(), host_tokens_.data(),
                                              M * sizeof(int32_t), stream));
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(positions_.as<int32_t>(), host_positions_.data(),
                                              M * sizeof(int32_t), stream));
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(cache_ptrs_.as<float*>(), host_cache_ptrs_.data(),
                                              host_cache_ptrs_.size() * sizeof(float*), stream));
  *b = graph::PassBuffers{x_.as<float>(), h_.as<float>(),    q_.as<float>(),    k_.as<float>(),
                          v_.as<float>(), attn_.as<float>(), gate_.as<float>(), up_.as<float>()};
  if (config_.num_experts > 0) {
    const int64_t E = config_.num_experts, K = config_.num_experts_per_tok;
    const int64_t W = config_.moe_intermediate_size, S = M * K;
    const size_t i32 = sizeof(int32_t);
    TRACE_RETURN_IF_ERROR(Reserve(&router_, M * E * f, "router logits"));
    TRACE_RETURN_IF_ERROR(Reserve(&probs_, M * E * f, "router probabilities"));
    TRACE_RETURN_IF_ERROR(Reserve(&route_ids_, S * i32, "routes"));
    TRACE_RETURN_IF_ERROR(Reserve(&route_weights_, S * f, "route weights"));
    TRACE_RETURN_IF_ERROR(Reserve(&rank_, S * i32, "route ranks"));
    TRACE_RETURN_IF_ERROR(Reserve(&load_, E * i32, "expert loads"));
    TRACE_RETURN_IF_ERROR(Reserve(&offsets_, (E + 1) * i32, "expert offsets"));
    TRACE_RETURN_IF_ERROR(Reserve(&order_, S * i32, "expert order"));
    TRACE_RETURN_IF_ERROR(Reserve(&expert_gate_, S * W * f, "expert gate"));
    TRACE_RETURN_IF_ERROR(Reserve(&expert_up_, S * W * f, "expert up"));
    TRACE_RETURN_IF_ERROR(Reserve(&expert_out_, S * H * f, "expert outputs"));
    b->router = router_.as<float>();
    b->route_ids = route_ids_.as<int32_t>();
    b->route_weights = route_weights_.as<float>();
    b->expert_out = expert_out_.as<float>();
    if (config_.shared_expert_intermediate_size > 0) {
      TRACE_RETURN_IF_ERROR(Reserve(&shared_out_, M * H * f, "shared expert output"));
      TRACE_RETURN_IF_ERROR(Reserve(&shared_gate_, M * f, "shared expert gate"));
      b->shared_out = shared_out_.as<float>();
      b->shared_gate = shared_gate_.as<float>();
    }
  }
  return Status::Ok();
}

void CudaOps::Embedding(int64_t rows, float* out) {
  kc::Embedding(ctx_, weights_.embed_tokens, tokens_.as<int32_t>(), rows, out,
                config_.embedding_scale);
}

void CudaOps::RmsNorm(const float* x, int64_t rows, int64_t width, const WeightView& w, float eps,
                      float* out) {
  kc::RmsNorm(ctx_, x, rows, width, w, eps, out);
}

void CudaOps::MatMul(const float* x, int64_t rows, const WeightView& w, const float* bias,
                     float* y) {
  kc::MatMul(ctx_, x, rows, w, bias, y);
}

void CudaOps::Rope(int64_t layer, float* x, int64_t rows, int64_t heads) {
  const bool local = config_.UsesLocalRope(layer);
  kc::Rope(ctx_, x, rows, heads, config_.head_dim, positions_.as<int32_t>(),
           (local ? local_cos_ : cos_).as<float>(), (local ? local_sin_ : sin_).as<float>());
}

void CudaOps::AppendKv(int64_t layer, const float* k, const float* v) {
  float* const* rows_k = cache_ptrs_.as<float*>() + (2 * layer) * rows_;
  float* const* rows_v = cache_ptrs_.as<float*>() + (2 * layer + 1) * rows_;
  cuda::ScatterRows(stream_.get(), k, rows_, KvWidth(), rows_k, positions_.as<int32_t>());
  cuda::ScatterRows(stream_.get(), v, rows_, KvWidth(), rows_v, positions_.as<int32_t>());
}

void CudaOps::Attention(int64_t layer, const float* q, int64_t rows, float* out) {
  const float* const* rows_k = cache_ptrs_.as<const float*>() + (2 * layer) * rows_;
  const float* const* rows_v = cache_ptrs_.as<const float*>() + (2 * layer + 1) * rows_;
  kc::AttentionRows(ctx_, q, rows, rows_k, rows_v, positions_.as<int32_t>(), config_.num_heads,
                    config_.num_kv_heads, config_.head_dim,
                    kernels::canonical::AttentionScale(config_.attention_scale_dim),
                    config_.IsSlidingLayer(layer) ? config_.sliding_window : 0,
                    attn_scratch_.as<float>(), scratch_stride_, out);
}

void CudaOps::Add(const float* a, const float* b, int64_t n, float* y) {
  kc::Add(ctx_, a, b, n, y);
}

void CudaOps::SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  kc::SiluMul(ctx_, gate, up, n, out);
}

void CudaOps::GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  kc::GeluTanhMul(ctx_, gate, up, n, out);
}

void CudaOps::MoeRoute(const float* logits, int64_t rows, int32_t* ids, float* weights) {
  kc::MoeRoute(ctx_, logits, rows, config_.num_experts, config_.num_experts_per_tok,
               config_.norm_topk_prob,
               kc::MoeRouteScratch{probs_.as<float>(), rank_.as<int32_t>(), load_.as<int32_t>()},
               ids, weights);
}

// Group the pass's (row, slot) pairs by expert on the device, then each expert's SwiGLU of
// its slots: gate and up from the slot's row of h, SiluMul, down. Rows are independent, so
// the bits are those of the CPU's grouped MatMuls. (Canonical and fast alike: fast numerics
// differ in routing, by capacity, not in the experts' matrices.)
void CudaOps::MoeExperts(const MoeWeights& moe, const float* h, int64_t rows, const int32_t* ids,
                         float* expert_out) {
  const int64_t K = config_.num_experts_per_tok, S = rows * K;
  const int64_t H = config_.hidden_size, W = config_.moe_intermediate_size;
  const ExpertTables& t = expert_tables_.at(&moe);
  const kernels::DType dtype = moe.experts[0].gate_proj.dtype;
  const int32_t* order = order_.as<int32_t>();
  const int64_t elem = static_cast<int64_t>(kernels::DTypeSize(dtype));
  const bool in_ok = t.vector_ok && (H * elem) % 16 == 0 && H % 4 == 0;
  const bool mid_ok = t.vector_ok && (W * elem) % 16 == 0 && W % 4 == 0;
  kc::MoeGroup(ctx_, ids, S, config_.num_experts, offsets_.as<int32_t>(), order_.as<int32_t>());
  kc::MoeExpertMatMul(ctx_, h, K, order, ids, S, t.gate.as<const void*>(), dtype, W, H, in_ok,
                      expert_gate_.as<float>());
  kc::MoeExpertMatMul(ctx_, h, K, order, ids, S, t.up.as<const void*>(), dtype, W, H, in_ok,
                      expert_up_.as<float>());
  kc::SiluMul(ctx_, expert_gate_.as<float>(), expert_up_.as<float>(), S * W,
              expert_gate_.as<float>());
  kc::MoeExpertMatMul(ctx_, expert_gate_.as<float>(), 1, order, ids, S, t.down.as<const void*>(),
                      dtype, H, W, mid_ok, expert_out);
}

void CudaOps::MoeCombine(const float* expert_out, const int32_t* ids, const float* weights,
                         int64_t rows, float* out) {
  kc::MoeCombine(ctx_, expert_out, ids, weights, rows, config_.num_experts_per_tok,
                 config_.hidden_size, out);
}

void CudaOps::MoeAddShared(const float* shared_out, const float* gate_logits, int64_t rows,
                           float* out) {
  kc::MoeAddShared(ctx_, shared_out, gate_logits, rows, config_.hidden_size, out);
}

Status CudaOps::AfterLayer(int64_t layer, const float* x, const int32_t* route_ids) {
  TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("layer kernels"));
  const bool routes = route_probe_ != nullptr && route_ids != nullptr;
  if (probe_ == nullptr && !routes) return Status::Ok();
  const int64_t H = config_.hidden_size, k = config_.num_experts_per_tok;
  host_row_.resize(static_cast<size_t>(H));
  host_route_.resize(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows_; ++r) {
    const auto& row = pass_->rows[r];
    if (row.out_row < 0) continue;
    if (probe_ != nullptr) {
      TRACE_RETURN_IF_ERROR(
          kc::CopyToHostAsync(host_row_.data(), x + r * H, H * sizeof(float), stream_.get()));
      TRACE_RETURN_IF_ERROR(stream_.Synchronize());
      (*probe_)(row.item, row.index, static_cast<int>(layer),
                std::span<const float>(host_row_.data(), static_cast<size_t>(H)));
    }
    if (routes) {
      TRACE_RETURN_IF_ERROR(kc::CopyToHostAsync(host_route_.data(), route_ids + r * k,
                                                k * sizeof(int32_t), stream_.get()));
      TRACE_RETURN_IF_ERROR(stream_.Synchronize());
      (*route_probe_)(row.item, row.index, static_cast<int>(layer),
                      std::span<const int32_t>(host_route_.data(), static_cast<size_t>(k)));
    }
  }
  return Status::Ok();
}

Status CudaOps::ReserveOutputRows(int64_t rows) {
  bool moved = false;  // not captured by any graph
  return hidden_out_.Reserve(std::max<int64_t>(rows, 1) * config_.hidden_size * sizeof(float),
                             "final hidden states", &moved);
}

Status CudaOps::EndPass(const PassT& pass, const float* x) {
  // Rows whose logits were asked for go to their slot among the output rows; those of one
  // pass are consecutive (rows are in item order), so one gather at the first does it.
  host_gather_.clear();
  int64_t first_out = -1;
  for (int64_t r = 0; r < pass.size(); ++r) {
    if (pass.rows[r].out_row < 0) continue;
    if (first_out < 0) first_out = pass.rows[r].out_row;
    host_gather_.push_back(static_cast<int32_t>(r));
  }
  if (!host_gather_.empty()) {
    bool moved = false;  // not captured by any graph
    TRACE_RETURN_IF_ERROR(
        gather_index_.Reserve(host_gather_.size() * sizeof(int32_t), "gather index", &moved));
    TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(gather_index_.as<int32_t>(), host_gather_.data(),
                                                host_gather_.size() * sizeof(int32_t),
                                                stream_.get()));
    cuda::GatherRows(stream_.get(), x, gather_index_.as<int32_t>(),
                     static_cast<int64_t>(host_gather_.size()), config_.hidden_size,
                     hidden_out_.as<float>() + first_out * config_.hidden_size);
    TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("gather of output rows"));
  }
  pass_ = nullptr;
  // The host arrays of this pass's async copies must outlive the copies.
  return stream_.Synchronize();
}

Status CudaOps::Logits(int64_t first, int64_t rows, float* host_logits) {
  bool moved = false;  // not captured by any graph
  TRACE_RETURN_IF_ERROR(logits_.Reserve(MaxLogitRowsPerChunk() * config_.vocab_size * sizeof(float),
                                        "logits", &moved));
  float* hidden = hidden_out_.as<float>() + first * config_.hidden_size;
  kc::RmsNorm(ctx_, hidden, rows, config_.hidden_size, weights_.final_norm, config_.rms_norm_eps,
              hidden);
  kc::MatMul(ctx_, hidden, rows, weights_.lm_head, nullptr, logits_.as<float>());
  TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("LM head"));
  TRACE_RETURN_IF_ERROR(kc::CopyToHostAsync(
      host_logits, logits_.as<float>(), rows * config_.vocab_size * sizeof(float), stream_.get()));
  return stream_.Synchronize();
}

}  // namespace trace::engine
