// Canonical vs fast kernels on qwen2.5-0.5b shapes, in one run: MatMul decode (M = 1,
// bf16 weights: memory-bound, reported in GB/s of weights) and prefill (M = 64..512,
// GFLOP/s; lm_head, 272 MB, is the DRAM-bound decode case), plus attention decode at a few context
// lengths. Each figure is the best of several repetitions; the ratio canonical / fast is what the
// numerics cost. Then the canonical ops besides MatMul on every CPU path (reference, AVX2,
// AVX-512, each forced) with the ratio AVX2 time / AVX-512 time (--paths only that part).
// --quant: canonical MatMul on the weight types of GGUF files, each against bf16 in the same
// run, every type in the engine's interleaved layout (and Q4_K also in the file's, dequantized
// row by row): decode (M = 1) as GB/s of the file's bytes, prefill (M = 64) as GFLOP/s, and
// time / bf16's.
//
// Usage: kernels_bench [--threads N] [--quick] [--paths | --quant]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "testkit/kquant_reference.h"

namespace tk = trace::kernels;

namespace {

double Seconds(const std::function<void()>& fn, double min_total_s) {
  fn();  // warm-up
  double best = 1e30, total = 0;
  int reps = 0;
  while (total < min_total_s || reps < 3) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
    ++reps;
  }
  return best;
}

struct Shape {
  const char* name;
  int64_t K, N;
};

// One op timed on every CPU path this machine has: microseconds per call, best of several.
void PathRow(const char* name, const std::vector<tk::Impl>& paths, double min_s,
             const std::function<void(const tk::KernelContext&)>& op, tk::ThreadPool* pool) {
  std::printf("%-34s", name);
  double t_avx2 = 0, t_avx512 = 0;
  for (tk::Impl impl : paths) {
    tk::KernelContext ctx;
    ctx.impl = impl;
    ctx.pool = pool;
    const double t = Seconds([&] { op(ctx); }, min_s);
    if (impl == tk::Impl::kAvx2) t_avx2 = t;
    if (impl == tk::Impl::kAvx512) t_avx512 = t;
    std::printf(" %10.1f", t * 1e6);
  }
  if (t_avx2 > 0 && t_avx512 > 0) std::printf(" %9.2f", t_avx2 / t_avx512);
  std::printf("\n");
}

// Canonical attention, RmsNorm, RoPE, SiluMul, Add and Exp on each path, the shapes of one
// decode step of qwen2.5-0.5b (14/2 heads, d 64, hidden 896, ffn 4864) and qwen3-0.6b
// (16/8 heads, d 128), and a 128-token prefill for the row-wise ops.
void OpsOnEveryPath(tk::ThreadPool* pool, double min_s, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& e : v) e = dist(rng);
    return v;
  };
  const std::vector<tk::Impl> paths = tk::AvailableCpuIsaPaths();
  std::printf("\n%-34s", "canonical op, us per call");
  for (tk::Impl impl : paths) std::printf(" %10s", tk::CpuIsaPathName(impl));
  std::printf(" %9s\n", "avx2/512");
  struct Heads {
    const char* name;
    int64_t heads, kv_heads, dim;
  };
  for (const Heads& hs :
       {Heads{"14/2 heads d 64", 14, 2, 64}, Heads{"16/8 heads d 128", 16, 8, 128}}) {
    for (int64_t ctx_len : {128, 1024, 4096}) {
      const auto k = random(ctx_len * hs.kv_heads * hs.dim), v = random(k.size());
      const auto q = random(hs.heads * hs.dim);
      std::vector<float> out(q.size()), scratch(static_cast<size_t>(2 * ctx_len));
      const std::string name =
          std::string("attention ") + hs.name + " ctx " + std::to_string(ctx_len);
      PathRow(
          name.c_str(), paths, min_s,
          [&](const tk::KernelContext& ctx) {
            tk::Attention(ctx, q.data(), k.data(), v.data(), ctx_len - 1, hs.heads, hs.kv_heads,
                          hs.dim, tk::canonical::AttentionScale(hs.dim), scratch.data(),
                          out.data());
          },
          pool);
    }
  }
  const int64_t hidden = 896, ffn = 4864;
  std::vector<float> norm_w(hidden, 1.0f);
  const tk::WeightView norm_view{norm_w.data(), tk::DType::kF32, 1, hidden};
  const int64_t max_pos = 256, half = 32;
  std::vector<float> cos_t(max_pos * half), sin_t(cos_t.size());
  tk::MakeRopeTables(max_pos, 2 * half, 1000000.0, cos_t.data(), sin_t.data());
  for (int64_t M : {1, 128}) {
    const auto x = random(M * hidden);
    std::vector<float> y(x.size());
    const std::string rows = " M " + std::to_string(M);
    PathRow(("rmsnorm 896" + rows).c_str(), paths, min_s,
            [&](const tk::KernelContext& ctx) {
              tk::RmsNorm(ctx, x.data(), M, hidden, norm_view, 1e-6f, y.data());
            },
            pool);
    auto qk = random(M * 16 * 64);
    std::vector<int32_t> positions(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) positions[m] = static_cast<int32_t>(m % max_pos);
    PathRow(("rope 16 heads d 64" + rows).c_str(), paths, min_s,
            [&](const tk::KernelContext& ctx) {
              tk::Rope(ctx, qk.data(), M, 16, 64, positions.data(), cos_t.data(), sin_t.data());
            },
            pool);
    const auto gate = random(M * ffn), up = random(M * ffn);
    std::vector<float> act(gate.size());
    PathRow(("silu_mul 4864" + rows).c_str(), paths, min_s,
            [&](const tk::KernelContext& ctx) {
              tk::SiluMul(ctx, gate.data(), up.data(), M * ffn, act.data());
            },
            pool);
    PathRow(("add 896" + rows).c_str(), paths, min_s,
            [&](const tk::KernelContext& ctx) {
              tk::Add(ctx, x.data(), x.data(), M * hidden, y.data());
            },
            pool);
  }
  const auto logits = random(151936);
  std::vector<float> e(logits.size());
  PathRow(
      "exp 151936 (sampler)", paths, min_s,
      [&](const tk::KernelContext& ctx) {
        tk::ExpArray(ctx, logits.data(), static_cast<int64_t>(logits.size()), e.data());
      },
      pool);
}

}  // namespace

// Random Q8_0 blocks: f16 scales around 0.002 (exponent 8..9), int8 values anywhere.
std::vector<uint8_t> RandomQ8_0(std::mt19937_64& rng, int64_t N, int64_t K) {
  std::vector<uint8_t> bytes(static_cast<size_t>(N * K / 32 * 34));
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < bytes.size(); at += 34) bytes[at + 1] = 0x18 | (bytes[at + 1] & 3);
  return bytes;
}

void QuantDecode(tk::ThreadPool* pool, double min_s, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Two layer shapes (in cache) and an output head (beyond any cache: the DRAM-bound case).
  const Shape shapes[] = {{"gate_proj 1024x4864", 1024, 4864},
                          {"down_proj 4864x1024", 4864, 1024},
                          {"lm_head 1024x151936", 1024, 151936}};
  const char* names[] = {"bf16", "q8_0", "q4_k", "q5_k", "q6_k", "q4_k-rows"};
  constexpr int kVariants = 6;
  for (int64_t M : {1, 64}) {
    if (M == 1) {
      std::printf("\ndecode (M = 1), GB/s of the file's bytes\n");
    } else {
      std::printf("\nprefill (M = 64), GFLOP/s\n");
    }
    std::printf("%-22s |", "shape");
    for (const char* n : names) std::printf(" %9s", n);
    std::printf(" | time / bf16:");
    for (int i = 1; i < kVariants; ++i) std::printf(" %s", names[i]);
    std::printf("\n");
    for (const Shape& s : shapes) {
      if (M > 1 && s.N > 100000) continue;  // the head: decode only
      std::vector<float> values(static_cast<size_t>(s.K * s.N));
      for (auto& v : values) v = dist(rng) * 0.05f;
      std::vector<uint16_t> bf16(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        bf16[i] = tk::F32ToBf16RoundNearestEven(values[i]);
      }
      const std::vector<uint8_t> q8 = RandomQ8_0(rng, s.N, s.K);
      std::vector<std::string> kq;
      for (auto type : {trace::testkit::KQuant::kQ4_K, trace::testkit::KQuant::kQ5_K,
                        trace::testkit::KQuant::kQ6_K}) {
        kq.push_back(trace::testkit::QuantizeKQuant(type, values));
      }
      struct Variant {
        tk::WeightView view;
        std::vector<uint8_t> storage;
      };
      std::vector<Variant> variants(kVariants);
      const tk::WeightView plain[] = {{bf16.data(), tk::DType::kBF16, s.N, s.K},
                                      {q8.data(), tk::DType::kQ8_0, s.N, s.K},
                                      {kq[0].data(), tk::DType::kQ4_K, s.N, s.K},
                                      {kq[1].data(), tk::DType::kQ5_K, s.N, s.K},
                                      {kq[2].data(), tk::DType::kQ6_K, s.N, s.K}};
      for (int i = 0; i < 5; ++i) {  // the engine's layout
        variants[i].storage.resize(tk::InterleavedWeightsBytes(plain[i]));
        variants[i].view = tk::InterleaveWeights(plain[i], variants[i].storage.data());
      }
      variants[5].view = plain[2];  // the file's layout, dequantized row by row
      std::vector<float> x(static_cast<size_t>(M * s.K)), y(static_cast<size_t>(M * s.N));
      for (auto& v : x) v = dist(rng);
      double t[kVariants];
      std::printf("%-22s |", s.name);
      for (int i = 0; i < kVariants; ++i) {
        tk::KernelContext ctx;
        ctx.pool = pool;
        t[i] = Seconds([&] { tk::MatMul(ctx, x.data(), M, variants[i].view, nullptr, y.data()); },
                       min_s);
        const double file_bytes =
            static_cast<double>(tk::WeightBytes(plain[i == 5 ? 2 : i].dtype, s.N, s.K));
        const double flops = 2.0 * static_cast<double>(M * s.K * s.N);
        std::printf(" %9.1f", (M == 1 ? file_bytes : flops) / t[i] / 1e9);
      }
      std::printf(" |");
      for (int i = 1; i < kVariants; ++i) std::printf(" %.2f", t[i] / t[0]);
      std::printf("\n");
    }
  }
}

int main(int argc, char** argv) {
  int threads = 1;
  bool quick = false;
  bool paths_only = false;
  bool quant_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--paths") == 0) {
      paths_only = true;
    } else if (std::strcmp(argv[i], "--quant") == 0) {
      quant_only = true;
    } else {
      std::fprintf(stderr,
                   "kernels_bench: unknown argument %s (use --threads N, --quick, --paths, "
                   "--quant)\n",
                   argv[i]);
      return 2;
    }
  }
  const double min_s = quick ? 0.05 : 0.3;
  auto pool = tk::ThreadPool::Create(threads);
  std::printf("kernels_bench: %s, %d thread(s), avx2 %s\n", tk::kNumericsVersion, threads,
              tk::HaveAvx2() ? "yes" : "no");
  std::mt19937_64 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  if (paths_only) {
    OpsOnEveryPath(pool.get(), min_s, rng);
    return 0;
  }
  if (quant_only) {
    QuantDecode(pool.get(), min_s, rng);
    return 0;
  }

  const Shape shapes[] = {{"q_proj 896x896", 896, 896},
                          {"k_proj 896x128", 896, 128},
                          {"gate_proj 896x4864", 896, 4864},
                          {"down_proj 4864x896", 4864, 896},
                          {"lm_head 896x151936", 896, 151936}};
  // Four variants per shape: {canonical, fast} x {row-major, interleaved-8 weights}.
  // Figures in GFLOP/s; for M = 1 also the weight stream rate in GB/s. Ratios compare
  // canonical with the fast row-major baseline (the conventional layout and loop).
  std::printf("\n%-20s %4s | %9s %9s %9s %9s | %8s %8s %8s | %s\n", "matmul (bf16) GF/s", "M",
              "canon-rm", "canon-il", "fast-rm", "fast-il", "c-rm/f", "c-il/f", "cil/fil",
              "decode GB/s canon-il / fast-rm");
  for (const Shape& s : shapes) {
    std::vector<uint16_t> w(static_cast<size_t>(s.K * s.N));
    for (auto& v : w) v = tk::F32ToBf16RoundNearestEven(dist(rng) * 0.05f);
    const tk::WeightView view{w.data(), tk::DType::kBF16, s.N, s.K};
    std::vector<uint8_t> packed(tk::InterleavedWeightsBytes(view));
    const tk::WeightView interleaved = tk::InterleaveWeights(view, packed.data());
    for (int64_t M : {1, 4, 64, 512}) {
      if (quick && M == 512) continue;
      // lm_head (272 MB of bf16, beyond any cache): decode only, the DRAM-bound case.
      if (s.N > 100000 && M > 1) continue;
      std::vector<float> x(static_cast<size_t>(M * s.K)), y(static_cast<size_t>(M * s.N));
      for (auto& v : x) v = dist(rng);
      double t[4];
      for (int variant = 0; variant < 4; ++variant) {
        tk::KernelContext ctx;
        ctx.numerics = variant < 2 ? tk::Numerics::kCanonical : tk::Numerics::kFast;
        ctx.pool = pool.get();
        const tk::WeightView& wv = variant % 2 == 0 ? view : interleaved;
        t[variant] = Seconds([&] { tk::MatMul(ctx, x.data(), M, wv, nullptr, y.data()); }, min_s);
      }
      const double flops = 2.0 * M * s.K * s.N, bytes = 2.0 * s.K * s.N;
      std::printf("%-20s %4lld | %9.1f %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f |", s.name,
                  static_cast<long long>(M), flops / t[0] * 1e-9, flops / t[1] * 1e-9,
                  flops / t[2] * 1e-9, flops / t[3] * 1e-9, t[2] / t[0], t[2] / t[1], t[3] / t[1]);
      if (M == 1) std::printf(" %.1f / %.1f", bytes / t[1] * 1e-9, bytes / t[2] * 1e-9);
      std::printf("\n");
    }
  }

  // Attention decode: 14 heads, 2 kv heads, head_dim 64 (qwen2.5-0.5b).
  std::printf("\n%-22s %5s %12s %12s %7s\n", "attention decode", "ctx", "canon us", "fast us",
              "ratio");
  const int64_t heads = 14, kv_heads = 2, dim = 64;
  for (int64_t ctx_len : {128, 1024, 4096}) {
    std::vector<float> k(static_cast<size_t>(ctx_len * kv_heads * dim));
    std::vector<float> v(k.size()), q(static_cast<size_t>(heads * dim)), out(q.size());
    std::vector<float> scratch(static_cast<size_t>(2 * ctx_len));
    for (auto& e : k) e = dist(rng);
    for (auto& e : v) e = dist(rng);
    for (auto& e : q) e = dist(rng);
    double t[2];
    for (int mode = 0; mode < 2; ++mode) {
      tk::KernelContext ctx;
      ctx.numerics = mode == 0 ? tk::Numerics::kCanonical : tk::Numerics::kFast;
      ctx.pool = pool.get();
      t[mode] = Seconds(
          [&] {
            tk::Attention(ctx, q.data(), k.data(), v.data(), ctx_len - 1, heads, kv_heads, dim,
                          tk::canonical::AttentionScale(dim), scratch.data(), out.data());
          },
          min_s);
    }
    std::printf("%-22s %5lld %12.1f %12.1f %7.2f\n", "14/2 heads, d 64",
                static_cast<long long>(ctx_len), t[0] * 1e6, t[1] * 1e6, t[1] / t[0]);
  }
  std::printf(
      "\nratios = fast row-major time / canonical time (1.00: canonical costs "
      "nothing; 0.80: canonical runs at 0.8x the fast speed)\n");
  OpsOnEveryPath(pool.get(), min_s, rng);
  return 0;
}
