// Scalar twin of softmax (softmax.h): the specification of its bits.
#include "cpu/kernels/softmax.h"

#include <limits>

#include "cpu/kernels/math.h"

namespace ggflow::cpu {

void softmax(Isa isa, const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
             int64_t n, int64_t r0, int64_t r1) {
  if (n <= 0) return;
  if (isa == Isa::avx512) return detail::softmax_avx512(x, xs, mask, ms, scale, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::softmax_avx2(x, xs, mask, ms, scale, y, ys, n, r0, r1);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t r = r0; r < r1; ++r) {
    const float* px = x + r * xs;
    const float* pm = mask ? mask + r * ms : nullptr;
    float* py = y + r * ys;
    float mx = ninf;
    for (int64_t i = 0; i < n; ++i) {
      float s = px[i] * scale;
      if (pm) s = s + pm[i];
      py[i] = s;
      mx = math::vmax(s, mx);
    }
    if (mx == ninf) {
      for (int64_t i = 0; i < n; ++i) py[i] = 0.0f;
      continue;
    }
    float acc[16] = {};
    for (int64_t i = 0; i < n; ++i) {
      const float e = math::exp(py[i] - mx);
      py[i] = e;
      acc[i & 15] = acc[i & 15] + e;
    }
    const float sum = math::tree16(acc);
    for (int64_t i = 0; i < n; ++i) py[i] = py[i] / sum;
  }
}

}  // namespace ggflow::cpu
