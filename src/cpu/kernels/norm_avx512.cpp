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

void layernorm_avx512(const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    float* py = y + r * ys;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(px + i));
    const __mmask16 tail = i < n ? m512::tail_mask(n - i) : __mmask16(0);
    if (i < n) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail, px + i));  // + (+0) keeps a partial
    const float mean = m512::tree16(acc) / static_cast<float>(n);
    const __m512 vm = _mm512_set1_ps(mean);
    __m512 sq = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(px + i), vm);
      sq = _mm512_fmadd_ps(d, d, sq);
    }
    if (i < n) {
      const __m512 d = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, px + i), vm);  // 0 outside the row
      sq = _mm512_fmadd_ps(d, d, sq);
    }
    const float inv = 1.0f / std::sqrt(m512::tree16(sq) / static_cast<float>(n) + eps);
    const __m512 vi = _mm512_set1_ps(inv);
    m512::map(px, py, n, [&](__m512 a) { return _mm512_mul_ps(_mm512_sub_ps(a, vm), vi); });
  }
}

}  // namespace ggflow::cpu::detail
