// Scalar twin of RMSNorm (norm.h): the specification of its bits.
#include "cpu/kernels/norm.h"

#include <cmath>

#include "cpu/kernels/math.h"

namespace ggflow::cpu {

void rmsnorm(Isa isa, const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
             int64_t r0, int64_t r1) {
  if (n <= 0) return;
  if (isa == Isa::avx512) return detail::rmsnorm_avx512(x, xs, gamma, eps, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::rmsnorm_avx2(x, xs, gamma, eps, y, ys, n, r0, r1);
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    float acc[16] = {};
    for (int64_t i = 0; i < n; ++i) acc[i & 15] = math::fma_(px[i], px[i], acc[i & 15]);
    const float sum = math::tree16(acc);
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    if (gamma)
      for (int64_t i = 0; i < n; ++i) py[i] = (px[i] * scale) * gamma[i];
    else
      for (int64_t i = 0; i < n; ++i) py[i] = px[i] * scale;
  }
}

void layernorm(Isa isa, const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  if (n <= 0) return;
  if (isa == Isa::avx512) return detail::layernorm_avx512(x, xs, eps, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::layernorm_avx2(x, xs, eps, y, ys, n, r0, r1);
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    float acc[16] = {};
    for (int64_t i = 0; i < n; ++i) acc[i & 15] += px[i];
    const float mean = math::tree16(acc) / static_cast<float>(n);
    float sq[16] = {};
    for (int64_t i = 0; i < n; ++i) {
      const float d = px[i] - mean;
      sq[i & 15] = math::fma_(d, d, sq[i & 15]);
    }
    const float inv = 1.0f / std::sqrt(math::tree16(sq) / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) py[i] = (px[i] - mean) * inv;
  }
}

}  // namespace ggflow::cpu
