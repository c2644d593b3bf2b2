// AVX-512 RMSNorm (norm.h), bit-identical to the scalar twin: one register holds the 16 partial
// sums (lane i takes elements i, i+16, ...), the tail is a masked (zero-filled) load.
#include <cmath>

#include "cpu/kernels/math_avx512.h"
#include "cpu/kernels/norm.h"

namespace ggflow::cpu::detail {

void rmsnorm_avx512(const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
                    int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(px + i);
      acc = _mm512_fmadd_ps(v, v, acc);
    }
    if (i < n) {
      const __m512 v = _mm512_maskz_loadu_ps(m512::tail_mask(n - i), px + i);
      acc = _mm512_fmadd_ps(v, v, acc);  // zero lanes add +0 to a partial that is never -0
    }
    const float sum = m512::tree16(acc);
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    const __m512 vs = _mm512_set1_ps(scale);
    if (gamma)
      m512::map2(px, gamma, py, n, [&](__m512 a, __m512 g) { return _mm512_mul_ps(_mm512_mul_ps(a, vs), g); });
    else
      m512::map(px, py, n, [&](__m512 a) { return _mm512_mul_ps(a, vs); });
  }
}

}  // namespace ggflow::cpu::detail
