// avx512 array forms of math.h's functions (bit-identical to the scalar twin).
#include "cpu/kernels/math_avx512.h"

namespace ggflow::cpu::detail {

void exp_avx512(const float* x, float* y, int64_t n) {
  m512::map(x, y, n, [](auto v) { return m512::exp(v); });
}
void tanh_avx512(const float* x, float* y, int64_t n) {
  m512::map(x, y, n, [](auto v) { return m512::tanh(v); });
}

}  // namespace ggflow::cpu::detail
