// Matmul over weights repacked at load into row-interleaved groups ("packed"): the same numbers as
// matmul.h (its spec defines every bit; the packed kernels reproduce the scalar twin on the GGUF
// layout by memcmp, tests/cpu/test_matmul_packed.cpp), only the bytes are where a SIMD register
// wants them.
//
// ================================ THE PACKED LAYOUT ================================
// Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (the 32-element blocks: SmolLM2's, Q4_0/Q8_0 files', most
// of Gemma 3 Q4_K_M's matmuls), and the super-blocks Q4_K and Q6_K below. Rows are taken 16 at a time (group g = rows 16g..16g+15; a last,
// partial group repeats its last row). A group's blocks follow each other: block b of group g
// starts at
//   P + (g * nb + b) * 16 * type_size          (nb = K / 32)
// and holds the 16 rows' copies of that block, fields first, then the codes interleaved by dword:
//   Q4_0 (288 bytes)  d[16] (f16)            |             q[4][16][4]
//   Q4_1 (320 bytes)  d[16] (f16), m[16]     |             q[4][16][4]
//   Q5_0 (352 bytes)  d[16] (f16)            | qh[16][4] | q[4][16][4]
//   Q5_1 (384 bytes)  d[16] (f16), m[16]     | qh[16][4] | q[4][16][4]
//   Q8_0 (544 bytes)  d[16] (f16)            |             q[8][16][4]
// q[i][r][j] is byte 4i+j of row r's code bytes (Q4/Q5: low nibble element 4i+j, high nibble
// element 16+4i+j; Q8: element 4i+j). qh[r][i] holds row r's fifth bits of chunk i: bit j = element
// 4i+j, bit 4+j = element 16+4i+j (GGUF's qh u32, reordered). So 64 bytes q[i] are one register
// whose dword lane r belongs to row r,
// and vpdpbusd against the activation dword (4 elements) broadcast to every lane sums row r's
// products in lane r: no transposes, no gathers, no reduction across lanes. Same size as the GGUF
// rows (plus the padding rows of a last partial group).
//
// Super-blocks (Q4_K, Q6_K: 256 elements; Q4_K_M files' matmuls): block b of group g at
//   P + (g * nb + b) * 16 * type_size          (nb = K / 256)
// holds runs of the 16 rows' GGUF bytes, each run interleaved by row (chunk c of row r at
// run + (16c + r) * width), fields first:
//   Q4_K (2304 bytes)  d[16] (f16) @0, dmin[16] @32, scale dwords [3][16] @64 (GGUF scale bytes
//                      4c..4c+3), codes [32][16][4] @256: dword c = 8p + i holds qs bytes
//                      32p+4i..32p+4i+3 (low nibbles: elements 64p+4i.., high: 64p+32+4i..)
//   Q6_K (3360 bytes)  d[16] (f16) @0, scale pairs [8][16][2] (int8 scales 2p, 2p+1) @32,
//                      ql [32][16][4] @288: dword c = 16g + i holds ql bytes 64g+4i.. (low
//                      nibbles: elements 128g+4i.., high: 128g+64+4i..), qh [16][16][4] @2336:
//                      dword 8g + i holds qh bytes 32g+4i.. (bits 2s, 2s+1 of byte k: the high
//                      bits of element 128g + 32s + 4i + k)
// ====================================================================================
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"
#include "gguf/types.h"

namespace ggflow::cpu {

constexpr int64_t kPackRows = 16;

// True when `wtype` has a packed layout and a packed kernel on `isa` faster than matmul's
// (AVX-512: every packed type; AVX2: every packed type too, reading a group's 8-row halves as
// lanes = rows).
bool packed_supports(Isa isa, gguf::GgmlType wtype);
// True when `wtype` has a packed layout at all (any ISA runs it, the scalar one through the twin).
bool packed_layout(gguf::GgmlType wtype);
// Bytes of the packed copy of an [N, K] weight (0 when the type has no packed layout or K is not
// a multiple of its block: 32, or 256 for Q4_K / Q6_K).
size_t packed_bytes(gguf::GgmlType wtype, int64_t N, int64_t K);

// Writes groups [g0, g1) of the packed copy of W (N rows of w_row_bytes at W) into P
// (packed_bytes). Threads may pack disjoint group ranges.
void pack_groups(gguf::GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t N, int64_t K, uint8_t* P,
                 int64_t g0, int64_t g1);
// Row n of a packed weight back in the GGUF layout (K/block * type_size bytes at `row`).
void unpack_row(gguf::GgmlType wtype, const uint8_t* P, int64_t K, int64_t n, uint8_t* row);

// As matmul (matmul.h), with the weight in the packed layout: C[t*ldc + n] for t in [0, T),
// n in [n0, n1). n0 must be a multiple of 16 and n1 a multiple of 16 or N (else an Error).
// Thread-safe for disjoint row ranges; allocation-free on AVX-512 and AVX2 (the twin decodes a row
// into a per-thread buffer).
Status matmul_packed(Isa isa, gguf::GgmlType wtype, const uint8_t* P, int64_t N, int64_t K, const void* X,
                     size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);

namespace detail {
// The 32-element blocks and Q4_K on AVX2 (matmul_packed_avx2.cpp); false (nothing written) for another type.
bool matmul_packed_avx2(gguf::GgmlType wtype, const uint8_t* P, int64_t K, const uint8_t* X, size_t x_row_bytes,
                        int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
void matmul_packed_avx512(gguf::GgmlType wtype, const uint8_t* P, int64_t N, int64_t K, const uint8_t* X,
                          size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
// The super-block types (Q4_K, Q6_K): matmul_packed_k_avx512.cpp.
void matmul_packed_k_avx512(gguf::GgmlType wtype, const uint8_t* P, int64_t K, const uint8_t* X, size_t x_row_bytes,
                            int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
// Q4_K or Q6_K over T tokens, a multiple of 16, on AMX (matmul_packed_k_amx.cpp; only where
// amx_enabled()).
void matmul_packed_k_amx(gguf::GgmlType wtype, const uint8_t* P, int64_t K, const uint8_t* X, size_t x_row_bytes,
                         int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
// Tests: whether the AMX kernels take two row groups per activation tile (1), one (0), or decide
// by the activations' size against the L2 (-1, the default). The bits are the same either way.
void set_amx_group_pairs(int mode);
}  // namespace detail

}  // namespace ggflow::cpu
