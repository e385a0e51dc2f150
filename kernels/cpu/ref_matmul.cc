// Reference: MatMul, y[m, n] = CanonicalDot(x[m, :], f32(w[n, :])) (+ bias[n]).
// Shapes: x [M, K] f32, w [N, K] bf16|f16|f32, bias [N] or null, y [M, N].
// Variants: canonical (the contract's order) and fast (8 partial sums along K, then a
// pairwise fold: a conventional order, not the contract's). The dispatch passes a column
// range [n_begin, n_end). Check: ctest -R 'KernelsMatMul'.
#include <cmath>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels {

void MatMulRowsCanonical(const float* x, int64_t M, const WeightView& w, const float* bias,
                         float* y, int64_t n_begin, int64_t n_end, DotFn dot) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(K));
  for (int64_t n = n_begin; n < n_end; ++n) {
    WeightRowToF32(w, n, K, row.data());
    for (int64_t m = 0; m < M; ++m) {
      float v = dot(x + m * K, row.data(), K);
      if (bias != nullptr) v = canonical::AddBias(v, bias[n]);
      y[m * N + n] = v;
    }
  }
}

}  // namespace trace::kernels

namespace trace::kernels::ref {

void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end) {
  MatMulRowsCanonical(x, M, w, bias, y, n_begin, n_end, canonical::Dot);
}

void MatMulFast(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(K));
  for (int64_t n = n_begin; n < n_end; ++n) {
    WeightRowToF32(w, n, K, row.data());
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * K;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        for (int i = 0; i < 8; ++i) acc[i] = std::fma(xr[k + i], row[k + i], acc[i]);
      }
      for (; k < K; ++k) acc[k % 8] = std::fma(xr[k], row[k], acc[k % 8]);
      float v = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
      if (bias != nullptr) v = v + bias[n];
      y[m * N + n] = v;
    }
  }
}

}  // namespace trace::kernels::ref
