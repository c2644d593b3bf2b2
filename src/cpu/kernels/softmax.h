// Softmax over rows with an optional additive mask and a scale, as non-fused attention uses it
// (GGML's soft_max_ext without ALiBi): y = softmax(x * scale + mask).
//
// Arithmetic (the scalar twin in softmax.cpp; AVX2 and AVX-512 give the same bits):
//   s[i]  = x[i] * scale, then + mask[i] when a mask is given (two roundings, no FMA)
//   m     = max_i s[i]                                   (exact in any order)
//   e[i]  = math::exp(s[i] - m)
//   acc[i % 16] += e[i] in order from +0 (16 partial sums), sum = math::tree16(acc)
//   y[i]  = e[i] / sum
// A row whose entries are all -inf gives zeros (as the IR's Softmax). A row containing NaN gives
// NaN outputs on every ISA (which NaN is unspecified).
// Against the IR (sequential sum, libm exp, division) the difference is exp's < 1 ulp and the sum
// order. Tested (test_kernels_norm): |y - ref| <= 2e-6 (|ref| + 1e-4 max ref) against a double
// reference (7.7e-7 measured, n up to 4097), and 4e-6 + 5e-7 sqrt(n) against the IR's kernels (the
// IR's sequential f32 sum carries ~sqrt(n) ulp itself).
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

// Rows [r0, r1) of n: x + r*xs, y + r*ys, mask + r*ms (mask may be nullptr; ms = 0 shares one
// mask row). y may equal x.
void softmax(Isa isa, const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
             int64_t n, int64_t r0, int64_t r1);

namespace detail {
void softmax_avx2(const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
                  int64_t n, int64_t r0, int64_t r1);
void softmax_avx512(const float* x, int64_t xs, const float* mask, int64_t ms, float scale, float* y, int64_t ys,
                    int64_t n, int64_t r0, int64_t r1);
}  // namespace detail

}  // namespace ggflow::cpu
