// avx512 activations (act.h), bit-identical to the scalar twin in act.cpp.
#include "cpu/kernels/act.h"
#include "cpu/kernels/math_avx512.h"

namespace ggflow::cpu::detail {

namespace {
template <class F>
void rows1(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r) m512::map(x + r * xs, y + r * ys, n, f);
}
template <class F>
void rows2(const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n, int64_t r0,
           int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r)
    m512::map2(g + r * gs, u + r * us, y + r * ys, n, [&](__m512 a, __m512 b) { return _mm512_mul_ps(f(a), b); });
}
}  // namespace

void activation_avx512(Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::silu(v); });
    case Act::gelu_erf: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_erf(v); });
    case Act::gelu_tanh: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_tanh(v); });
  }
}

void glu_avx512(Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
              int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::silu(v); });
    case Act::gelu_erf: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_erf(v); });
    case Act::gelu_tanh: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_tanh(v); });
  }
}

}  // namespace ggflow::cpu::detail
