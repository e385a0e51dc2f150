// The CUDA engine: the CPU engine's forward pass (engine/cpu_engine.cc) op for op, every
// op a kernels/cuda call on one stream, so that in canonical numerics its logits are the
// CPU's bit for bit. Weights are uploaded once in their stored dtype; each sequence owns
// one device buffer holding its K and V caches for every layer; activations are reused
// device buffers; only token ids, positions, cache pointers and the requested logits
// cross the bus.
#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "engine/batch_validation.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/kv_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"

namespace trace::engine {
namespace {

namespace kc = kernels::cuda;
using kernels::WeightView;

// Scratch of the canonical attention (scores and probabilities): rows * heads * (max
// position + 1) floats per pass; passes are cut so it stays under this. Any cut gives
// the same bits (each row is computed alone).
constexpr int64_t kAttentionScratchBytes = int64_t{256} << 20;
constexpr int64_t kMaxRowsPerPass = 1024;
constexpr int64_t kMaxLogitRowsPerPass = 256;

// A growable device buffer of floats (or bytes), reallocated only to grow.
class Scratch {
 public:
  Status Reserve(size_t bytes, const char* what) {
    if (bytes <= buffer_.bytes()) return Status::Ok();
    buffer_ = kc::DeviceBuffer();  // free first: peak memory is the larger buffer alone
    TRACE_ASSIGN_OR_RETURN(buffer_, kc::DeviceBuffer::Allocate(bytes, what));
    return Status::Ok();
  }
  template <typename T>
  T* as() const {
    return buffer_.as<T>();
  }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  kc::DeviceBuffer buffer_;
};

struct DeviceSequence {
  int64_t length = 0;
  int64_t capacity = 0;
  kc::DeviceBuffer cache;  // [layer][k|v][capacity][kv_width] f32
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(std::shared_ptr<const Model> model, const EngineOptions& options, int ordinal)
      : model_(std::move(model)), options_(options), ordinal_(ordinal) {}
  ~CudaEngine() override {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
  }

  Status Init();

  const Model& model() const override { return *model_; }
  const EngineOptions& options() const override { return options_; }
  std::string DeviceDescription() const override { return description_; }

  SeqId NewSequence() override {
    SeqId id = next_id_++;
    seqs_[id];
    return id;
  }
  void FreeSequence(SeqId seq) override { seqs_.erase(seq); }
  Result<SeqId> ForkSequence(SeqId src, int64_t n_tokens) override;
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
  // Floats of one layer's K (or V) cache of `s`.
  float* KCache(const DeviceSequence& s, int64_t layer) const {
    return s.cache.as<float>() + (2 * layer) * s.capacity * KvWidth();
  }
  float* VCache(const DeviceSequence& s, int64_t layer) const {
    return s.cache.as<float>() + (2 * layer + 1) * s.capacity * KvWidth();
  }
  Status Reserve(DeviceSequence* s, int64_t n);
  Result<WeightView> Upload(const WeightView& host, const std::string& what);
  Result<const float*> UploadBias(const float* host, int64_t n, const std::string& what);
  Status RunPass(int64_t row_begin, int64_t row_end, const std::vector<DeviceSequence*>& seq,
                 const std::vector<int32_t>& token, const std::vector<int32_t>& pos,
                 const std::vector<int64_t>& out_row, const std::vector<size_t>& item,
                 const std::vector<int32_t>& index, const LayerProbe* probe);
  Status Fit(int64_t rows, int64_t max_pos);

  std::shared_ptr<const Model> model_;
  EngineOptions options_;
  int ordinal_ = 0;
  std::string description_;
  kc::Stream stream_;
  cublasHandle_t cublas_ = nullptr;
  kc::CudaContext ctx_;

  // Device weights: one allocation per tensor, kept for the engine's life.
  std::vector<kc::DeviceBuffer> weight_buffers_;
  WeightView embed_, final_norm_, lm_head_;
  struct Layer {
    WeightView input_norm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, post_attn_norm,
        gate_proj, up_proj, down_proj;
    const float* q_bias = nullptr;
    const float* k_bias = nullptr;
    const float* v_bias = nullptr;
  };
  std::vector<Layer> layers_;
  kc::DeviceBuffer cos_, sin_;

  std::unordered_map<SeqId, DeviceSequence> seqs_;
  SeqId next_id_ = 1;

  // Activations [rows, width] of one pass, and the pass's per-row metadata.
  Scratch x_, h_, q_, k_, v_, attn_, gate_, up_, work_, attn_scratch_;
  Scratch tokens_, positions_, cache_ptrs_, hidden_out_, gather_index_, logits_;
  int64_t scratch_stride_ = 0;
  std::vector<float> host_row_;  // probe copies
};

Result<WeightView> CudaEngine::Upload(const WeightView& host, const std::string& what) {
  WeightView dev = host;
  if (host.data == nullptr) return dev;
  const size_t bytes = static_cast<size_t>(host.rows * host.cols) * kernels::DTypeSize(host.dtype);
  TRACE_ASSIGN_OR_RETURN(kc::DeviceBuffer buffer, kc::DeviceBuffer::Allocate(bytes, what));
  TRACE_RETURN_IF_ERROR(kc::CopyToDevice(buffer.data(), host.data, bytes));
  dev.data = buffer.data();
  weight_buffers_.push_back(std::move(buffer));
  return dev;
}

Result<const float*> CudaEngine::UploadBias(const float* host, int64_t n, const std::string& what) {
  if (host == nullptr) return static_cast<const float*>(nullptr);
  TRACE_ASSIGN_OR_RETURN(WeightView v, Upload(WeightView{host, kernels::DType::kF32, 1, n}, what));
  return static_cast<const float*>(v.data);
}

Status CudaEngine::Init() {
  TRACE_RETURN_IF_ERROR(kc::UseCudaDevice(ordinal_));
  TRACE_ASSIGN_OR_RETURN(std::string name, kc::CudaDeviceDescription(ordinal_));
  description_ = "cuda:" + std::to_string(ordinal_) + " " + name;
  const ModelConfig& c = model_->config();
  if (c.head_dim > 256 || c.head_dim % 2 != 0) {
    return Unsupported("CUDA engine: head_dim " + std::to_string(c.head_dim) +
                       " (supported: even, at most 256)");
  }
  if (options_.max_context <= 0 || options_.max_context > c.max_position_embeddings) {
    options_.max_context = c.max_position_embeddings;
  }
  options_.threads = 1;  // host threads play no part in the device's arithmetic
  TRACE_ASSIGN_OR_RETURN(stream_, kc::Stream::Create());
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_.get()));
  ctx_.numerics = options_.numerics;
  ctx_.stream = stream_.get();
  ctx_.cublas = cublas_;

  const ModelWeights& w = model_->weights();
  TRACE_ASSIGN_OR_RETURN(embed_, Upload(w.embed_tokens, "embed_tokens"));
  TRACE_ASSIGN_OR_RETURN(final_norm_, Upload(w.final_norm, "final norm"));
  if (w.lm_head.data == w.embed_tokens.data) {
    lm_head_ = embed_;  // tied: one device copy
  } else {
    TRACE_ASSIGN_OR_RETURN(lm_head_, Upload(w.lm_head, "lm_head"));
  }
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& hl = w.layers[l];
    Layer& dl = layers_[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    TRACE_ASSIGN_OR_RETURN(dl.input_norm, Upload(hl.input_norm, p + "input_layernorm"));
    TRACE_ASSIGN_OR_RETURN(dl.q_proj, Upload(hl.q_proj, p + "q_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.k_proj, Upload(hl.k_proj, p + "k_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.v_proj, Upload(hl.v_proj, p + "v_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.o_proj, Upload(hl.o_proj, p + "o_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.q_norm, Upload(hl.q_norm, p + "q_norm"));
    TRACE_ASSIGN_OR_RETURN(dl.k_norm, Upload(hl.k_norm, p + "k_norm"));
    TRACE_ASSIGN_OR_RETURN(dl.post_attn_norm,
                           Upload(hl.post_attn_norm, p + "post_attention_layernorm"));
    TRACE_ASSIGN_OR_RETURN(dl.gate_proj, Upload(hl.gate_proj, p + "gate_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.up_proj, Upload(hl.up_proj, p + "up_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.down_proj, Upload(hl.down_proj, p + "down_proj"));
    TRACE_ASSIGN_OR_RETURN(dl.q_bias,
                           UploadBias(hl.q_bias, c.num_heads * c.head_dim, p + "q bias"));
    TRACE_ASSIGN_OR_RETURN(dl.k_bias, UploadBias(hl.k_bias, KvWidth(), p + "k bias"));
    TRACE_ASSIGN_OR_RETURN(dl.v_bias, UploadBias(hl.v_bias, KvWidth(), p + "v bias"));
  }
  // RoPE tables: computed once on the host in double (the CPU engine's function), shared.
  const int64_t half = c.head_dim / 2;
  std::vector<float> cos_host(static_cast<size_t>(options_.max_context * half));
  std::vector<float> sin_host(cos_host.size());
  kernels::MakeRopeTables(options_.max_context, c.head_dim, c.rope_theta, cos_host.data(),
                          sin_host.data());
  TRACE_ASSIGN_OR_RETURN(cos_, kc::DeviceBuffer::Allocate(cos_host.size() * 4, "rope cos table"));
  TRACE_ASSIGN_OR_RETURN(sin_, kc::DeviceBuffer::Allocate(sin_host.size() * 4, "rope sin table"));
  TRACE_RETURN_IF_ERROR(kc::CopyToDevice(cos_.data(), cos_host.data(), cos_host.size() * 4));
  TRACE_RETURN_IF_ERROR(kc::CopyToDevice(sin_.data(), sin_host.data(), sin_host.size() * 4));
  return Status::Ok();
}

Status CudaEngine::Reserve(DeviceSequence* s, int64_t n) {
  if (n <= s->capacity) return Status::Ok();
  int64_t cap = std::max<int64_t>({n, 2 * s->capacity, 16});
  cap = std::min(cap, options_.max_context);
  const int64_t layers = model_->config().num_layers;
  const size_t bytes = static_cast<size_t>(2 * layers * cap * KvWidth()) * sizeof(float);
  TRACE_ASSIGN_OR_RETURN(kc::DeviceBuffer grown, kc::DeviceBuffer::Allocate(bytes, "KV cache"));
  if (s->length > 0) {
    const size_t keep = static_cast<size_t>(s->length * KvWidth()) * sizeof(float);
    for (int64_t part = 0; part < 2 * layers; ++part) {
      TRACE_RETURN_IF_ERROR(kc::CopyDeviceToDeviceAsync(
          grown.as<float>() + part * cap * KvWidth(),
          s->cache.as<float>() + part * s->capacity * KvWidth(), keep, stream_.get()));
    }
    TRACE_RETURN_IF_ERROR(stream_.Synchronize());  // the old buffer is freed below
  }
  s->cache = std::move(grown);
  s->capacity = cap;
  return Status::Ok();
}

Result<SeqId> CudaEngine::ForkSequence(SeqId src, int64_t n_tokens) {
  auto it = seqs_.find(src);
  if (it == seqs_.end()) return NotFound("sequence " + std::to_string(src) + " does not exist");
  if (n_tokens < 0 || n_tokens > it->second.length) {
    return InvalidArgument("fork of sequence " + std::to_string(src) + ": " +
                           std::to_string(n_tokens) + " tokens asked, it holds " +
                           std::to_string(it->second.length));
  }
  CUDA_CHECK(cudaSetDevice(ordinal_));
  SeqId id = NewSequence();
  DeviceSequence& dst = seqs_[id];
  const DeviceSequence& from = seqs_[src];
  TRACE_RETURN_IF_ERROR(Reserve(&dst, n_tokens));
  const size_t bytes = static_cast<size_t>(n_tokens * KvWidth()) * sizeof(float);
  for (int64_t l = 0; l < model_->config().num_layers; ++l) {
    TRACE_RETURN_IF_ERROR(
        kc::CopyDeviceToDeviceAsync(KCache(dst, l), KCache(from, l), bytes, stream_.get()));
    TRACE_RETURN_IF_ERROR(
        kc::CopyDeviceToDeviceAsync(VCache(dst, l), VCache(from, l), bytes, stream_.get()));
  }
  dst.length = n_tokens;
  return id;
}

Status CudaEngine::Fit(int64_t rows, int64_t max_pos) {
  const ModelConfig& c = model_->config();
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t QD = c.num_heads * c.head_dim, KVD = KvWidth();
  const size_t f = sizeof(float);
  TRACE_RETURN_IF_ERROR(x_.Reserve(rows * H * f, "activations x"));
  TRACE_RETURN_IF_ERROR(h_.Reserve(rows * H * f, "activations h"));
  TRACE_RETURN_IF_ERROR(q_.Reserve(rows * QD * f, "activations q"));
  TRACE_RETURN_IF_ERROR(k_.Reserve(rows * KVD * f, "activations k"));
  TRACE_RETURN_IF_ERROR(v_.Reserve(rows * KVD * f, "activations v"));
  TRACE_RETURN_IF_ERROR(attn_.Reserve(rows * QD * f, "activations attention"));
  TRACE_RETURN_IF_ERROR(gate_.Reserve(rows * I * f, "activations gate"));
  TRACE_RETURN_IF_ERROR(up_.Reserve(rows * I * f, "activations up"));
  TRACE_RETURN_IF_ERROR(tokens_.Reserve(rows * sizeof(int32_t), "token ids"));
  TRACE_RETURN_IF_ERROR(positions_.Reserve(rows * sizeof(int32_t), "positions"));
  TRACE_RETURN_IF_ERROR(
      cache_ptrs_.Reserve(2 * c.num_layers * rows * sizeof(float*), "cache pointers"));
  scratch_stride_ = max_pos + 1;
  TRACE_RETURN_IF_ERROR(
      attn_scratch_.Reserve(rows * c.num_heads * scratch_stride_ * f, "attention scratch"));
  if (options_.numerics == kernels::Numerics::kFast) {
    const int64_t widest = std::max({H, I, QD});
    TRACE_RETURN_IF_ERROR(
        work_.Reserve(std::max(rows, kMaxLogitRowsPerPass) * widest * 2, "fast matmul workspace"));
    ctx_.workspace = work_.as<void>();
    ctx_.workspace_bytes = work_.bytes();
  }
  return Status::Ok();
}

Status CudaEngine::Forward(std::span<const BatchItem> items, ForwardOutput* out,
                           const LayerProbe* probe) {
  // The current device is per host thread, and the driving thread may not be the creator.
  CUDA_CHECK(cudaSetDevice(ordinal_));
  const ModelConfig& c = model_->config();
  // Validate everything before any cache changes (engine/batch_validation.h, as on CPU).
  TRACE_ASSIGN_OR_RETURN(
      const BatchShape shape,
      ValidateBatch(items, c.vocab_size, options_.max_context, [this](SeqId seq) -> int64_t {
        auto it = seqs_.find(seq);
        return it == seqs_.end() ? -1 : it->second.length;
      }));
  const int64_t total_rows = shape.total_rows, total_logits = shape.total_logits;

  std::vector<DeviceSequence*> row_seq;
  std::vector<int32_t> row_token, row_pos, row_index;
  std::vector<int64_t> row_out;
  std::vector<size_t> row_item;
  int64_t out_rows = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    DeviceSequence* s = &seqs_[items[i].seq];
    TRACE_RETURN_IF_ERROR(Reserve(s, s->length + static_cast<int64_t>(items[i].tokens.size())));
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
  TRACE_RETURN_IF_ERROR(hidden_out_.Reserve(std::max<int64_t>(total_logits, 1) * H * sizeof(float),
                                            "final hidden states"));
  for (int64_t begin = 0; begin < total_rows;) {
    // Grow the pass while the attention scratch stays within its budget.
    int64_t end = begin;
    int64_t max_pos = 0;
    while (end < total_rows && end - begin < kMaxRowsPerPass) {
      const int64_t next_max = std::max<int64_t>(max_pos, row_pos[end]);
      const int64_t scratch = (end - begin + 1) * c.num_heads * (next_max + 1) * 4;
      if (end > begin && scratch > kAttentionScratchBytes) break;
      max_pos = next_max;
      ++end;
    }
    TRACE_RETURN_IF_ERROR(Fit(end - begin, max_pos));
    TRACE_RETURN_IF_ERROR(
        RunPass(begin, end, row_seq, row_token, row_pos, row_out, row_item, row_index, probe));
    begin = end;
  }

  out->vocab_size = c.vocab_size;
  out->logits.assign(static_cast<size_t>(total_logits * c.vocab_size), 0.0f);
  TRACE_RETURN_IF_ERROR(logits_.Reserve(
      std::min(total_logits, kMaxLogitRowsPerPass) * c.vocab_size * sizeof(float), "logits"));
  for (int64_t begin = 0; begin < total_logits; begin += kMaxLogitRowsPerPass) {
    const int64_t rows = std::min(kMaxLogitRowsPerPass, total_logits - begin);
    float* hidden = hidden_out_.as<float>() + begin * H;
    kc::RmsNorm(ctx_, hidden, rows, H, final_norm_, c.rms_norm_eps, hidden);
    if (options_.numerics == kernels::Numerics::kFast) {
      TRACE_RETURN_IF_ERROR(work_.Reserve(rows * H * 2, "fast matmul workspace"));
      ctx_.workspace = work_.as<void>();
      ctx_.workspace_bytes = work_.bytes();
    }
    kc::MatMul(ctx_, hidden, rows, lm_head_, nullptr, logits_.as<float>());
    TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("LM head"));
    TRACE_RETURN_IF_ERROR(kc::CopyToHostAsync(out->logits.data() + begin * c.vocab_size,
                                              logits_.as<float>(),
                                              rows * c.vocab_size * sizeof(float), stream_.get()));
    TRACE_RETURN_IF_ERROR(stream_.Synchronize());
  }
  TRACE_RETURN_IF_ERROR(stream_.Synchronize());
  return Status::Ok();
}

Status CudaEngine::RunPass(int64_t row_begin, int64_t row_end,
                           const std::vector<DeviceSequence*>& row_seq,
                           const std::vector<int32_t>& row_token,
                           const std::vector<int32_t>& row_pos, const std::vector<int64_t>& row_out,
                           const std::vector<size_t>& row_item,
                           const std::vector<int32_t>& row_index, const LayerProbe* probe) {
  const ModelConfig& c = model_->config();
  const int64_t M = row_end - row_begin;
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t KVD = KvWidth();
  const int64_t L = c.num_layers;
  cudaStream_t stream = stream_.get();

  // Per-row metadata: token ids, positions, and each row's K and V cache per layer.
  std::vector<float*> ptrs(static_cast<size_t>(2 * L * M));
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t r = 0; r < M; ++r) {
      ptrs[(2 * l) * M + r] = KCache(*row_seq[row_begin + r], l);
      ptrs[(2 * l + 1) * M + r] = VCache(*row_seq[row_begin + r], l);
    }
  }
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(tokens_.as<int32_t>(), row_token.data() + row_begin,
                                              M * sizeof(int32_t), stream));
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(positions_.as<int32_t>(), row_pos.data() + row_begin,
                                              M * sizeof(int32_t), stream));
  TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(cache_ptrs_.as<float*>(), ptrs.data(),
                                              ptrs.size() * sizeof(float*), stream));
  const int32_t* positions = positions_.as<int32_t>();
  float* x = x_.as<float>();
  float* h = h_.as<float>();
  float* q = q_.as<float>();
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  float* attn = attn_.as<float>();
  float* gate = gate_.as<float>();
  float* up = up_.as<float>();

  kc::Embedding(ctx_, embed_, tokens_.as<int32_t>(), M, x);
  for (int64_t l = 0; l < L; ++l) {
    const Layer& lw = layers_[l];
    float* const* k_rows = cache_ptrs_.as<float*>() + (2 * l) * M;
    float* const* v_rows = cache_ptrs_.as<float*>() + (2 * l + 1) * M;
    kc::RmsNorm(ctx_, x, M, H, lw.input_norm, c.rms_norm_eps, h);
    kc::MatMul(ctx_, h, M, lw.q_proj, lw.q_bias, q);
    kc::MatMul(ctx_, h, M, lw.k_proj, lw.k_bias, k);
    kc::MatMul(ctx_, h, M, lw.v_proj, lw.v_bias, v);
    if (c.qk_norm) {
      kc::RmsNorm(ctx_, q, M * c.num_heads, D, lw.q_norm, c.rms_norm_eps, q);
      kc::RmsNorm(ctx_, k, M * c.num_kv_heads, D, lw.k_norm, c.rms_norm_eps, k);
    }
    kc::Rope(ctx_, q, M, c.num_heads, D, positions, cos_.as<float>(), sin_.as<float>());
    kc::Rope(ctx_, k, M, c.num_kv_heads, D, positions, cos_.as<float>(), sin_.as<float>());
    cuda::ScatterRows(stream, k, M, KVD, k_rows, positions);
    cuda::ScatterRows(stream, v, M, KVD, v_rows, positions);
    kc::AttentionRows(ctx_, q, M, const_cast<const float* const*>(k_rows),
                      const_cast<const float* const*>(v_rows), positions, c.num_heads,
                      c.num_kv_heads, D, attn_scratch_.as<float>(), scratch_stride_, attn);
    kc::MatMul(ctx_, attn, M, lw.o_proj, nullptr, h);
    kc::Add(ctx_, x, h, M * H, x);
    kc::RmsNorm(ctx_, x, M, H, lw.post_attn_norm, c.rms_norm_eps, h);
    kc::MatMul(ctx_, h, M, lw.gate_proj, nullptr, gate);
    kc::MatMul(ctx_, h, M, lw.up_proj, nullptr, up);
    kc::SiluMul(ctx_, gate, up, M * I, gate);
    kc::MatMul(ctx_, gate, M, lw.down_proj, nullptr, h);
    kc::Add(ctx_, x, h, M * H, x);
    TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("layer kernels"));
    if (probe != nullptr && *probe) {
      host_row_.resize(static_cast<size_t>(H));
      for (int64_t r = 0; r < M; ++r) {
        if (row_out[row_begin + r] < 0) continue;
        TRACE_RETURN_IF_ERROR(
            kc::CopyToHostAsync(host_row_.data(), x + r * H, H * sizeof(float), stream));
        TRACE_RETURN_IF_ERROR(stream_.Synchronize());
        (*probe)(row_item[row_begin + r], row_index[row_begin + r], static_cast<int>(l),
                 std::span<const float>(host_row_.data(), static_cast<size_t>(H)));
      }
    }
  }
  // Rows whose logits were asked for go to their slot in the final hidden states.
  std::vector<int32_t> gather_src, gather_dst;
  for (int64_t r = 0; r < M; ++r) {
    row_seq[row_begin + r]->length = row_pos[row_begin + r] + 1;
    if (row_out[row_begin + r] >= 0) {
      gather_src.push_back(static_cast<int32_t>(r));
      gather_dst.push_back(static_cast<int32_t>(row_out[row_begin + r]));
    }
  }
  if (!gather_src.empty()) {
    // Output rows of one pass are consecutive (rows are in item order), so one gather
    // into hidden_out_ at the first destination does it.
    TRACE_RETURN_IF_ERROR(
        gather_index_.Reserve(gather_src.size() * sizeof(int32_t), "gather index"));
    TRACE_RETURN_IF_ERROR(kc::CopyToDeviceAsync(gather_index_.as<int32_t>(), gather_src.data(),
                                                gather_src.size() * sizeof(int32_t), stream));
    cuda::GatherRows(stream, x, gather_index_.as<int32_t>(),
                     static_cast<int64_t>(gather_src.size()), H,
                     hidden_out_.as<float>() + static_cast<int64_t>(gather_dst[0]) * H);
    TRACE_RETURN_IF_ERROR(kc::CheckLastLaunch("gather of output rows"));
  }
  // Host arrays passed to async copies (ptrs, gather_src) must outlive the copies.
  TRACE_RETURN_IF_ERROR(stream_.Synchronize());
  return Status::Ok();
}

}  // namespace

bool HaveCudaBackend() {
  return true;
}

Result<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options) {
  TRACE_ASSIGN_OR_RETURN(int ordinal, ParseCudaDevice(options.device));
  if (kc::CudaDeviceCount() == 0) {
    return Unavailable("CUDA was asked for (--device " + options.device +
                       ") but no CUDA device is present");
  }
  if (model == nullptr) return InvalidArgument("engine: no model");
  auto engine = std::make_unique<CudaEngine>(std::move(model), options, ordinal);
  TRACE_RETURN_IF_ERROR(engine->Init().WithContext("CUDA engine on " + options.device));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace trace::engine
