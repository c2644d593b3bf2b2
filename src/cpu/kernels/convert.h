// f32 <-> f16 (IEEE half) over a run of values: the KV cache's f16 option (attention.h writes and
// reads through these) and the executor's Convert between f32 and f16.
//   to_f16:   gguf::f32_to_f16 per value (numpy's astype(float16)): round to nearest even,
//             overflow to inf, f16 subnormals kept, NaN -> sign | 0x7E00;
//   from_f16: exact (every half is an f32); a NaN half keeps its payload as gguf::f16_to_f32 does
//             (sign | 0x7F800000 | mantissa << 13: a signaling NaN is not quieted, unlike vcvtph2ps).
// The scalar twin is gguf's conversion itself; AVX2 (F16C) and AVX-512 use vcvtps2ph / vcvtph2ps
// with the NaN lanes set as the twin, so every ISA gives the same bits (test_kernels_convert).
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace ggflow::cpu {

void to_f16(Isa isa, const float* f, int64_t n, uint16_t* h);
void from_f16(Isa isa, const uint16_t* h, int64_t n, float* f);
// As from_f16 but a signaling NaN comes out quiet (bit 22 set), on every ISA: vcvtph2ps alone, the
// KV cache's read (to_f16 never writes a signaling NaN, so there it gives from_f16's bits, cheaper).
void from_f16_quiet(Isa isa, const uint16_t* h, int64_t n, float* f);

namespace detail {
void to_f16_avx2(const float* f, int64_t n, uint16_t* h);
void to_f16_avx512(const float* f, int64_t n, uint16_t* h);
void from_f16_avx2(const uint16_t* h, int64_t n, float* f);
void from_f16_avx512(const uint16_t* h, int64_t n, float* f);
void from_f16_quiet_avx2(const uint16_t* h, int64_t n, float* f);
void from_f16_quiet_avx512(const uint16_t* h, int64_t n, float* f);
}  // namespace detail

}  // namespace ggflow::cpu
