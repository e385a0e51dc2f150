#include "kernels/cuda/selftest.h"

#include "kernels/canonical.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"

namespace trace::kernels::cuda {
namespace {

template <typename T>
Result<DeviceBuffer> Upload(const std::vector<T>& host, const char* what) {
  TRACE_ASSIGN_OR_RETURN(DeviceBuffer b,
                         DeviceBuffer::Allocate(host.size() * sizeof(T) + 16, what));
  if (!host.empty())
    TRACE_RETURN_IF_ERROR(CopyToDevice(b.data(), host.data(), host.size() * sizeof(T)));
  return b;
}

}  // namespace

Result<std::vector<SelfTestResult>> RunCudaSelfTest(int ordinal) {
  TRACE_RETURN_IF_ERROR(UseCudaDevice(ordinal));
  CudaContext ctx;  // canonical, the legacy default stream (ordered with cudaMemcpy)
  std::vector<SelfTestResult> results;
  for (const SelfTestCase& c : SelfTestCases()) {
    const int64_t n_out = c.output_size();
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer a, Upload(c.a, "self-test a"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer b, Upload(c.b, "self-test b"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer cc, Upload(c.c, "self-test c"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer w, Upload(c.weights, "self-test weights"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer bias, Upload(c.bias, "self-test bias"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer ids, Upload(c.ids, "self-test ids"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer cos_t, Upload(c.cos_table, "self-test cos"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer sin_t, Upload(c.sin_table, "self-test sin"));
    TRACE_ASSIGN_OR_RETURN(DeviceBuffer out,
                           DeviceBuffer::Allocate(n_out * sizeof(float) + 16, "self-test output"));
    TRACE_ASSIGN_OR_RETURN(
        DeviceBuffer scratch,
        DeviceBuffer::Allocate(static_cast<size_t>(c.heads * (c.pos + 1)) * 4 + 16, "scratch"));
    WeightView wv = c.weight_view();
    wv.data = w.data();
    switch (c.op) {
      case SelfTestCase::Op::kExp:
        ExpElementwise(ctx.stream, a.as<float>(), c.K, out.as<float>());
        break;
      case SelfTestCase::Op::kMatMul:
        MatMul(ctx, a.as<float>(), c.M, wv, c.bias.empty() ? nullptr : bias.as<float>(),
               out.as<float>());
        break;
      case SelfTestCase::Op::kRmsNorm:
        RmsNorm(ctx, a.as<float>(), c.M, c.K, WeightView{w.data(), c.dtype, 1, c.K}, c.eps,
                out.as<float>());
        break;
      case SelfTestCase::Op::kEmbedding:
        Embedding(ctx, wv, ids.as<int32_t>(), c.M, out.as<float>());
        break;
      case SelfTestCase::Op::kRope:
        Rope(ctx, a.as<float>(), c.M, c.heads, c.head_dim, ids.as<int32_t>(), cos_t.as<float>(),
             sin_t.as<float>());
        CUDA_CHECK(
            cudaMemcpy(out.data(), a.data(), n_out * sizeof(float), cudaMemcpyDeviceToDevice));
        break;
      case SelfTestCase::Op::kSiluMul:
        SiluMul(ctx, a.as<float>(), b.as<float>(), c.K, out.as<float>());
        break;
      case SelfTestCase::Op::kAdd:
        Add(ctx, a.as<float>(), b.as<float>(), c.K, out.as<float>());
        break;
      case SelfTestCase::Op::kAttention:
        Attention(ctx, a.as<float>(), b.as<float>(), cc.as<float>(), c.pos, c.heads, c.kv_heads,
                  c.head_dim, canonical::AttentionScale(c.head_dim), scratch.as<float>(),
                  out.as<float>());
        break;
    }
    TRACE_RETURN_IF_ERROR(CheckLastLaunch(c.name.c_str()));
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> host(static_cast<size_t>(n_out));
    TRACE_RETURN_IF_ERROR(CopyToHost(host.data(), out.data(), host.size() * sizeof(float)));
    results.push_back({c.name, SelfTestDigest(host.data(), n_out), c.pinned});
  }
  return results;
}

}  // namespace trace::kernels::cuda
