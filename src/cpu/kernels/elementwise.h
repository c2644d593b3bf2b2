// Elementwise arithmetic over rows: add, mul (either with a row broadcast of a [n] vector) and
// scale. One IEEE operation per element (y = a + b, a * b, x * s), so every ISA gives the same
// bits and the IR's Add / Multiply give them too.
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

enum class Binary { add, mul };

// Rows [r0, r1) of n elements: y[r*ys + i] = a[r*as + i] op b[r*bs + i]. bs = 0 broadcasts one
// row b[0..n) over all rows (a bias or a norm weight). y may equal a or b.
void binary(Isa isa, Binary op, const float* a, int64_t as, const float* b, int64_t bs, float* y, int64_t ys,
            int64_t n, int64_t r0, int64_t r1);
// y[r*ys + i] = x[r*xs + i] * s.
void scale(Isa isa, const float* x, int64_t xs, float s, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);

// One contiguous row of n.
inline void add(Isa isa, const float* a, const float* b, float* y, int64_t n) {
  binary(isa, Binary::add, a, 0, b, 0, y, 0, n, 0, 1);
}
inline void mul(Isa isa, const float* a, const float* b, float* y, int64_t n) {
  binary(isa, Binary::mul, a, 0, b, 0, y, 0, n, 0, 1);
}
inline void scale(Isa isa, const float* x, float s, float* y, int64_t n) { scale(isa, x, 0, s, y, 0, n, 0, 1); }

namespace detail {
void binary_avx2(Binary op, const float* a, int64_t as, const float* b, int64_t bs, float* y, int64_t ys, int64_t n,
                 int64_t r0, int64_t r1);
void binary_avx512(Binary op, const float* a, int64_t as, const float* b, int64_t bs, float* y, int64_t ys, int64_t n,
                   int64_t r0, int64_t r1);
void scale_avx2(const float* x, int64_t xs, float s, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
void scale_avx512(const float* x, int64_t xs, float s, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
}  // namespace detail

}  // namespace ggflow::cpu
