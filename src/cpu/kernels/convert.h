// f32 <-> f16 (IEEE half) over a run of values: the KV cache's f16 option (attention.h writes and
// reads through these) and the executor's Convert between f32 and f16.
//   to_f16:   gguf::f32_to_f16 per value (numpy's astype(float16)): round to nearest even,
//             overflow to inf, f16 subnormals kept, NaN -> sign | 0x7E00;
//   from_f16: exact (every half is an f32); a NaN half keeps its payload as gguf::f16_to_f32 does
//             (sign | 0x7F800000 | mantissa << 13: a signaling NaN is not quieted, unlike vcvtph2ps).
// The scalar twin is gguf's conversion itself; AVX2 (F16C) and AVX-512 use vcvtps2ph / vcvtph2ps
// with the NaN lanes set as the twin, so every ISA gives the same bits (test_kernels_convert).
//
// f32 <-> q8_0 (GGML's block_q8_0: f16 d, 32 int8 codes; gguf/quantize.h): the KV cache's q8_0
// option, rows of a multiple of 32 values.
//   to_q8_0:   gguf::quantize_q8_0's bits: each ISA's activation quantizer (quant_act.h, qa32,
//              whose d and q are Q8_0's) packed into 34-byte blocks;
//   from_q8_0: d * q per value with d read as from_f16_quiet (vcvtph2ps), exact in f32, so every
//              ISA's product is the twin's (and gguf::dequantize's: to_q8_0 never writes a
//              signaling-NaN d).
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

void to_f16(Isa isa, const float* f, int64_t n, uint16_t* h);
void from_f16(Isa isa, const uint16_t* h, int64_t n, float* f);
// As from_f16 but a signaling NaN comes out quiet (bit 22 set), on every ISA: vcvtph2ps alone, the
// KV cache's read (to_f16 never writes a signaling NaN, so there it gives from_f16's bits, cheaper).
void from_f16_quiet(Isa isa, const uint16_t* h, int64_t n, float* f);

void to_q8_0(Isa isa, const float* f, int64_t n, uint8_t* out);
void from_q8_0(Isa isa, const uint8_t* in, int64_t n, float* f);

namespace detail {
void from_q8_0_avx2(const uint8_t* in, int64_t n, float* f);
void from_q8_0_avx512(const uint8_t* in, int64_t n, float* f);
void to_f16_avx2(const float* f, int64_t n, uint16_t* h);
void to_f16_avx512(const float* f, int64_t n, uint16_t* h);
void from_f16_avx2(const uint16_t* h, int64_t n, float* f);
void from_f16_avx512(const uint16_t* h, int64_t n, float* f);
void from_f16_quiet_avx2(const uint16_t* h, int64_t n, float* f);
void from_f16_quiet_avx512(const uint16_t* h, int64_t n, float* f);
}  // namespace detail

}  // namespace ggflow::cpu
