// Activation quantization for the matmul kernels (matmul.h): one quantizer, one rounding, the same
// bits on every ISA (scalar twin in quant_act.cpp; AVX2 and AVX-512 in quant_act_avx2.cpp /
// quant_act_avx512.cpp reproduce it bit for bit, tests/cpu/test_matmul_kernels.cpp checks by memcmp).
//
// Which format a weight type wants (act_format):
//   F32, F16, BF16          -> ActFormat::f32: no quantization. The activation row IS the f32 row:
//                              quant_act_row_bytes = 4*K, quantize_act copies it; callers may skip
//                              quantize_act and pass their f32 rows (any stride >= 4*K) to matmul.
//   Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 -> ActFormat::qa32: K/32 blocks of BlockQA32 (48 bytes).
//   Q2_K Q3_K Q4_K Q5_K Q6_K -> ActFormat::qa256: K/256 blocks of BlockQA256 (304 bytes).
//
// The quantizer follows llama.cpp's activation contract on x86 (ggml's quantize_row_q8_0 / _q8_1
// with AVX, quantize_row_q8_K), so that a dot product sees the activations llama.cpp's sees:
//
// qa32 (llama.cpp's q8_0 / q8_1), per block of 32 values x[0..31] (amax, d and q are Q8_0's,
// gguf/quantize.h, whose q8_0_codes the scalar twin calls):
//   amax = the largest |x[i]|, taken on the bit patterns: max over i of (bits(x[i]) & 0x7FFFFFFF)
//          as an unsigned integer (order-free; equals the float max for finite values, and is
//          NaN when any x[i] is NaN, inf when any is +-inf and none is NaN)
//   dr   = amax / 127.0f                          (one f32 division)
//   d    = f16(dr): dr rounded to f16 (nearest even, gguf::f32_to_f16) and back, exactly
//   id   = amax != 0 ? 127.0f / amax : 0.0f       (one f32 division)
//   v    = x[i] * id                              (one f32 multiply)
//   v    = v > -127 ? v : -127;  v = v < 127 ? v : 127     (x86 MAXPS/MINPS semantics: NaN -> -127)
//   q[i] = round-to-nearest-even(v)               (std::nearbyint; cvtps2dq; exact ints in [-127,127])
//   sum  = sum of q[i] (exact int);  s = f16(dr * (float)sum)   (one f32 multiply, then f16)
// qa256 (llama.cpp's q8_K), per block of 256 values:
//   amax as above; when it is +0: d = 0, every q and bsum 0. Otherwise
//   max  = +amax if some x[i] has exactly amax's bits (a positive value), else -amax
//          (llama.cpp takes the sign of the first x of largest |x|; where both signs reach amax
//          the two choices negate q, bsums and d together, and every dot product is the same)
//   iscale = -127.0f / max                        (one f32 division)
//   v    = iscale * x[i], clamped and rounded as above
//   d    = 1.0f / iscale                          (one f32 division)
//   bsums[j] = sum of q[16j .. 16j+15] (exact int16)
// Non-finite input: a NaN anywhere in a block makes d NaN; an inf (no NaN) makes d inf (qa256:
// +-inf), its finite x quantize to 0 and the inf itself (inf*0 = NaN) to -127. Either way every
// output that reads the block is non-finite (inf or NaN). qa32: amax above 127 * 65504 makes d
// inf (f16 overflow), as in llama.cpp; a block with amax below ~3.8e-6 gets d = 0 (f16
// underflow), as in llama.cpp. Reserved fields are written as zero so quantized rows compare by
// memcmp. The default FP environment (round to nearest even, no FTZ/DAZ) is assumed, as
// everywhere in the kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"
#include "gguf/types.h"

namespace ggflow::cpu {

enum class ActFormat { f32, qa32, qa256, unsupported };
ActFormat act_format(gguf::GgmlType wtype);

struct BlockQA32 {
  float d;           // scale: value ~ d * q (an f16 value, held as f32)
  float s;           // f16(dr * (float)sum)
  int32_t sum;       // sum of q (exact)
  int32_t reserved;  // 0
  int8_t q[32];
};
static_assert(sizeof(BlockQA32) == 48);

struct BlockQA256 {
  float d;              // scale (may be negative: see max above)
  int32_t reserved[3];  // 0
  int16_t bsums[16];    // bsums[j] = sum of q[16j .. 16j+15]
  int8_t q[256];
};
static_assert(sizeof(BlockQA256) == 304);

// Bytes of one quantized activation row of K values for weights of type wtype; 0 when the type
// has no matmul kernel or K is not a positive multiple of the block (32 / 256; any K > 0 for f32).
size_t quant_act_row_bytes(gguf::GgmlType wtype, int64_t K);

// Quantize one row x[0..K) into out (quant_act_row_bytes(wtype, K) bytes). Errors: unsupported
// weight type, bad K, ISA not supported by this CPU. Thread-safe, allocation-free.
Status quantize_act(Isa isa, gguf::GgmlType wtype, const float* x, int64_t K, void* out);

// T rows: row t from x + t*x_stride (floats) into (uint8_t*)out + t*out_row_bytes.
Status quantize_act_rows(Isa isa, gguf::GgmlType wtype, const float* x, int64_t x_stride, int64_t T, int64_t K,
                         void* out, size_t out_row_bytes);

namespace detail {
// d and s of a 32-block: dr rounded to f16 and back (one function for every ISA).
float f16_round(float x);
// The signed max of a 256-block from its amax bits and whether +amax occurs (see above).
float qa256_max(uint32_t amax_bits, bool positive);
// Per-ISA bodies (validated inputs): nb blocks from x into out (any alignment).
void quant_act_qa32_scalar(const float* x, int64_t nb, uint8_t* out);
void quant_act_qa256_scalar(const float* x, int64_t nb, uint8_t* out);
void quant_act_qa32_avx2(const float* x, int64_t nb, uint8_t* out);
void quant_act_qa256_avx2(const float* x, int64_t nb, uint8_t* out);
void quant_act_qa32_avx512(const float* x, int64_t nb, uint8_t* out);
void quant_act_qa256_avx512(const float* x, int64_t nb, uint8_t* out);
}  // namespace detail

}  // namespace ggflow::cpu
