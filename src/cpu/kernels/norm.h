// RMSNorm over rows, the IR's RMSNorm (ir/ops/reduce.cpp): y = x * (1 / sqrt(mean(x^2) + eps)),
// times gamma when given. Passing the norm weight as gamma fuses the builder's
// `Multiply(RMSNorm(x), w)`: (x * scale) * w is exactly what the two ops compute, element by element.
//
// Arithmetic (the scalar twin in norm.cpp; AVX2 and AVX-512 give the same bits):
//   acc[i % 16] = fma(x[i], x[i], acc[i % 16]) for i = 0..n-1 in order (16 partial sums from +0)
//   sum   = math::tree16(acc)                    (acc[i] += acc[i+w] for w = 8, 4, 2, 1)
//   scale = 1 / sqrt(sum / float(n) + eps)       (each operation rounded: /, +, sqrt, /)
//   y[i]  = x[i] * scale, or (x[i] * scale) * gamma[i]
// Against the IR (sequential sum of rounded squares, no FMA) the difference is the summation
// order only. Tested (test_kernels_norm): within 1e-6 relative of a double reference (2.1e-7
// measured, n up to 2049) and within 2e-6 of the IR's RMSNorm kernel (8.5e-7 measured).
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

// Rows [r0, r1) of n elements (row r at x + r*xs, y + r*ys); gamma: [n] or nullptr. y may equal x.
// n == 0 does nothing.
void rmsnorm(Isa isa, const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
             int64_t r0, int64_t r1);

// LayerNorm over rows, the IR's LayerNorm (ir/ops/reduce.cpp; GGML's NORM, no weights):
//   acc[i % 16] += x[i] for i = 0..n-1 in order (16 partial sums from +0)
//   mean  = math::tree16(acc) / float(n)
//   sq[i % 16] = fma(d_i, d_i, sq[i % 16]) with d_i = x[i] - mean   (16 partial sums from +0)
//   inv   = 1 / sqrt(math::tree16(sq) / float(n) + eps)   (each operation rounded)
//   y[i]  = (x[i] - mean) * inv
// AVX2 and AVX-512 give the same bits (tested by memcmp in test_kernels_norm, with the bounds
// against a double reference and the IR's sequential sums).
void layernorm(Isa isa, const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);

namespace detail {
void layernorm_avx2(const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
void layernorm_avx512(const float* x, int64_t xs, float eps, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1);
void rmsnorm_avx2(const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
                  int64_t r0, int64_t r1);
void rmsnorm_avx512(const float* x, int64_t xs, const float* gamma, float eps, float* y, int64_t ys, int64_t n,
                    int64_t r0, int64_t r1);
}  // namespace detail

}  // namespace ggflow::cpu
