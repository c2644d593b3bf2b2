// avx2 array forms of math.h's functions (bit-identical to the scalar twin).
#include "cpu/kernels/math_avx2.h"

namespace ggflow::cpu::detail {

void exp_avx2(const float* x, float* y, int64_t n) {
  m256::map(x, y, n, [](auto v) { return m256::exp(v); });
}
void tanh_avx2(const float* x, float* y, int64_t n) {
  m256::map(x, y, n, [](auto v) { return m256::tanh(v); });
}

}  // namespace ggflow::cpu::detail
