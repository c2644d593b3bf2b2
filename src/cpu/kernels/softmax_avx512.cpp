// AVX-512 softmax (softmax.h), bit-identical to the scalar twin.
#include <limits>

#include "cpu/kernels/math_avx512.h"
#include "cpu/kernels/softmax.h"

namespace ggflow::cpu::detail {

void softmax_avx512(const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
                    int64_t n, int64_t r0, int64_t r1) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    const float* pm = mask ? mask + r * ms : nullptr;
    float* py = y + r * ys;
    __m512 vmx = _mm512_set1_ps(ninf);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = m512::tail_mask(n - i);
      __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, px + i), vscale);
      if (pm) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(k, pm + i));
      _mm512_mask_storeu_ps(py + i, k, s);
      vmx = _mm512_mask_max_ps(vmx, k, s, vmx);
    }
    const float mx = _mm512_reduce_max_ps(vmx);
    if (mx == ninf) {
      for (int64_t i = 0; i < n; ++i) py[i] = 0.0f;
      continue;
    }
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = m512::tail_mask(n - i);
      const __m512 e = m512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, py + i), vm));
      _mm512_mask_storeu_ps(py + i, k, e);
      acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    const __m512 vsum = _mm512_set1_ps(m512::tree16(acc));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = m512::tail_mask(n - i);
      _mm512_mask_storeu_ps(py + i, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, py + i), vsum));
    }
  }
}

}  // namespace ggflow::cpu::detail
