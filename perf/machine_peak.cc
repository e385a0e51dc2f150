// Peak measurements of perf/machine_peak.h. The FMA loops keep 12 independent
// accumulators per thread (more than latency x ports on current x86 cores); the x86 ones are
// compiled for their instruction set by target attributes, so this file needs no special
// flags, and the NEON one only for aarch64; they run only when kernels::AvailableCpuIsaPaths()
// lists that set.
#include "perf/machine_peak.h"

#if defined(__x86_64__) || defined(__i386__)
#define TRACE_PEAK_X86 1
// GCC 12's AVX-512 intrinsics warn about their own dummy operand once inlined (GCC PR
// 105593, fixed in GCC 13): silenced for that header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/thread_pool.h"

namespace trace::perf {
namespace {

constexpr int kChains = 12;
constexpr int64_t kIterations = int64_t{1} << 20;  // per thread and round (~25 ms)

// acc = acc * a + b with a slightly below 1 and tiny b: stays finite and normal forever.
constexpr float kScale = 0.99999994f;
constexpr float kStep = 1e-7f;

#if TRACE_PEAK_X86
__attribute__((target("avx512f"))) float FmaLoop512(int64_t iterations) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(kScale), b = _mm512_set1_ps(kStep);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float FmaLoop256(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(kScale), b = _mm256_set1_ps(kStep);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 s = acc[0];
  for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  float total = 0;
  for (float v : out) total += v;
  return total;
}
#endif

#if defined(__aarch64__)
float FmaLoopNeon(int64_t iterations) {
  float32x4_t acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = vdupq_n_f32(1.0f + static_cast<float>(c));
  const float32x4_t a = vdupq_n_f32(kScale), b = vdupq_n_f32(kStep);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = vfmaq_f32(b, acc[c], a);
  }
  float32x4_t s = acc[0];
  for (int c = 1; c < kChains; ++c) s = vaddq_f32(s, acc[c]);
  return vaddvq_f32(s);
}
#endif

float FmaLoopScalar(int64_t iterations) {
  float acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = 1.0f + static_cast<float>(c);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = std::fma(acc[c], kScale, kStep);
  }
  float total = 0;
  for (float v : acc) total += v;
  return total;
}

// The FMA loop of a path and the floats per instruction it counts.
struct FmaLoop {
  int width;
  float (*run)(int64_t iterations);
};
FmaLoop FmaLoopFor(kernels::Impl isa) {
  switch (isa) {
#if TRACE_PEAK_X86
    case kernels::Impl::kAvx512:
      return {16, FmaLoop512};
    case kernels::Impl::kAvx2:
      return {8, FmaLoop256};
#endif
#if defined(__aarch64__)
    case kernels::Impl::kNeon:
      return {4, FmaLoopNeon};
#endif
    default:
      return {1, FmaLoopScalar};
  }
}

bool Have(kernels::Impl isa) {
  const auto paths = kernels::AvailableCpuIsaPaths();
  return std::find(paths.begin(), paths.end(), isa) != paths.end();
}

using Clock = std::chrono::steady_clock;

double SecondsOf(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

kernels::Impl BestCpuIsa() {
  return kernels::AvailableCpuIsaPaths().front();
}

kernels::Impl ActiveCpuIsa() {
  kernels::Impl impl = kernels::Impl::kReference;
  kernels::ParseCpuIsaPath(kernels::CpuIsaPathName(kernels::Impl::kAuto), &impl);
  return impl;
}

double MeasureFmaPeakGflops(kernels::Impl isa, int threads, int repeats) {
  if (isa == kernels::Impl::kAuto) isa = BestCpuIsa();
  if (!Have(isa)) return 0;
  threads = std::max(1, threads);
  const FmaLoop loop = FmaLoopFor(isa);
  const int width = loop.width;
  // The scalar loop is ~10x slower per instruction than it is worth waiting for.
  const int64_t iterations = isa == kernels::Impl::kReference ? kIterations / 16 : kIterations;
  auto pool = kernels::ThreadPool::Create(threads);
  std::atomic<float> sink{0};
  double best = 0;
  for (int r = 0; r < std::max(1, repeats) + 1; ++r) {  // round 0 warms up
    const double s = SecondsOf([&] {
      pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          sink.store(loop.run(iterations), std::memory_order_relaxed);
        }
      });
    });
    const double flops = 2.0 * kChains * width * static_cast<double>(iterations) * threads;
    if (r > 0 && s > 0) best = std::max(best, flops / s / 1e9);
  }
  return best;
}

namespace {
double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

double ProcessCpuSeconds() {
  return CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
}

double MeasureFmaPeakGflopsPerCpuSecond(kernels::Impl isa, int repeats) {
  if (isa == kernels::Impl::kAuto) isa = BestCpuIsa();
  if (!Have(isa)) return 0;
  const FmaLoop loop = FmaLoopFor(isa);
  const int width = loop.width;
  const int64_t iterations = isa == kernels::Impl::kReference ? kIterations / 16 : kIterations;
  volatile float sink = 0;
  double best = 0;
  for (int r = 0; r < std::max(1, repeats) + 1; ++r) {  // round 0 warms up
    const double t0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    sink = loop.run(iterations);
    const double s = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    const double flops = 2.0 * kChains * width * static_cast<double>(iterations);
    if (r > 0 && s > 0) best = std::max(best, flops / s / 1e9);
  }
  (void)sink;
  return best;
}

Bandwidth MeasureBandwidth(int threads, int64_t bytes, int repeats) {
  threads = std::max(1, threads);
  const size_t n = static_cast<size_t>(bytes / 64 * 64);
  std::unique_ptr<char, decltype(&std::free)> src(static_cast<char*>(std::aligned_alloc(64, n)),
                                                  &std::free);
  std::unique_ptr<char, decltype(&std::free)> dst(static_cast<char*>(std::aligned_alloc(64, n)),
                                                  &std::free);
  Bandwidth out;
  if (!src || !dst) return out;
  auto pool = kernels::ThreadPool::Create(threads);
  // Touch both buffers before timing.
  pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
    const size_t lo = n * begin / threads, hi = n * end / threads;
    std::memset(src.get() + lo, 1, hi - lo);
    std::memset(dst.get() + lo, 0, hi - lo);
  });
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double copy_s = SecondsOf([&] {
      pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
        const size_t lo = n * begin / threads, hi = n * end / threads;
        std::memcpy(dst.get() + lo, src.get() + lo, hi - lo);
      });
    });
    const double read_s = SecondsOf([&] {
      pool->ParallelFor(threads, [&](int64_t begin, int64_t end) {
        const size_t lo = n * begin / threads / 8, hi = n * end / threads / 8;
        const auto* words = reinterpret_cast<const uint64_t*>(src.get());
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i = lo;
        for (; i + 4 <= hi; i += 4) {
          s0 += words[i];
          s1 += words[i + 1];
          s2 += words[i + 2];
          s3 += words[i + 3];
        }
        for (; i < hi; ++i) s0 += words[i];
        sink.fetch_add(s0 + s1 + s2 + s3, std::memory_order_relaxed);
      });
    });
    if (copy_s > 0) out.copy_gbps = std::max(out.copy_gbps, 2.0 * n / copy_s / 1e9);
    if (read_s > 0) out.read_gbps = std::max(out.read_gbps, 1.0 * n / read_s / 1e9);
  }
  return out;
}

}  // namespace trace::perf
