// AMX prompt GEMM over packed super-block weights (Q4_K, Q6_K; layout in matmul_packed.h), bit for
// bit the scalar twin of matmul.h, as matmul_packed_k_avx512.cpp is: the twin's f32 steps per
// super-block
//   Q4_K  acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
//   Q6_K  acc = fma(d*da, (float)isum, acc)
// take exact integer sums, and only where the sub-block sums s_j come from changes. Here one
// TDPBSUD computes them for 16 tokens x 16 rows at once:
//   C[t][r] = sum over the elements of sub-block j (Q4_K: 32, Q6_K: 16) of qa[t][e] * q[r][e]
// with A = the 16 tokens' int8 activations of sub-block j (rows t, read in place with the
// activation row stride) and B = the 16 rows' codes of sub-block j as unsigned bytes in the
// packed layout's dword order (row i of B: dword i of the sub-block, lane r = row r), which is the
// layout TDPBSUD wants. The codes of a 16-row group are unpacked (Q4_K: nibbles to bytes; Q6_K:
// nibble | two high bits, codes 0..63) once per call and serve every token tile. C goes through
// memory into lanes (one row of C per token, one lane per weight row, as the VNNI kernels hold
// them) for isum += sc_j * s_j (vpmulld), while the next sub-block's TDPBSUD runs (two sets of
// tiles, alternating). Q6_K's offset -32 enters isum as -32 * sum_j sc_j * bsums[j] (vpdpwssd),
// exact integer arithmetic like the rest.
// Only whole tiles of 16 tokens come here; the caller runs the rest on the VNNI kernels.
#include <immintrin.h>

#include <vector>

#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/matmul_packed_avx512.h"

namespace ggflow::cpu::detail {
namespace {

using packed_avx512::dpwssd_bcast;
using packed_avx512::half16;
using packed_avx512::hb4;
using packed_avx512::kBsums;
using packed_avx512::kQ;
using packed_avx512::ldf;
using packed_avx512::q4k_min;
using packed_avx512::q4k_scale;
using packed_avx512::q4k_steps;
using packed_avx512::q6_code;
using packed_avx512::q6k_scale;
using packed_avx512::q6k_scale_pair;

constexpr int kTok = 16;  // tokens per tile (rows of A and C)

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
// Q6_K's: C (16 tokens x 16 rows of int32), A (16 tokens x one sub-block's bytes), B (the
// sub-block's dwords x 16 rows x 4 bytes); two sets, 0-2 and 3-5, so one sub-block's product runs
// while the last one is read.
constexpr TileConfig per_sub_block(int sub_bytes) {
  TileConfig c;
  for (int s = 0; s < 2; ++s) {
    c.colsb[3 * s] = 64, c.rows[3 * s] = kTok;                                        // C
    c.colsb[3 * s + 1] = static_cast<uint16_t>(sub_bytes), c.rows[3 * s + 1] = kTok;  // A
    c.colsb[3 * s + 2] = 64, c.rows[3 * s + 2] = static_cast<uint8_t>(sub_bytes / 4);   // B
  }
  return c;
}
// Q4_K's: all eight tiles 16 rows x 64 bytes.
constexpr TileConfig full_tiles() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) c.colsb[i] = 64, c.rows[i] = kTok;
  return c;
}

// C = A . B for one sub-block, stored to `out` (16 x 16 int32), on tile set 0 (tmm0-2) or 1
// (tmm3-5), with the dimensions of the loaded TileConfig. GCC's tile intrinsics take the register numbers as literal text.
#define GGFLOW_DOT_TILE(NAME, TC, TA, TB)                                              \
  inline void NAME(const uint8_t* a, size_t a_stride, const uint8_t* b, int32_t* out) { \
    _tile_zero(TC);                                                                     \
    _tile_loadd(TA, a, static_cast<long>(a_stride));                                    \
    _tile_loadd(TB, b, 64);                                                             \
    _tile_dpbsud(TC, TA, TB);                                                           \
    _tile_stored(TC, out, 64);                                                          \
  }
GGFLOW_DOT_TILE(dot_tile0, 0, 1, 2)
GGFLOW_DOT_TILE(dot_tile1, 3, 4, 5)
#undef GGFLOW_DOT_TILE

// ---- Q4_K: the scales folded into B, the whole super-block in one accumulation ----
// sc_j = 8 hi_j + lo_j (6 bits: lo_j, hi_j in 0..7), so q * lo_j and q * hi_j (<= 105) are
// unsigned bytes, and over the super-block's 256 elements
//   isum = sum_e qa_e q_e sc_j(e) = C1 + 8 C2,  C1 = sum_e qa_e (q_e lo_j(e)),  C2 = sum_e qa_e (q_e hi_j(e))
// (|C| <= 256 * 128 * 105 < 2^31: exact): four TDPBSUD of 64 elements per C, no per-sub-block
// vector work. msum = sum_j m_j (bsums[2j] + bsums[2j+1]) as in the VNNI kernels (vpdpwssd),
// then the twin's two f32 steps.
constexpr size_t kQ4kBlock = 16 * 144;  // a 16-row group's super-block
constexpr size_t kChunk = 16 * 64;      // a B tile: 16 dwords (64 elements) x 16 rows
constexpr size_t kQ4kCodes = 4 * 2 * kChunk;

// Bytes v (0..15) times the lane's s (0..7, one per dword): 16-bit products of the even and the
// odd bytes, each < 256.
inline __m512i mul_bytes(__m512i v, __m512i s) {
  const __m512i s16 = _mm512_or_si512(s, _mm512_slli_epi32(s, 16)), lo8 = _mm512_set1_epi16(0x00FF);
  const __m512i even = _mm512_mullo_epi16(_mm512_and_si512(v, lo8), s16);
  const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(v, 8), s16);
  return _mm512_or_si512(even, _mm512_slli_epi16(odd, 8));
}

// The group's B tiles: chunk c (elements 64c..64c+63: sub-blocks 2c, 2c+1) of super-block b has
// B1 at U + b * kQ4kCodes + 2c * kChunk and B2 one kChunk after. Row i < 8 of a chunk is packed
// code dword 8c + i's low nibbles (elements 64c + 4i..), row 8 + i its high nibbles (64c + 32 + 4i..).
void unpack_q4k(const uint8_t* G, int64_t nb, uint8_t* U) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m7 = _mm512_set1_epi32(7);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ4kBlock;
    const __m512i S[3] = {_mm512_loadu_si512(p + 64), _mm512_loadu_si512(p + 128), _mm512_loadu_si512(p + 192)};
    for (int c = 0; c < 4; ++c) {
      uint8_t* u = U + b * kQ4kCodes + 2 * c * kChunk;
      for (int h = 0; h < 2; ++h) {  // h = 0: sub-block 2c (low nibbles), 1: 2c + 1 (high)
        const __m512i sc = q4k_scale(S, 2 * c + h), lo = _mm512_and_si512(sc, m7), hi = _mm512_srli_epi32(sc, 3);
        for (int i = 0; i < 8; ++i) {
          const __m512i raw = _mm512_loadu_si512(p + 256 + 64 * (8 * c + i));
          const __m512i q = _mm512_and_si512(h ? _mm512_srli_epi16(raw, 4) : raw, m4);
          uint8_t* row = u + 64 * (8 * h + i);
          _mm512_store_si512(row, mul_bytes(q, lo));
          _mm512_store_si512(row + kChunk, mul_bytes(q, hi));
        }
      }
    }
  }
}

// One super-block (packed at p, B tiles at u) for NT tiles of 16 tokens (activations of the
// first token's super-block at a0), the accumulators in C (c: the first token's row; zero when
// first). Tiles: C1, C2 of token tile 0 in tmm0-1, of tile 1 in tmm2-3; A in tmm4-5; B1, B2 in
// tmm6-7: each loaded B serves NT tiles.
template <int NT>
void superblock_q4k(const uint8_t* p, const uint8_t* u, const uint8_t* a0, size_t xrb, float* c, int64_t ldc,
                    __mmask16 mask, bool first) {
  alignas(64) int32_t cbuf[2 * NT][kTok * 16];
  const long xs = static_cast<long>(xrb);
  const uint8_t* a1 = a0 + kTok * xrb;
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (NT == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    _tile_loadd(6, u + 2 * k * kChunk, 64);
    _tile_loadd(7, u + (2 * k + 1) * kChunk, 64);
    _tile_loadd(4, a0 + kQ + 64 * k, xs);
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    if constexpr (NT == 2) {
      _tile_loadd(5, a1 + kQ + 64 * k, xs);
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    }
  }
  _tile_stored(0, cbuf[0], 64);
  _tile_stored(1, cbuf[1], 64);
  if constexpr (NT == 2) {
    _tile_stored(2, cbuf[2], 64);
    _tile_stored(3, cbuf[3], 64);
  }
  const __m512i S[3] = {_mm512_loadu_si512(p + 64), _mm512_loadu_si512(p + 128), _mm512_loadu_si512(p + 192)};
  __m512i MP[8];  // (m_j, m_j) int16 pairs per lane
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m512i m = q4k_min(S, j);
    MP[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
  }
  for (int t = 0; t < NT * kTok; ++t) {
    const int32_t* c1 = cbuf[2 * (t / kTok)] + 16 * (t % kTok);
    const uint8_t* a = a0 + t * xrb;
    const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c1), _mm512_slli_epi32(_mm512_load_si512(c1 + kTok * 16), 3));
    __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) msum = dpwssd_bcast(msum, MP[j], a + kBsums + 4 * j);
    __m512 acc = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, c + t * ldc);
    q4k_steps<1>(p, a, xrb, &isum, &msum, &acc);
    _mm512_mask_storeu_ps(c + t * ldc, mask, acc);
  }
}

// T tokens (a multiple of 16) at X (row stride xrb) against one group (B tiles at U): C[t * ldc + r].
// Super-blocks outer, token tiles inner, so a super-block's 8 KiB of B tiles stay in L1 for every
// token tile; the f32 accumulators live in C between super-blocks (the twin's chain per output
// is unchanged: acc starts at 0 and takes the super-blocks in order).
void group_q4k(const uint8_t* G, const uint8_t* U, int64_t nb, const uint8_t* X, size_t xrb, int64_t T, float* C,
               int64_t ldc, __mmask16 mask) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ4kBlock;
    const uint8_t* u = U + b * kQ4kCodes;
    const uint8_t* xb = X + b * sizeof(BlockQA256);
    int64_t t0 = 0;
    for (; t0 + 2 * kTok <= T; t0 += 2 * kTok) superblock_q4k<2>(p, u, xb + t0 * xrb, xrb, C + t0 * ldc, ldc, mask, b == 0);
    if (t0 < T) superblock_q4k<1>(p, u, xb + t0 * xrb, xrb, C + t0 * ldc, ldc, mask, b == 0);
  }
}

// ---- Q6_K: 16 sub-blocks of 16 per super-block ----
constexpr size_t kQ6kBlock = 16 * 210;  // a 16-row group's super-block
constexpr size_t kQ6kCodes = 64 * 64;   // a super-block's codes as bytes: 64 dwords x 16 rows

// The group's codes as bytes: dword d (elements 4d..4d+3) of super-block b at U + b * kQ6kCodes +
// 64 * d, so sub-block j is the 4 dwords at U + b * kQ6kCodes + 256 * j. ql dword 16g + i holds
// elements 128g + 4i (low nibbles) and 128g + 64 + 4i (high), their high bits in qh dword
// 8g + i % 8 (matmul_packed.h).
void unpack_q6k(const uint8_t* G, int64_t nb, uint8_t* U) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ6kBlock;
    uint8_t* u = U + b * kQ6kCodes;
    for (int g = 0; g < 2; ++g)
      for (int i = 0; i < 16; ++i) {
        const __m512i raw = _mm512_loadu_si512(p + 288 + 64 * (16 * g + i));
        const __m512i QH = _mm512_loadu_si512(p + 2336 + 64 * (8 * g + i % 8));
        const __m512i lo = q6_code(raw, i < 8 ? hb4<0>(QH) : hb4<1>(QH), m0f, m30);
        const __m512i hi = q6_code(_mm512_srli_epi16(raw, 4), i < 8 ? hb4<2>(QH) : hb4<3>(QH), m0f, m30);
        _mm512_store_si512(u + 64 * (32 * g + i), lo);
        _mm512_store_si512(u + 64 * (32 * g + 16 + i), hi);
      }
  }
}

// isum[t] += sc * C[t] for the 16 tokens.
inline void add_scaled(const int32_t* c, __m512i sc, __m512i* isum) {
#pragma GCC unroll 16
  for (int t = 0; t < kTok; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_load_si512(c + 16 * t), sc));
}

void tile16_q6k(const uint8_t* G, const uint8_t* U, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc,
                __mmask16 mask) {
  alignas(64) int32_t cbuf[2][kTok * 16];
  __m512 acc[kTok];
#pragma GCC unroll 16
  for (int t = 0; t < kTok; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ6kBlock;
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    const uint8_t* u = U + b * kQ6kCodes;
    __m512i isum[kTok];
#pragma GCC unroll 16
    for (int t = 0; t < kTok; ++t) isum[t] = _mm512_setzero_si512();
    dot_tile0(a0 + kQ, xrb, u, cbuf[0]);
    // The offset first: isum = -32 * sum_j sc_j * bsums[j] (pairs of sub-blocks per vpdpwssd).
    for (int pr = 0; pr < 8; ++pr) {
      const __m512i pair = _mm512_slli_epi16(q6k_scale_pair(p, pr), 5), neg = _mm512_sub_epi16(_mm512_setzero_si512(), pair);
#pragma GCC unroll 16
      for (int t = 0; t < kTok; ++t) isum[t] = dpwssd_bcast(isum[t], neg, a0 + t * xrb + kBsums + 4 * pr);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j + 1 < 16) {
        if (j % 2 == 0)
          dot_tile1(a0 + kQ + 16 * (j + 1), xrb, u + 256 * (j + 1), cbuf[1]);
        else
          dot_tile0(a0 + kQ + 16 * (j + 1), xrb, u + 256 * (j + 1), cbuf[0]);
      }
      add_scaled(cbuf[j % 2], q6k_scale(p, j), isum);
    }
    const __m512 D = half16(p);
#pragma GCC unroll 16
    for (int t = 0; t < kTok; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(D, _mm512_set1_ps(ldf(a0 + t * xrb))), _mm512_cvtepi32_ps(isum[t]), acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < kTok; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

void group_q6k(const uint8_t* G, const uint8_t* U, int64_t nb, const uint8_t* X, size_t xrb, int64_t T, float* C,
               int64_t ldc, __mmask16 mask) {
  for (int64_t t0 = 0; t0 < T; t0 += kTok) tile16_q6k(G, U, nb, X + t0 * xrb, xrb, C + t0 * ldc, ldc, mask);
}

struct AmxKernel {
  size_t block_bytes;  // a group's super-block
  size_t code_bytes;   // a group's super-block's B tiles
  const TileConfig* config;
  void (*unpack)(const uint8_t* G, int64_t nb, uint8_t* U);
  // T tokens (a multiple of 16) against one group.
  void (*group)(const uint8_t* G, const uint8_t* U, int64_t nb, const uint8_t* X, size_t xrb, int64_t T, float* C,
                int64_t ldc, __mmask16 mask);
};

}  // namespace

void matmul_packed_k_amx(gguf::GgmlType wtype, const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T,
                         float* C, int64_t ldc, int64_t n0, int64_t n1) {
  static constexpr TileConfig q4k_config = full_tiles(), q6k_config = per_sub_block(16);
  static const AmxKernel q4k{kQ4kBlock, kQ4kCodes, &q4k_config, unpack_q4k, group_q4k};
  static const AmxKernel q6k{kQ6kBlock, kQ6kCodes, &q6k_config, unpack_q6k, group_q6k};
  const AmxKernel* k = wtype == gguf::GgmlType::Q4_K ? &q4k : wtype == gguf::GgmlType::Q6_K ? &q6k : nullptr;
  if (!k) return;
  const int64_t nb = K / 256;
  const size_t group_bytes = static_cast<size_t>(nb) * k->block_bytes;
  thread_local std::vector<__m512i> codes;  // the group's codes as bytes (64-byte aligned)
  codes.resize(static_cast<size_t>(nb) * k->code_bytes / 64);
  uint8_t* U = reinterpret_cast<uint8_t*>(codes.data());
  _tile_loadconfig(k->config);
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* G = P + static_cast<size_t>(n / 16) * group_bytes;
    const int cnt = static_cast<int>(n1 - n < 16 ? n1 - n : 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << cnt) - 1);
    k->unpack(G, nb, U);
    k->group(G, U, nb, X, xrb, T / kTok * kTok, C + n, ldc, mask);
  }
  _tile_release();
}

}  // namespace ggflow::cpu::detail
