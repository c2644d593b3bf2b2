// Activations and gated linear units over rows: SiLU, GELU (erf and tanh forms, and GGML's f16
// table), SwiGLU, GeGLU. Per element: y = act(x) with act from math.h (one definition for every
// ISA) or, for gelu_f16, ir/gelu_f16.h's table (every ISA reads the same entries); the GLUs round
// act(g) to f32 and then multiply by u (y = act(g) * u, two roundings, as the IR's Swish/Gelu node
// followed by Multiply). Elementwise, so every ISA gives the same bits trivially once act does.
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

enum class Act { silu, gelu_erf, gelu_tanh, gelu_f16 };

// Rows [r0, r1) of n elements: row r of x at x + r*xs, of y at y + r*ys (strides in floats).
// y may equal x (in place).
void activation(Isa isa, Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
// y = act(g) * u. g and u may be two halves of one fused gate/up output (pass its stride); y may
// equal g or u.
void glu(Isa isa, Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
         int64_t r0, int64_t r1);

// One contiguous row of n.
inline void silu(Isa isa, const float* x, float* y, int64_t n) { activation(isa, Act::silu, x, 0, y, 0, n, 0, 1); }
inline void gelu(Isa isa, bool tanh_form, const float* x, float* y, int64_t n) {
  activation(isa, tanh_form ? Act::gelu_tanh : Act::gelu_erf, x, 0, y, 0, n, 0, 1);
}
inline void swiglu(Isa isa, const float* g, const float* u, float* y, int64_t n) {
  glu(isa, Act::silu, g, 0, u, 0, y, 0, n, 0, 1);
}
inline void geglu(Isa isa, bool tanh_form, const float* g, const float* u, float* y, int64_t n) {
  glu(isa, tanh_form ? Act::gelu_tanh : Act::gelu_erf, g, 0, u, 0, y, 0, n, 0, 1);
}

namespace detail {
void activation_avx2(Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
void activation_avx512(Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
void glu_avx2(Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
              int64_t r0, int64_t r1);
void glu_avx512(Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
                int64_t r0, int64_t r1);
}  // namespace detail

}  // namespace ggflow::cpu
