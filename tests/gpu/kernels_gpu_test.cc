// Every CUDA kernel against its CPU twin (the scalar reference, kernels::Impl::kReference)
// on seeded random inputs, compared bit for bit; shapes include lengths that are not
// multiples of 32 or 1024, and misaligned activations that force the scalar load paths.
// The fast kernels are checked against canonical within a stated tolerance only.
#include <cublas_v2.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/selftest.h"
#include "kernels/kernels.h"
#include "tests/gpu/gpu_shapes.h"
#include "tests/gpu/gpu_test.h"

namespace {

namespace k = trace::kernels;
namespace kc = trace::kernels::cuda;
namespace shapes = trace::gpu_shapes;

k::KernelContext CpuRef() {
  k::KernelContext ctx;
  ctx.numerics = k::Numerics::kCanonical;
  ctx.impl = k::Impl::kReference;
  return ctx;
}

kc::CudaContext GpuCanonical() {
  kc::CudaContext ctx;
  ctx.numerics = k::Numerics::kCanonical;
  return ctx;  // null stream: the legacy default stream, ordered with cudaMemcpy
}

std::vector<float> RandomFloats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weights in `dtype`, as raw bytes, from random floats.
std::vector<uint8_t> RandomWeights(k::DType dtype, size_t n, uint64_t seed, float scale) {
  const std::vector<float> f = RandomFloats(n, seed, scale);
  std::vector<uint8_t> bytes(n * k::DTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) {
    if (dtype == k::DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f[i], 4);
    } else {
      const uint16_t h = dtype == k::DType::kBF16 ? k::F32ToBf16RoundNearestEven(f[i])
                                                  : k::F32ToF16RoundNearestEven(f[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

// A device copy of a host array (or, with data == nullptr, uninitialised device memory).
struct DeviceArray {
  kc::DeviceBuffer buffer;
  static DeviceArray From(const void* data, size_t bytes) {
    DeviceArray a;
    auto r = kc::DeviceBuffer::Allocate(bytes + 64, "test array");
    if (!r.ok()) {
      std::printf("  allocation failed: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    a.buffer = std::move(r).value();
    if (data != nullptr && bytes > 0 && !kc::CopyToDevice(a.buffer.data(), data, bytes).ok()) {
      std::abort();
    }
    return a;
  }
  template <typename T>
  static DeviceArray FromVector(const std::vector<T>& v) {
    return From(v.data(), v.size() * sizeof(T));
  }
  template <typename T>
  T* get() const {
    return buffer.as<T>();
  }
};

std::vector<float> Download(const float* device, size_t n) {
  std::vector<float> host(n);
  if (!kc::CopyToHost(host.data(), device, n * sizeof(float)).ok()) std::abort();
  return host;
}

bool SyncOk(const char* what) {
  trace::Status st = kc::CheckLastLaunch(what);
  if (st.ok()) {
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) st = kc::CudaError(err, what, __FILE__, __LINE__);
  }
  if (!st.ok()) {
    std::printf("  %s\n", st.ToString().c_str());
    trace::gputest::CurrentFailed() = true;
  }
  return st.ok();
}

const k::DType kDTypes[] = {k::DType::kBF16, k::DType::kF16, k::DType::kF32};

// The shapes live in tests/gpu/gpu_shapes.h, shared with the CPU simulation of the kernels'
// schedules (tests/kernels/cuda_schedule_test.cc), which runs these very launches in CI.
using trace::gpu_shapes::MatMulShape;

void CheckMatMul(k::DType dtype, const MatMulShape& s, bool with_bias, int64_t x_offset) {
  const std::string what = std::string("MatMul ") + k::DTypeName(dtype) +
                           " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                           " K=" + std::to_string(s.K) + (with_bias ? " +bias" : "") +
                           (x_offset ? " misaligned-x" : "");
  const uint64_t seed = static_cast<uint64_t>(s.M * 1000003 + s.N * 101 + s.K);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(s.M * s.K), seed);
  const std::vector<uint8_t> w =
      RandomWeights(dtype, static_cast<size_t>(s.N * s.K), seed + 1, 1.0f / std::sqrt(float(s.K)));
  const std::vector<float> bias = RandomFloats(static_cast<size_t>(s.N), seed + 2, 0.1f);

  k::WeightView host_w{w.data(), dtype, s.N, s.K};
  std::vector<float> expected(static_cast<size_t>(s.M * s.N));
  k::MatMul(CpuRef(), x.data(), s.M, host_w, with_bias ? bias.data() : nullptr, expected.data());

  std::vector<float> x_padded(static_cast<size_t>(x_offset), 0.0f);
  x_padded.insert(x_padded.end(), x.begin(), x.end());
  DeviceArray dx = DeviceArray::FromVector(x_padded);
  DeviceArray dw = DeviceArray::FromVector(w);
  DeviceArray db = DeviceArray::FromVector(bias);
  DeviceArray dy = DeviceArray::From(nullptr, expected.size() * sizeof(float));
  const float* xp = dx.get<float>() + x_offset;
  k::WeightView dev_w{dw.get<uint8_t>(), dtype, s.N, s.K};
  const float* bp = with_bias ? db.get<float>() : nullptr;

  kc::MatMul(GpuCanonical(), xp, s.M, dev_w, bp, dy.get<float>());
  if (!SyncOk(what.c_str())) return;
  EXPECT_BITS_EQ((what + " (dispatch)").c_str(), expected.data(),
                 Download(dy.get<float>(), expected.size()).data(), expected.size());
  // Both canonical kernels must agree with the reference for any M, not only the M the
  // dispatch gives them: that is what makes the GEMV/GEMM switch invisible.
  kc::CanonicalGemv(nullptr, xp, s.M, dev_w, bp, dy.get<float>());
  if (!SyncOk(what.c_str())) return;
  EXPECT_BITS_EQ((what + " (gemv)").c_str(), expected.data(),
                 Download(dy.get<float>(), expected.size()).data(), expected.size());
  kc::CanonicalGemm(nullptr, xp, s.M, dev_w, bp, dy.get<float>());
  if (!SyncOk(what.c_str())) return;
  EXPECT_BITS_EQ((what + " (gemm)").c_str(), expected.data(),
                 Download(dy.get<float>(), expected.size()).data(), expected.size());
}

GPU_TEST(MatMulCanonicalEqualsCpuReference) {
  for (k::DType dtype : kDTypes) {
    for (const auto& shape : shapes::kMatMul) {
      if (shape.M * shape.N * shape.K > shapes::kMatMulAllDTypesLimit && dtype != k::DType::kBF16) {
        continue;
      }
      CheckMatMul(dtype, shape, /*with_bias=*/false, /*x_offset=*/0);
    }
  }
}

GPU_TEST(MatMulCanonicalWithBiasAndMisalignedActivations) {
  for (const auto& shape : shapes::kMatMulBiasMisaligned) {
    CheckMatMul(k::DType::kBF16, shape, /*with_bias=*/true, /*x_offset=*/0);
    CheckMatMul(k::DType::kBF16, shape, /*with_bias=*/true, /*x_offset=*/1);
  }
}

GPU_TEST(ExpEqualsCpuOverWideRange) {
  const std::vector<float> x = shapes::ExpInputs(97);
  std::vector<float> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = k::Exp(x[i]);
  DeviceArray dx = DeviceArray::FromVector(x);
  DeviceArray dy = DeviceArray::From(nullptr, x.size() * sizeof(float));
  kc::ExpElementwise(nullptr, dx.get<float>(), static_cast<int64_t>(x.size()), dy.get<float>());
  if (!SyncOk("Exp")) return;
  EXPECT_BITS_EQ("Exp", expected.data(), Download(dy.get<float>(), x.size()).data(), x.size());
}

GPU_TEST(RmsNormEqualsCpuReference) {
  for (k::DType dtype : kDTypes) {
    for (int64_t n : shapes::kRmsNormLengths) {
      for (int64_t M : shapes::kRmsNormRows) {
        const std::string what = std::string("RmsNorm ") + k::DTypeName(dtype) +
                                 " n=" + std::to_string(n) + " M=" + std::to_string(M);
        const std::vector<float> x = RandomFloats(static_cast<size_t>(M * n), n * 7 + M, 3.0f);
        const std::vector<uint8_t> w = RandomWeights(dtype, static_cast<size_t>(n), n, 0.2f);
        k::WeightView hw{w.data(), dtype, 1, n};
        std::vector<float> expected(x.size());
        k::RmsNorm(CpuRef(), x.data(), M, n, hw, 1e-6f, expected.data());
        DeviceArray dx = DeviceArray::FromVector(x);
        DeviceArray dw = DeviceArray::FromVector(w);
        DeviceArray dy = DeviceArray::From(nullptr, x.size() * sizeof(float));
        k::WeightView dwv{dw.get<uint8_t>(), dtype, 1, n};
        kc::RmsNorm(GpuCanonical(), dx.get<float>(), M, n, dwv, 1e-6f, dy.get<float>());
        if (!SyncOk(what.c_str())) return;
        EXPECT_BITS_EQ(what.c_str(), expected.data(), Download(dy.get<float>(), x.size()).data(),
                       x.size());
        // In place (out aliases x), as the engine's q/k norm uses it.
        kc::RmsNorm(GpuCanonical(), dx.get<float>(), M, n, dwv, 1e-6f, dx.get<float>());
        if (!SyncOk(what.c_str())) return;
        EXPECT_BITS_EQ((what + " in place").c_str(), expected.data(),
                       Download(dx.get<float>(), x.size()).data(), x.size());
      }
    }
  }
}

GPU_TEST(EmbeddingEqualsCpuReference) {
  for (k::DType dtype : kDTypes) {
    const int64_t vocab = shapes::kEmbeddingVocab;
    const int64_t cols = shapes::kEmbeddingCols;
    const std::vector<uint8_t> table = RandomWeights(dtype, vocab * cols, 5, 1.0f);
    const std::vector<int32_t> ids(std::begin(shapes::kEmbeddingIds),
                                   std::end(shapes::kEmbeddingIds));
    const int64_t M = static_cast<int64_t>(ids.size());
    k::WeightView ht{table.data(), dtype, vocab, cols};
    std::vector<float> expected(static_cast<size_t>(M * cols));
    k::Embedding(CpuRef(), ht, ids.data(), M, expected.data());
    DeviceArray dt = DeviceArray::FromVector(table);
    DeviceArray di = DeviceArray::FromVector(ids);
    DeviceArray dy = DeviceArray::From(nullptr, expected.size() * sizeof(float));
    k::WeightView dtv{dt.get<uint8_t>(), dtype, vocab, cols};
    kc::Embedding(GpuCanonical(), dtv, di.get<int32_t>(), M, dy.get<float>());
    if (!SyncOk("Embedding")) return;
    EXPECT_BITS_EQ((std::string("Embedding ") + k::DTypeName(dtype)).c_str(), expected.data(),
                   Download(dy.get<float>(), expected.size()).data(), expected.size());
  }
}

GPU_TEST(RopeEqualsCpuReference) {
  for (int64_t head_dim : shapes::kRopeHeadDims) {
    const int64_t max_pos = shapes::kRopeMaxPos;
    const int64_t half = head_dim / 2;
    std::vector<float> cos_t(static_cast<size_t>(max_pos * half));
    std::vector<float> sin_t(cos_t.size());
    k::MakeRopeTables(max_pos, head_dim, 1000000.0, cos_t.data(), sin_t.data());
    const int64_t M = shapes::kRopeRows;
    const int64_t heads = shapes::kRopeHeads;
    std::vector<int32_t> positions(M);
    std::mt19937 rng(3);
    for (auto& p : positions) p = static_cast<int32_t>(rng() % max_pos);
    const std::vector<float> x = RandomFloats(static_cast<size_t>(M * heads * head_dim), 9, 2.0f);
    std::vector<float> expected = x;
    k::Rope(CpuRef(), expected.data(), M, heads, head_dim, positions.data(), cos_t.data(),
            sin_t.data());
    DeviceArray dx = DeviceArray::FromVector(x);
    DeviceArray dp = DeviceArray::FromVector(positions);
    DeviceArray dc = DeviceArray::FromVector(cos_t);
    DeviceArray ds = DeviceArray::FromVector(sin_t);
    kc::Rope(GpuCanonical(), dx.get<float>(), M, heads, head_dim, dp.get<int32_t>(),
             dc.get<float>(), ds.get<float>());
    if (!SyncOk("Rope")) return;
    EXPECT_BITS_EQ(("Rope head_dim=" + std::to_string(head_dim)).c_str(), expected.data(),
                   Download(dx.get<float>(), x.size()).data(), x.size());
  }
}

GPU_TEST(SiluMulAndAddEqualCpuReference) {
  for (int64_t n : shapes::kElementwiseLengths) {
    const std::vector<float> gate = RandomFloats(static_cast<size_t>(n), n, 8.0f);
    const std::vector<float> up = RandomFloats(static_cast<size_t>(n), n + 1, 1.0f);
    std::vector<float> expected_silu(gate.size());
    std::vector<float> expected_add(gate.size());
    k::SiluMul(CpuRef(), gate.data(), up.data(), n, expected_silu.data());
    k::Add(CpuRef(), gate.data(), up.data(), n, expected_add.data());
    DeviceArray dg = DeviceArray::FromVector(gate);
    DeviceArray du = DeviceArray::FromVector(up);
    DeviceArray dy = DeviceArray::From(nullptr, gate.size() * sizeof(float));
    kc::SiluMul(GpuCanonical(), dg.get<float>(), du.get<float>(), n, dy.get<float>());
    if (!SyncOk("SiluMul")) return;
    EXPECT_BITS_EQ(("SiluMul n=" + std::to_string(n)).c_str(), expected_silu.data(),
                   Download(dy.get<float>(), gate.size()).data(), gate.size());
    kc::Add(GpuCanonical(), dg.get<float>(), du.get<float>(), n, dy.get<float>());
    if (!SyncOk("Add")) return;
    EXPECT_BITS_EQ(("Add n=" + std::to_string(n)).c_str(), expected_add.data(),
                   Download(dy.get<float>(), gate.size()).data(), gate.size());
  }
}

GPU_TEST(AttentionEqualsCpuReference) {
  for (const auto& a : shapes::kAttention) {
    const int64_t max_pos = shapes::kAttentionMaxPos;
    const int64_t kv_stride = a.kv_heads * a.head_dim;
    const std::vector<float> kc_host =
        RandomFloats(static_cast<size_t>(max_pos * kv_stride), 11, 1.0f);
    const std::vector<float> vc_host = RandomFloats(kc_host.size(), 12, 1.0f);
    DeviceArray dk = DeviceArray::FromVector(kc_host);
    DeviceArray dv = DeviceArray::FromVector(vc_host);
    const std::vector<int64_t> positions(std::begin(shapes::kAttentionPositions),
                                         std::end(shapes::kAttentionPositions));
    // Batched rows: row r attends at positions[r]; all rows in one AttentionRows call.
    const int64_t rows = static_cast<int64_t>(positions.size());
    const int64_t row_len = a.heads * a.head_dim;
    const std::vector<float> q = RandomFloats(static_cast<size_t>(rows * row_len), 13, 3.0f);
    std::vector<float> expected(q.size());
    std::vector<float> scratch(2 * max_pos);
    for (int64_t r = 0; r < rows; ++r) {
      k::Attention(CpuRef(), q.data() + r * row_len, kc_host.data(), vc_host.data(), positions[r],
                   a.heads, a.kv_heads, a.head_dim, k::canonical::AttentionScale(a.head_dim),
                   scratch.data(), expected.data() + r * row_len);
    }
    DeviceArray dq = DeviceArray::FromVector(q);
    DeviceArray dout = DeviceArray::From(nullptr, q.size() * sizeof(float));
    DeviceArray dscratch = DeviceArray::From(nullptr, rows * a.heads * max_pos * sizeof(float));
    const std::string shape = " heads=" + std::to_string(a.heads) + "/" +
                              std::to_string(a.kv_heads) + " d=" + std::to_string(a.head_dim);
    // One row at a time through the single-row entry point.
    for (int64_t r = 0; r < rows; ++r) {
      kc::Attention(GpuCanonical(), dq.get<float>() + r * row_len, dk.get<float>(), dv.get<float>(),
                    positions[r], a.heads, a.kv_heads, a.head_dim,
                    k::canonical::AttentionScale(a.head_dim), dscratch.get<float>(),
                    dout.get<float>() + r * row_len);
    }
    if (!SyncOk("Attention")) return;
    EXPECT_BITS_EQ(("Attention single rows" + shape).c_str(), expected.data(),
                   Download(dout.get<float>(), q.size()).data(), q.size());
    std::vector<const float*> kp(rows, dk.get<float>());
    std::vector<const float*> vp(rows, dv.get<float>());
    std::vector<int32_t> pos32(positions.begin(), positions.end());
    DeviceArray dkp = DeviceArray::FromVector(kp);
    DeviceArray dvp = DeviceArray::FromVector(vp);
    DeviceArray dpos = DeviceArray::FromVector(pos32);
    kc::AttentionRows(GpuCanonical(), dq.get<float>(), rows, dkp.get<const float*>(),
                      dvp.get<const float*>(), dpos.get<int32_t>(), a.heads, a.kv_heads, a.head_dim,
                      k::canonical::AttentionScale(a.head_dim), 0, dscratch.get<float>(), max_pos,
                      dout.get<float>());
    if (!SyncOk("AttentionRows")) return;
    EXPECT_BITS_EQ(("AttentionRows" + shape).c_str(), expected.data(),
                   Download(dout.get<float>(), q.size()).data(), q.size());

    // Fast (online softmax): not bitwise, but the same attention within 1e-4 relative.
    kc::CudaContext fast = GpuCanonical();
    fast.numerics = k::Numerics::kFast;
    kc::AttentionRows(fast, dq.get<float>(), rows, dkp.get<const float*>(), dvp.get<const float*>(),
                      dpos.get<int32_t>(), a.heads, a.kv_heads, a.head_dim,
                      k::canonical::AttentionScale(a.head_dim), 0, dscratch.get<float>(), max_pos,
                      dout.get<float>());
    if (!SyncOk("fast AttentionRows")) return;
    const std::vector<float> got = Download(dout.get<float>(), q.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      err += (double(got[i]) - expected[i]) * (double(got[i]) - expected[i]);
      norm += double(expected[i]) * expected[i];
    }
    EXPECT_TRUE_MSG(std::sqrt(err / norm) < 1e-4, "fast attention%s: relative L2 error %.3g",
                    shape.c_str(), std::sqrt(err / norm));
  }
}

// The canonical-v2 self-test (kernels/selftest.h, what `trace doctor` runs): every pinned
// digest on the device.
GPU_TEST(PinnedSelfTestDigestsHoldOnGpu) {
  auto results = kc::RunCudaSelfTest(0);
  if (!results.ok()) {
    EXPECT_TRUE_MSG(false, "%s", results.status().ToString().c_str());
    return;
  }
  for (const auto& r : *results) {
    EXPECT_TRUE_MSG(r.ok(), "self-test %s: digest %016llx, pinned %016llx", r.name.c_str(),
                    static_cast<unsigned long long>(r.digest),
                    static_cast<unsigned long long>(r.pinned));
  }
}

GPU_TEST(FastMatMulCloseToCanonical) {
  auto blas = kc::Cublas();  // opened at run time (kernels/cuda/cublas_loader.h)
  if (!blas.ok()) {
    EXPECT_TRUE_MSG(false, "%s", blas.status().ToString().c_str());
    return;
  }
  cublasHandle_t handle = nullptr;
  if ((*blas)->Create(&handle) != CUBLAS_STATUS_SUCCESS) {
    EXPECT_TRUE_MSG(false, "cublasCreate failed");
    return;
  }
  for (const auto& s :
       {MatMulShape{1, 1024, 1024}, MatMulShape{64, 3072, 1024}, MatMulShape{300, 896, 4864}}) {
    const std::vector<float> x = RandomFloats(static_cast<size_t>(s.M * s.K), 21);
    const std::vector<uint8_t> w = RandomWeights(k::DType::kBF16, static_cast<size_t>(s.N * s.K),
                                                 22, 1.0f / std::sqrt(float(s.K)));
    DeviceArray dx = DeviceArray::FromVector(x);
    DeviceArray dw = DeviceArray::FromVector(w);
    DeviceArray dy = DeviceArray::From(nullptr, s.M * s.N * sizeof(float));
    DeviceArray dref = DeviceArray::From(nullptr, s.M * s.N * sizeof(float));
    DeviceArray work = DeviceArray::From(nullptr, s.M * s.K * 2);
    k::WeightView dwv{dw.get<uint8_t>(), k::DType::kBF16, s.N, s.K};
    kc::CudaContext fast = GpuCanonical();
    fast.numerics = k::Numerics::kFast;
    fast.cublas = handle;
    fast.workspace = work.buffer.data();
    fast.workspace_bytes = work.buffer.bytes();
    kc::MatMul(fast, dx.get<float>(), s.M, dwv, nullptr, dy.get<float>());
    kc::MatMul(GpuCanonical(), dx.get<float>(), s.M, dwv, nullptr, dref.get<float>());
    if (!SyncOk("fast MatMul")) break;
    const auto got = Download(dy.get<float>(), s.M * s.N);
    const auto ref = Download(dref.get<float>(), s.M * s.N);
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
      norm += double(ref[i]) * ref[i];
    }
    // Activations are rounded to bf16 (8 mantissa bits): about 2^-9 relative per product.
    EXPECT_TRUE_MSG(std::sqrt(err / norm) < 1e-2, "fast MatMul M=%lld: relative L2 error %.3g",
                    static_cast<long long>(s.M), std::sqrt(err / norm));
  }
  (*blas)->Destroy(handle);
}

}  // namespace
