// Reference: Rope (rotate-half) and MakeRopeTables (host tables in double, rounded).
// Shapes: x [M, n_heads, head_dim] f32 in place, positions [M], tables
// [max_pos, head_dim / 2]. For i < d/2: x[i] = x1*c - x2*s; x[i + d/2] = x2*c + x1*s,
// each product rounded, then the add/sub
// (canonical::RopeRotate). Check: ctest -R 'KernelsRope'.
#include <cmath>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels {

double RopeFrequency(int64_t i, int64_t head_dim, double theta, const RopeScaling& scaling) {
  const double f =
      1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
  if (scaling.type == RopeScaling::Type::kLinear) return f / scaling.factor;
  if (scaling.type == RopeScaling::Type::kFreqFactors) {
    return f / static_cast<double>(scaling.freq_factors[static_cast<size_t>(i)]);
  }
  if (scaling.type != RopeScaling::Type::kLlama3) return f;
  constexpr double kPi = 3.14159265358979323846;
  const double wavelength = 2.0 * kPi / f;
  const double old_len = scaling.original_max_position_embeddings;
  if (wavelength < old_len / scaling.high_freq_factor) return f;  // high frequencies: kept
  if (wavelength > old_len / scaling.low_freq_factor) return f / scaling.factor;
  const double smooth = (old_len / wavelength - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1.0 - smooth) * f / scaling.factor + smooth * f;
}

void MakeRopeTables(int64_t max_pos, int64_t head_dim, double theta, float* cos_table,
                    float* sin_table, const RopeScaling& scaling) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = RopeFrequency(i, head_dim, theta, scaling);
    for (int64_t p = 0; p < max_pos; ++p) {
      const double angle = static_cast<double>(p) * inv_freq;
      cos_table[p * half + i] = static_cast<float>(std::cos(angle));
      sin_table[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

namespace ref {

void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  RopeHeads(x, M, n_heads, head_dim, positions, cos_table, sin_table,
            [](float* v, const float* c, const float* s, int64_t half) {
              for (int64_t i = 0; i < half; ++i) {
                canonical::RopeRotate(v[i], v[i + half], c[i], s[i], &v[i], &v[i + half]);
              }
            });
}

}  // namespace ref
}  // namespace trace::kernels
