// AVX2 RMSNorm (norm.h), bit-identical to the scalar twin: the 16 partial sums live in two
// registers (lanes 0-7 and 8-15 of each 16-element chunk).
#include <cmath>

#include "cpu/kernels/math_avx2.h"
#include "cpu/kernels/norm.h"

namespace ggflow::cpu::detail {

void rmsnorm_avx2(const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
                  int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 a = _mm256_loadu_ps(px + i), b = _mm256_loadu_ps(px + i + 8);
      lo = _mm256_fmadd_ps(a, a, lo);
      hi = _mm256_fmadd_ps(b, b, hi);
    }
    if (i < n) {
      const int64_t rem = n - i;
      const __m256 a = _mm256_maskload_ps(px + i, m256::tail_mask(rem));
      lo = _mm256_fmadd_ps(a, a, lo);
      if (rem > 8) {
        const __m256 b = _mm256_maskload_ps(px + i + 8, m256::tail_mask(rem - 8));
        hi = _mm256_fmadd_ps(b, b, hi);
      }
    }
    const float sum = m256::tree16(lo, hi);
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
    const __m256 vs = _mm256_set1_ps(scale);
    if (gamma)
      m256::map2(px, gamma, py, n, [&](__m256 a, __m256 g) { return _mm256_mul_ps(_mm256_mul_ps(a, vs), g); });
    else
      m256::map(px, py, n, [&](__m256 a) { return _mm256_mul_ps(a, vs); });
  }
}

void layernorm_avx2(const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(px + i));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(px + i + 8));
    }
    const int64_t rem = n - i;
    if (rem > 0) {  // masked loads read +0 outside the row: + (+0) keeps a partial
      lo = _mm256_add_ps(lo, _mm256_maskload_ps(px + i, m256::tail_mask(rem)));
      if (rem > 8) hi = _mm256_add_ps(hi, _mm256_maskload_ps(px + i + 8, m256::tail_mask(rem - 8)));
    }
    const float mean = m256::tree16(lo, hi) / static_cast<float>(n);
    const __m256 vm = _mm256_set1_ps(mean);
    __m256 slo = _mm256_setzero_ps(), shi = _mm256_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
      const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(px + i), vm), b = _mm256_sub_ps(_mm256_loadu_ps(px + i + 8), vm);
      slo = _mm256_fmadd_ps(a, a, slo);
      shi = _mm256_fmadd_ps(b, b, shi);
    }
    if (rem > 0) {  // d = 0 outside the row
      const __m256i m0 = m256::tail_mask(rem);
      const __m256 a = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(px + i, m0), vm), _mm256_castsi256_ps(m0));
      slo = _mm256_fmadd_ps(a, a, slo);
      if (rem > 8) {
        const __m256i m1 = m256::tail_mask(rem - 8);
        const __m256 b = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(px + i + 8, m1), vm), _mm256_castsi256_ps(m1));
        shi = _mm256_fmadd_ps(b, b, shi);
      }
    }
    const float inv = 1.0f / std::sqrt(m256::tree16(slo, shi) / static_cast<float>(n) + eps);
    const __m256 vi = _mm256_set1_ps(inv);
    m256::map(px, py, n, [&](__m256 a) { return _mm256_mul_ps(_mm256_sub_ps(a, vm), vi); });
  }
}

}  // namespace ggflow::cpu::detail
