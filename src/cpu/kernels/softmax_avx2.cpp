// AVX2 softmax (softmax.h), bit-identical to the scalar twin: the 16 partial sums are two
// registers (lanes 0-7 and 8-15 of each 16-element chunk).
#include <limits>

#include "cpu/kernels/math_avx2.h"
#include "cpu/kernels/softmax.h"

namespace ggflow::cpu::detail {

void softmax_avx2(const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
                  int64_t n, int64_t r0, int64_t r1) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m256 vscale = _mm256_set1_ps(scale), vninf = _mm256_set1_ps(ninf);
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    const float* pm = mask ? mask + r * ms : nullptr;
    float* py = y + r * ys;
    __m256 vmx = vninf;
    for (int64_t i = 0; i < n; i += 8) {
      const __m256i k = m256::tail_mask(n - i);
      __m256 s = _mm256_mul_ps(_mm256_maskload_ps(px + i, k), vscale);
      if (pm) s = _mm256_add_ps(s, _mm256_maskload_ps(pm + i, k));
      _mm256_maskstore_ps(py + i, k, s);
      vmx = _mm256_max_ps(m256::select(_mm256_castsi256_ps(k), vninf, s), vmx);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    if (mx == ninf) {
      for (int64_t i = 0; i < n; ++i) py[i] = 0.0f;
      continue;
    }
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0, half = 0; i < n; i += 8, half ^= 1) {
      const __m256i k = m256::tail_mask(n - i);
      __m256 e = m256::exp(_mm256_sub_ps(_mm256_maskload_ps(py + i, k), vm));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(k));  // lanes past n add +0
      _mm256_maskstore_ps(py + i, k, e);
      acc[half] = _mm256_add_ps(acc[half], e);
    }
    const __m256 vsum = _mm256_set1_ps(m256::tree16(acc[0], acc[1]));
    for (int64_t i = 0; i < n; i += 8) {
      const __m256i k = m256::tail_mask(n - i);
      _mm256_maskstore_ps(py + i, k, _mm256_div_ps(_mm256_maskload_ps(py + i, k), vsum));
    }
  }
}

}  // namespace ggflow::cpu::detail
