// avx512 elementwise arithmetic (elementwise.h), bit-identical to elementwise.cpp.
#include "cpu/kernels/elementwise.h"
#include "cpu/kernels/math_avx512.h"

namespace ggflow::cpu::detail {

void binary_avx512(Binary op, const float* a, int64_t as, const float* b, int64_t bs, float* y, int64_t ys, int64_t n,
                 int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    if (op == Binary::add)
      m512::map2(a + r * as, b + r * bs, y + r * ys, n, [](__m512 u, __m512 v) { return _mm512_add_ps(u, v); });
    else
      m512::map2(a + r * as, b + r * bs, y + r * ys, n, [](__m512 u, __m512 v) { return _mm512_mul_ps(u, v); });
  }
}

void scale_avx512(const float* x, int64_t xs, float s, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t r = r0; r < r1; ++r) m512::map(x + r * xs, y + r * ys, n, [&](__m512 v) { return _mm512_mul_ps(v, vs); });
}

}  // namespace ggflow::cpu::detail
