// GPU kernel figures, each measured against a baseline taken in the same run:
//   copy     device-to-device cudaMemcpy bandwidth (bytes read + written), the GEMV yardstick
//   fma      the card's f32 FMA rate (independent register fma chains), the GEMM yardstick
//   gemv     canonical decode GEMV (M = 1, 8, 64 rows) vs cuBLAS bf16 (fast): weight GB/s
//   gemm     canonical prefill GEMM (M = 2048) vs cuBLAS bf16 tensor cores: TFLOP/s
// Prints one table; `--quick` runs fewer repetitions. Exits 77 without a device.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/kernels.h"

namespace {

namespace k = trace::kernels;
namespace kc = trace::kernels::cuda;

#define BENCH_CHECK(call)                                                         \
  do {                                                                            \
    cudaError_t e = (call);                                                       \
    if (e != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(e));                                        \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

int g_reps = 20;

// Mean milliseconds of `fn` over g_reps runs after 3 warm-ups, timed with events.
template <typename F>
double TimeMs(F fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  BENCH_CHECK(cudaEventRecord(start));
  for (int i = 0; i < g_reps; ++i) fn();
  BENCH_CHECK(cudaEventRecord(stop));
  BENCH_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CHECK(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / g_reps;
}

constexpr int kChains = 8;
constexpr int kFmaIters = 4096;

__global__ void FmaPeakKernel(float* out, float seed) {
  float a[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) a[i] = seed + threadIdx.x * 1e-7f + i;
  const float b = 0.999999f;
  const float c = 1e-7f;
  for (int it = 0; it < kFmaIters; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) a[i] = __fmaf_rn(a[i], b, c);
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i) s += a[i];
  if (s == 12345.0f) out[0] = s;  // keeps the chains alive
}

void* DeviceRandomBf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> host(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.03f);
  for (auto& v : host) v = k::F32ToBf16RoundNearestEven(dist(rng));
  void* d = nullptr;
  BENCH_CHECK(cudaMalloc(&d, n * 2));
  BENCH_CHECK(cudaMemcpy(d, host.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

float* DeviceRandomF32(size_t n, uint64_t seed) {
  std::vector<float> host(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : host) v = dist(rng);
  float* d = nullptr;
  BENCH_CHECK(cudaMalloc(&d, n * 4));
  BENCH_CHECK(cudaMemcpy(d, host.data(), n * 4, cudaMemcpyHostToDevice));
  return d;
}

struct Shape {
  const char* name;
  int64_t N, K;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--quick") == 0) g_reps = 5;
  if (kc::CudaDeviceCount() == 0) {
    std::printf("SKIPPED: no CUDA device is present\n");
    return 77;
  }
  auto desc = kc::CudaDeviceDescription(0);
  std::printf("device: %s\n", desc.ok() ? desc->c_str() : desc.status().ToString().c_str());
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));

  // Copy bandwidth: 1 GiB device to device.
  const size_t copy_bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  BENCH_CHECK(cudaMalloc(&src, copy_bytes));
  BENCH_CHECK(cudaMalloc(&dst, copy_bytes));
  BENCH_CHECK(cudaMemset(src, 1, copy_bytes));
  const double copy_ms =
      TimeMs([&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  cudaFree(src);
  cudaFree(dst);
  std::printf("%-44s %10.1f GB/s (read + write)\n", "copy: device-to-device 1 GiB", copy_gbs);

  // f32 FMA peak.
  float* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, 4));
  const int blocks = prop.multiProcessorCount * 8;
  const double fma_ms = TimeMs([&] { FmaPeakKernel<<<blocks, 256>>>(sink, 1.0f); });
  const double fma_tflops = 2.0 * blocks * 256.0 * kChains * kFmaIters / (fma_ms * 1e-3) / 1e12;
  std::printf("%-44s %10.1f TFLOP/s\n", "fma: f32 FMA rate", fma_tflops);

  auto blas = trace::kernels::cuda::Cublas();  // opened at run time (cublas_loader.h)
  if (!blas.ok()) {
    std::fprintf(stderr, "%s\n", blas.status().ToString().c_str());
    return 1;
  }
  cublasHandle_t handle;
  if ((*blas)->Create(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  const Shape shapes[] = {{"qwen3-0.6b up/gate 3072x1024", 3072, 1024},
                          {"qwen3-0.6b down 1024x3072", 1024, 3072},
                          {"qwen2.5-0.5b up/gate 4864x896", 4864, 896},
                          {"lm_head 151936x1024", 151936, 1024},
                          {"large 16384x8192", 16384, 8192}};
  std::printf("\n%-32s %4s %12s %8s %12s %10s\n", "GEMV (decode) shape", "M", "canon GB/s",
              "% copy", "fast GB/s", "canon/fast");
  for (const Shape& s : shapes) {
    void* w = DeviceRandomBf16(static_cast<size_t>(s.N * s.K), 1);
    k::WeightView wv{w, k::DType::kBF16, s.N, s.K};
    for (int64_t M : {1, 8, 64}) {
      float* x = DeviceRandomF32(static_cast<size_t>(M * s.K), 2);
      float* y = nullptr;
      void* work = nullptr;
      BENCH_CHECK(cudaMalloc(&y, M * s.N * 4));
      BENCH_CHECK(cudaMalloc(&work, M * s.K * 2));
      kc::CudaContext canon;
      kc::CudaContext fast;
      fast.numerics = k::Numerics::kFast;
      fast.cublas = handle;
      fast.workspace = work;
      fast.workspace_bytes = M * s.K * 2;
      const double bytes = 2.0 * s.N * s.K;  // the weights dominate
      const double c_ms = TimeMs([&] { kc::MatMul(canon, x, M, wv, nullptr, y); });
      const double f_ms = TimeMs([&] { kc::MatMul(fast, x, M, wv, nullptr, y); });
      const double c_gbs = bytes / (c_ms * 1e-3) / 1e9;
      const double f_gbs = bytes / (f_ms * 1e-3) / 1e9;
      std::printf("%-32s %4lld %12.1f %7.1f%% %12.1f %10.2f\n", s.name, static_cast<long long>(M),
                  c_gbs, 100.0 * c_gbs / copy_gbs, f_gbs, f_ms / c_ms);
      cudaFree(x);
      cudaFree(y);
      cudaFree(work);
    }
    cudaFree(w);
  }

  std::printf("\n%-32s %4s %12s %8s %12s %10s\n", "GEMM (prefill) shape", "M", "canon TF/s",
              "% fma", "fast TF/s", "canon/fast");
  for (const Shape& s : shapes) {
    if (s.N > 20000) continue;
    const int64_t M = 2048;
    void* w = DeviceRandomBf16(static_cast<size_t>(s.N * s.K), 3);
    k::WeightView wv{w, k::DType::kBF16, s.N, s.K};
    float* x = DeviceRandomF32(static_cast<size_t>(M * s.K), 4);
    float* y = nullptr;
    void* work = nullptr;
    BENCH_CHECK(cudaMalloc(&y, M * s.N * 4));
    BENCH_CHECK(cudaMalloc(&work, M * s.K * 2));
    kc::CudaContext canon;
    kc::CudaContext fast;
    fast.numerics = k::Numerics::kFast;
    fast.cublas = handle;
    fast.workspace = work;
    fast.workspace_bytes = M * s.K * 2;
    const double flops = 2.0 * M * s.N * s.K;
    const double c_ms = TimeMs([&] { kc::MatMul(canon, x, M, wv, nullptr, y); });
    const double f_ms = TimeMs([&] { kc::MatMul(fast, x, M, wv, nullptr, y); });
    const double c_tf = flops / (c_ms * 1e-3) / 1e12;
    const double f_tf = flops / (f_ms * 1e-3) / 1e12;
    std::printf("%-32s %4lld %12.2f %7.1f%% %12.2f %10.2f\n", s.name, static_cast<long long>(M),
                c_tf, 100.0 * c_tf / fma_tflops, f_tf, f_ms / c_ms);
    cudaFree(x);
    cudaFree(y);
    cudaFree(work);
    cudaFree(w);
  }
  (*blas)->Destroy(handle);
  cudaFree(sink);
  return 0;
}
