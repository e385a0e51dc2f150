// Reference: mixture-of-experts routing and combine (canonical::RouteRow, CombineStep,
// SharedExpertWeight). Shapes: logits [M, E]; ids, weights [M, k]; expert_out [M, k, n];
// out [M, n]; the shared expert's shared_out [M, n] and gate_logits [M].
// Both are a small part of an MoE layer's work (the experts' MatMuls dominate), so this
// scalar code is also what the dispatch runs with AVX2 (elementwise: the compiler may
// vectorise the combine across i, which changes no bit).
// Check: ctest -R 'KernelsMoe'.
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void MoeRouteRows(const float* logits, int64_t M, int64_t E, int64_t k, bool normalize,
                  int32_t* ids, float* weights) {
  std::vector<float> probs(static_cast<size_t>(E));
  for (int64_t m = 0; m < M; ++m) {
    canonical::RouteRow(logits + m * E, E, k, normalize, probs.data(), ids + m * k,
                        weights + m * k);
  }
}

void MoeCombine(const float* expert_out, const int32_t* ids, const float* weights, int64_t M,
                int64_t k, int64_t n, float* out) {
  for (int64_t m = 0; m < M; ++m) {
    float* o = out + m * n;
    for (int64_t i = 0; i < n; ++i) o[i] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      if (ids[m * k + j] < 0) continue;  // dropped by capacity (fast only)
      const float w = weights[m * k + j];
      const float* y = expert_out + (m * k + j) * n;
      for (int64_t i = 0; i < n; ++i) o[i] = canonical::CombineStep(o[i], w, y[i]);
    }
  }
}

void MoeAddShared(const float* shared_out, const float* gate_logits, int64_t M, int64_t n,
                  float* out) {
  for (int64_t m = 0; m < M; ++m) {
    const float w = canonical::SharedExpertWeight(gate_logits[m]);
    for (int64_t i = 0; i < n; ++i) {
      out[m * n + i] = canonical::CombineStep(out[m * n + i], w, shared_out[m * n + i]);
    }
  }
}

}  // namespace trace::kernels::ref
