// The numeric kernels of the engine, one signature per op, shared by every backend.
//
// The canonical implementations follow docs/numerics.md (numerics contract
// canonical-v2) to the bit: their result for one row depends only on that row's inputs,
// never on M (the batch), the thread count, or which instruction set ran. The `fast`
// implementations are the conventional baseline and may reorder sums.
//
// Every op has (1) a plain scalar reference in kernels/cpu/ref_*.cc that reads like the
// contract, (2) a fast CPU path (AVX2+FMA when the CPU has it, chosen at run time) that
// must equal the reference bit for bit in canonical mode, and later (3) a CUDA twin in
// kernels/cuda/ with the same signature, equal bit for bit as well.
//
// Layouts: row-major. Activations are f32 [M, K]. Weights are [N, K] (Hugging Face
// Linear layout: one row per output feature) in bf16, f16 or f32; they convert exactly
// to f32 inside the kernel.
//
// Ownership: kernels never own memory; pointers are caller-owned and must not alias
// unless stated. Thread safety: a kernel call may use the given ThreadPool; distinct
// calls on distinct outputs may run concurrently. Errors: kernels do not fail; shapes are
// the caller's contract (checked by the engine when a model is loaded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace trace::kernels {

// kQ8_0 is ggml's Q8_0 (GGUF files): each row is cols / 32 blocks of 34 bytes, an f16 scale d
// then 32 int8 q; element k of a block is canonical::Q8_0Weight(d, q[k]) = f32(d) * q[k], an
// exact product (docs/numerics.md, "Quantized weights"). kQ4_0 is ggml's Q4_0: blocks of 18
// bytes, an f16 scale d then 16 bytes whose low nibbles are elements 0..15 and high nibbles
// 16..31; element k is Q8_0Weight(d, nibble - 8). InterleaveWeights turns a Q4_0 matrix into
// the kQ8_0 interleaved layout (the same values), and so does kQ5_0 (ggml's Q5_0: 22 bytes, an
// f16 d, 4 bytes of fifth bits qh, 16 bytes of nibbles as Q4_0's; element k is Q8_0Weight(d,
// q - 16)). kQ4_1 and kQ5_1 (20 and 24 bytes: Q4_0's / Q5_0's with an f16 min m after d) are
// affine, canonical::AffineBlockWeight(d, m, q) = d*q + m, one rounding: InterleaveWeights
// keeps them in records of nibbles as the K-quants (kernels/kquant_interleaved.h). cols must
// be a multiple of 32.
// kQ4_K, kQ5_K, kQ6_K are ggml's K-quants: each row is cols / 256 super-blocks of 144, 176 and
// 210 bytes, dequantized by canonical::DequantizeQ4_K / Q5_K / Q6_K (exact but for one rounding
// per Q4_K / Q5_K weight, fixed by the contract). InterleaveWeights keeps them quantized in
// records of 32 rows (kernels/kquant_interleaved.h: 1-3% more bytes than the file), which the
// AVX2 and AVX-512 MatMuls dequantize in registers; row-major (and on the other paths) MatMul
// dequantizes one row at a time and runs the path's canonical dot. Same bits either way.
enum class DType : uint8_t {
  kF32 = 0,
  kBF16 = 1,
  kF16 = 2,
  kQ8_0 = 3,
  kQ4_0 = 4,
  kQ4_K = 5,
  kQ5_K = 6,
  kQ6_K = 7,
  kQ4_1 = 8,
  kQ5_0 = 9,
  kQ5_1 = 10,
};
// Bytes per element of the plain types (4, 2, 2); 0 for a block type (use WeightBytes).
size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);
inline constexpr int64_t kQ8_0BlockElems = 32;
inline constexpr int64_t kQ8_0BlockBytes = 34;
inline constexpr int64_t kQ4_0BlockBytes = 18;
// Whether `dtype` is a ggml block type of 32 (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1): blocks of 32
// along a row.
inline constexpr bool IsQuantized(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ5_0 ||
         dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
}
// Whether `dtype` is a block type of 32 with a min (Q4_1, Q5_1).
inline constexpr bool IsAffineBlock32(DType dtype) {
  return dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
}
// Whether `dtype` is a ggml K-quant (Q4_K, Q5_K, Q6_K): super-blocks of 256 along a row.
inline constexpr int64_t kKQuantBlockElems = 256;
inline constexpr bool IsKQuant(DType dtype) {
  return dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ6_K;
}
// Bytes of one block of a block type (Q8_0 34, Q4_0 18, Q5_0 22, Q4_1 20, Q5_1 24, Q4_K 144,
// Q5_K 176, Q6_K 210); 0 for the plain types.
int64_t BlockBytes(DType dtype);
// Bytes of `rows` row-major rows of `cols` elements in `dtype`.
size_t WeightBytes(DType dtype, int64_t rows, int64_t cols);

enum class Numerics : uint8_t { kCanonical = 0, kFast = 1 };
const char* NumericsName(Numerics numerics);  // "canonical" / "fast"
// The inverse of NumericsName, the one parser of a --numerics value: "canonical" (or the
// contract version kNumericsVersion) and "fast". False, *numerics untouched, otherwise.
bool ParseNumerics(std::string_view name, Numerics* numerics);

// The numerics contract version; bump when any canonical result bit can change
// (reduction order, exp polynomial, RoPE table, rounding of a step). Recorded in runs.
inline constexpr const char* kNumericsVersion = "canonical-v2";
// The versioned name of a mode, the one a run records (RunHeader.engine.numerics,
// LlmCall.numerics) and a replay reports: kNumericsVersion for canonical, "fast" for fast.
// NumericsName is the unversioned one that --numerics takes and the CLI prints.
inline constexpr const char* VersionedNumericsName(Numerics numerics) {
  return numerics == Numerics::kCanonical ? kNumericsVersion : "fast";
}

// How a weight matrix is laid out in memory.
//   kRowMajor:     element (n, k) at n * cols + k (the safetensors layout).
//   kInterleaved32: rows in groups of 32, element (n, k) at
//                  ((n / 32) * cols + k) * 32 + n % 32, the last group padded with zero
//                  rows. kQ8_0 in this layout: per group of 32 rows and block b of 32
//                  columns, 1152 bytes: the 32 rows' scales as f32, then the int8 q as
//                  [k % 32][n % 32] (kQ8_0Interleaved32BlockBytes); the K-quants in records
//                  of 32 rows by 256 columns, Q4_1 / Q5_1 by 32 (kernels/kquant_interleaved.h).
//                  Made by InterleaveWeights; lets the canonical MatMul read 8 output columns with
//                  one load instead of a transpose, in one sequential stream (decode then runs at
//                  memory bandwidth). Accepted by MatMul and Embedding (so a tied embedding needs
//                  one copy); results are bitwise the same as with kRowMajor. Other ops take
//                  row-major weights.
enum class WeightLayout : uint8_t { kRowMajor = 0, kInterleaved32 = 1 };

// A weight matrix [rows, cols] in its stored dtype (memory-mapped or repacked).
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  // N: output features
  int64_t cols = 0;  // K: input features (reduction length)
  WeightLayout layout = WeightLayout::kRowMajor;
};

inline constexpr int64_t kQ8_0Interleaved32BlockBytes = 32 * 4 + 32 * 32;
// Bytes that InterleaveWeights writes for `w`: ceil(rows / 32) * 32 * cols * DTypeSize (kQ8_0
// and kQ4_0: ceil(rows / 32) * cols / 32 * kQ8_0Interleaved32BlockBytes; the K-quants:
// ceil(rows / 32) * cols / 256 * kquant::RecordBytes).
size_t InterleavedWeightsBytes(const WeightView& w);
// Copies row-major `w` into `dst` (InterleavedWeightsBytes(w) bytes, caller-owned) in the
// kInterleaved32 layout and returns the view of it (same dtype, rows and cols; kQ4_0 and kQ5_0
// become kQ8_0).
WeightView InterleaveWeights(const WeightView& w, void* dst);

// Exact conversions (bf16 and f16 are subsets of f32).
float Bf16ToF32(uint16_t v);
float F16ToF32(uint16_t v);
uint16_t F32ToBf16RoundNearestEven(float v);  // for writing models
uint16_t F32ToF16RoundNearestEven(float v);

class ThreadPool;  // kernels/thread_pool.h; nullptr means run on the calling thread

// Which implementation to run. kAuto: the best SIMD path this CPU has (x86: AVX-512, else AVX2,
// else the scalar reference; aarch64: NEON), capped by the environment variable TRACE_CPU_ISA
// (scalar|avx2|avx512|neon, read once; see CpuIsaOverride). kReference: the scalar references.
// kAvx2 / kAvx512 / kNeon: that path, or the best one below it when the CPU lacks it (so a test
// can run every path the machine has; below NEON there is only the reference). Every canonical
// path gives the same bits (tested; aarch64 under qemu: tests/arm64).
enum class Impl : uint8_t { kAuto = 0, kReference = 1, kAvx2 = 2, kAvx512 = 3, kNeon = 4 };

// The CPU instruction-set path that `impl` runs on this machine: "avx512" (AVX-512 F/BW/DQ/VL
// canonical ops; fast MatMul and fast attention on AVX2), "avx2" (AVX2+FMA+F16C), "neon"
// (AArch64 Advanced SIMD canonical ops; fast MatMul and fast attention on the reference) or
// "reference" (the scalar references). Recorded in every run's fingerprint: the bits are the
// same either way (tested), but a replay says what ran.
const char* CpuIsaPathName(Impl impl);
// The paths this CPU can run, best first, each as the Impl that forces it (kNeon, kAvx512,
// kAvx2, kReference; the scalar reference is always present).
std::vector<Impl> AvailableCpuIsaPaths();
// Parses a path name: "scalar" or "reference", "avx2", "avx512", "neon", "auto". False if
// unknown.
bool ParseCpuIsaPath(std::string_view name, Impl* impl);
// The cap set by TRACE_CPU_ISA (kAuto when unset). An unknown value is reported once on
// stderr and ignored.
Impl CpuIsaOverride();

struct KernelContext {
  Numerics numerics = Numerics::kCanonical;
  Impl impl = Impl::kAuto;
  ThreadPool* pool = nullptr;
};

// ---- canonical reductions (docs/numerics.md, "Dot product") ----------------------
// dot(a, b, n): 32 lanes; block b (32 consecutive elements) belongs to lane b % 32; each
// lane starts at +0.0f and does acc = fma(a[k], b[k], acc) in increasing k; result is the
// left fold ((lane0 + lane1) + lane2) + ... + lane31.
float CanonicalDot(const float* a, const float* b, int64_t n);
// Same order, b = 1: acc = acc + a[k].
float CanonicalSum(const float* a, int64_t n);

// ---- ops ----------------------------------------------------------------------------
// y[m, n] = dot(x[m, :], w[n, :]) (+ bias[n] if bias != nullptr, added after the dot).
// x: [M, K], y: [M, N] (y must not alias x).
void MatMul(const KernelContext& ctx, const float* x, int64_t M, const WeightView& w,
            const float* bias, float* y);

// out[m, i] = (x[m, i] * inv) * weight[i], inv = 1.0f / sqrtf(sum_sq / n + eps),
// sum_sq = CanonicalDot(x[m], x[m], n). `weight` is a dtype vector of length n.
// out may alias x.
void RmsNorm(const KernelContext& ctx, const float* x, int64_t M, int64_t n,
             const WeightView& weight, float eps, float* out);

// Row lookup: out[m, :] = f32(table[ids[m], :]), times `scale` (one rounded multiply) when
// it is not 1 (Gemma's embeddings are scaled by sqrt(hidden): ModelConfig::embedding_scale).
void Embedding(const KernelContext& ctx, const WeightView& table, const int32_t* ids, int64_t M,
               float* out, float scale = 1.0f);

// RoPE (rotate-half, the Hugging Face layout) in place on x: [M, n_heads, head_dim];
// positions[m] is the position of row m. cos/sin tables: [max_pos, head_dim / 2] floats,
// computed once on the host in double and rounded (MakeRopeTables).
// For i < d/2: x1 = x[i], x2 = x[i + d/2]; x[i] = x1*c - x2*s; x[i+d/2] = x2*c + x1*s
// (each product rounded, then the add: no fma).
void Rope(const KernelContext& ctx, float* x, int64_t M, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, const float* cos_table, const float* sin_table);
// A model's RoPE frequency scaling (config.json "rope_scaling"). kLlama3: Llama 3.1's
// (rope_type "llama3"): with wavelength w_i = 2 pi / f_i of the base frequency f_i =
// theta^(-2i/d), L = original_max_position_embeddings, w_lo = L / low_freq_factor and
// w_hi = L / high_freq_factor: f_i unchanged when w_i < w_hi, f_i / factor when w_i > w_lo,
// else (1 - s) f_i / factor + s f_i with s = (L / w_i - low_freq_factor) / (high_freq_factor -
// low_freq_factor); all in double (docs/numerics.md, "RoPE tables").
// kLinear (rope_type "linear", Gemma 3's global layers): f_i / factor. kFreqFactors (a GGUF
// file's `rope_freqs.weight`, how llama.cpp stores Llama 3's scaling): f_i / freq_factors[i].
struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear, kFreqFactors };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  std::vector<float> freq_factors;  // kFreqFactors: head_dim / 2 divisors
};
// The frequency of dimension pair i (0 <= i < head_dim / 2), scaled as `scaling` says.
double RopeFrequency(int64_t i, int64_t head_dim, double theta, const RopeScaling& scaling);
void MakeRopeTables(int64_t max_pos, int64_t head_dim, double theta, float* cos_table,
                    float* sin_table, const RopeScaling& scaling = {});

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1.0f + Exp(-g)). out may alias gate.
void SiluMul(const KernelContext& ctx, const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu_tanh(gate[i]) * up[i] (canonical::GeluTanhMul: GeGLU with transformers'
// gelu_pytorch_tanh, Gemma's MLP). out may alias gate.
void GeluTanhMul(const KernelContext& ctx, const float* gate, const float* up, int64_t n,
                 float* out);

// y[i] = a[i] + b[i]. y may alias a or b.
void Add(const KernelContext& ctx, const float* a, const float* b, int64_t n, float* y);

// The engine's own exp (range reduction + fixed polynomial), identical on every backend.
float Exp(float x);
// out[i] = Exp(x[i]) for i < n, vectorised where the CPU allows (same bits). out may alias x.
void ExpArray(const KernelContext& ctx, const float* x, int64_t n, float* out);

// Causal attention for one query row against one sequence's KV cache.
//   q: [n_heads, head_dim] for the query at position `pos` (the row may see 0..pos).
//   k_cache, v_cache: [n_pos_total, n_kv_heads, head_dim], rows 0..pos valid.
//   out: [n_heads, head_dim]. Head h reads kv head h / (n_heads / n_kv_heads) (GQA).
// Canonical: s_j = CanonicalDot(q, k_j) * scale for j = 0..pos, scale the model's
// (canonical::AttentionScale: 1/sqrtf(head_dim), or of Gemma's query_pre_attn_scalar);
// mx = max_j s_j; p_j = Exp(s_j - mx); sum = CanonicalSum(p); out[d] = CanonicalDot over
// j of (p_j, v_j[d]) / sum. Two passes, no online rescaling, so prefill == decode.
// A sliding window is the caller's: it passes the cache from the first visible position on
// (and pos relative to it), so the window's attention is this attention over those rows.
// Fast: online softmax, any order. `scratch` holds at least (pos + 1) * 2 floats; when
// ctx.pool splits the heads over threads, each thread uses its own buffer instead.
void Attention(const KernelContext& ctx, const float* q, const float* k_cache, const float* v_cache,
               int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float* scratch, float* out);

// ---- mixture of experts (docs/numerics.md, "MoE routing") ------------------------------
// Routes M rows over E experts. logits: [M, E] router logits (a MatMul with the router
// weights); writes ids [M, k] and weights [M, k].
// Canonical: per row canonical::RouteRow: softmax by the contract, top-k by (probability
// desc, expert id asc), ids ascending, weights optionally renormalised (`normalize`). A
// row's route depends on its logits alone: no capacity, no dropping.
// Fast: the conventional capacity-limited routing (GShard / Switch Transformer): the same
// choice per row, then each expert takes at most ceil(M * k / E) rows (capacity factor
// 1.0), filled first with every row's first choice, then second choices, ..., in row order;
// an overflowing (row, expert) pair is dropped (id -1, weight 0). A row's route then depends
// on the other rows of the batch: the problem canonical routing removes.
void MoeRoute(const KernelContext& ctx, const float* logits, int64_t M, int64_t E, int64_t k,
              bool normalize, int32_t* ids, float* weights);

// out[m, i] = sum over j = 0..k-1 with ids[m, j] >= 0, in that (ascending id) order, from
// +0.0f, of weights[m, j] * expert_out[(m * k + j) * n + i] (canonical::CombineStep: rounded
// multiply, rounded add). expert_out: [M, k, n]; out: [M, n] (must not alias expert_out).
void MoeCombine(const KernelContext& ctx, const float* expert_out, const int32_t* ids,
                const float* weights, int64_t M, int64_t k, int64_t n, float* out);

// The shared expert's term (qwen2_moe), after MoeCombine: out[m, i] =
// canonical::CombineStep(out[m, i], canonical::SharedExpertWeight(gate_logits[m]),
// shared_out[m * n + i]). shared_out: [M, n]; gate_logits: [M]; out: [M, n] (in place).
void MoeAddShared(const KernelContext& ctx, const float* shared_out, const float* gate_logits,
                  int64_t M, int64_t n, float* out);

}  // namespace trace::kernels
