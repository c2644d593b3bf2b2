// Scalar twin of elementwise.h and the ISA dispatch.
#include "cpu/kernels/elementwise.h"

namespace ggflow::cpu {

void binary(Isa isa, Binary op, const float* a, int64_t as, const float* b, int64_t bs, float* y, int64_t ys,
            int64_t n, int64_t r0, int64_t r1) {
  if (isa == Isa::avx512) return detail::binary_avx512(op, a, as, b, bs, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::binary_avx2(op, a, as, b, bs, y, ys, n, r0, r1);
  for (int64_t r = r0; r < r1; ++r) {
    const float *pa = a + r * as, *pb = b + r * bs;
    float* py = y + r * ys;
    if (op == Binary::add)
      for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
    else
      for (int64_t i = 0; i < n; ++i) py[i] = pa[i] * pb[i];
  }
}

void scale(Isa isa, const float* x, int64_t xs, float s, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  if (isa == Isa::avx512) return detail::scale_avx512(x, xs, s, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::scale_avx2(x, xs, s, y, ys, n, r0, r1);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * ys + i] = x[r * xs + i] * s;
}

}  // namespace ggflow::cpu
