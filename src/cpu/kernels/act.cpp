// Scalar twin of the activations (act.h) and the ISA dispatch.
#include "cpu/kernels/act.h"

#include "cpu/kernels/math.h"
#include "ir/gelu_f16.h"

namespace ggflow::cpu {

namespace {
template <class F>
void rows1(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * ys + i] = f(x[r * xs + i]);
}
template <class F>
void rows2(const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n, int64_t r0,
           int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const float a = f(g[r * gs + i]);
      y[r * ys + i] = a * u[r * us + i];
    }
}
}  // namespace

void activation(Isa isa, Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  if (isa == Isa::avx512) return detail::activation_avx512(act, x, xs, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::activation_avx2(act, x, xs, y, ys, n, r0, r1);
  switch (act) {
    case Act::silu: return rows1(x, xs, y, ys, n, r0, r1, [](float v) { return math::silu(v); });
    case Act::gelu_erf: return rows1(x, xs, y, ys, n, r0, r1, [](float v) { return math::gelu_erf(v); });
    case Act::gelu_tanh: return rows1(x, xs, y, ys, n, r0, r1, [](float v) { return math::gelu_tanh(v); });
    case Act::gelu_f16: return rows1(x, xs, y, ys, n, r0, r1, [](float v) { return ir::gelu_f16(v); });
  }
}

void glu(Isa isa, Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
         int64_t r0, int64_t r1) {
  if (isa == Isa::avx512) return detail::glu_avx512(act, g, gs, u, us, y, ys, n, r0, r1);
  if (isa == Isa::avx2) return detail::glu_avx2(act, g, gs, u, us, y, ys, n, r0, r1);
  switch (act) {
    case Act::silu: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](float v) { return math::silu(v); });
    case Act::gelu_erf: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](float v) { return math::gelu_erf(v); });
    case Act::gelu_tanh: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](float v) { return math::gelu_tanh(v); });
    case Act::gelu_f16: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](float v) { return ir::gelu_f16(v); });
  }
}

}  // namespace ggflow::cpu
