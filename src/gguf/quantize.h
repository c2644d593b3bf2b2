// Quantization to a GGML block type: the inverse of dequant.h, for the types ggflow writes: Q8_0
// at run time (the quantized KV cache) and Q4_0 at load (a draft model's matrices; requantize).
//
// Q8_0. The arithmetic is llama.cpp's x86 quantize_row_q8_0
// (the AVX path its set_rows into a q8_0 cache runs), which is also the matmul kernels' activation
// quantizer (cpu/kernels/quant_act.h, qa32: its scalar twin calls q8_0_codes), so one definition
// serves both. Per block of 32 values x[0..31]:
//   amax = max over i of (bits(x[i]) & 0x7FFFFFFF) as an unsigned integer (order-free; NaN when
//          any x[i] is NaN, inf when any is +-inf and none is NaN)
//   dr   = amax / 127.0f;   id = amax != 0 ? 127.0f / amax : 0.0f      (f32 divisions)
//   v    = x[i] * id, then v > -127 ? v : -127, v < 127 ? v : 127       (NaN -> -127)
//   q[i] = round-to-nearest-even(v)
//   d    = f32_to_f16(dr)                      (block_q8_0: f16 d, then q[0..31]: 34 bytes)
// Dequantized (dequant.h) each value is f16_to_f32(d) * q[i], exact in f32.
//
// Q4_0: llama.cpp's quantize_row_q4_0_ref (what llama-quantize writes without an importance
// matrix; the gguf package's Q4_0.quantize_blocks is the same arithmetic). Per block x[0..31]:
//   m    = the first x[i] of largest |x[i]|;   d = m / -8.0f;   id = d != 0 ? 1.0f / d : 0.0f
//   q[i] = min(15, (int)trunc(x[i] * id + 8.5f))   (the product and the sum each rounded to f32)
//   block_q4_0: f16 d, then 16 bytes q[j] | q[j + 16] << 4 (18 bytes)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "gguf/types.h"

namespace ggflow::gguf {

inline constexpr int64_t kQ8_0Block = 32;     // values per block
inline constexpr int64_t kQ8_0Bytes = 34;     // bytes per block: f16 d + 32 int8

// max over i < n of (bits(x[i]) & 0x7FFFFFFF) as an unsigned integer: amax above (also q8_K's).
uint32_t amax_bits(const float* x, int n);
// One block's codes q[0..31] from x[0..31]; returns dr (amax / 127, before rounding to f16).
float q8_0_codes(const float* x, int8_t* q);
// n values (a multiple of 32) into n / 32 blocks at out (n / 32 * 34 bytes).
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);
inline constexpr int64_t kQ4_0Bytes = 18;     // Q4_0 bytes per 32 values: f16 d + 16 code bytes
// n values (a multiple of 32) into n / 32 Q4_0 blocks at out (n / 32 * 18 bytes).
void quantize_q4_0(const float* x, int64_t n, uint8_t* out);
// Checked: a type other than Q8_0 or Q4_0, n not a multiple of 32, or dst too short is an error.
Status quantize(GgmlType t, const float* src, uint64_t n, std::span<uint8_t> dst);
// n values of type `from` at src (whole rows of a tensor) dequantized (dequant.h) and quantized to
// `to`, Q4_0 only: the bytes llama-quantize writes for that type from the same tensor. (Q8_0 is
// not offered: ggflow's Q8_0 is llama.cpp's run-time AVX rounding, llama-quantize's the reference.)
Result<std::vector<uint8_t>> requantize(GgmlType from, std::span<const uint8_t> src, uint64_t n, GgmlType to);

}  // namespace ggflow::gguf
