// Array forms of math.h's functions: the scalar twin and the dispatch.
#include "cpu/kernels/math.h"

namespace ggflow::cpu {

void exp_array(Isa isa, const float* x, float* y, int64_t n) {
  if (isa == Isa::avx512) return detail::exp_avx512(x, y, n);
  if (isa == Isa::avx2) return detail::exp_avx2(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = math::exp(x[i]);
}

void tanh_array(Isa isa, const float* x, float* y, int64_t n) {
  if (isa == Isa::avx512) return detail::tanh_avx512(x, y, n);
  if (isa == Isa::avx2) return detail::tanh_avx2(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = math::tanh(x[i]);
}

}  // namespace ggflow::cpu
