// AMX prompt GEMM over packed super-block weights (Q4_K, Q6_K; layout in matmul_packed.h), bit for
// bit the scalar twin of matmul.h, as matmul_packed_k_avx512.cpp is: the twin's f32 steps per
// super-block
//   Q4_K  acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
//   Q6_K  acc = fma(d*da, (float)isum, acc)
// take exact integer sums (isum = sum_j sc_j s_j over the sub-blocks j), built here by the tile
// unit for 16 tokens x 16 rows at once: C[t][r] = sum over 64 elements e of A[t][e] * B[e][r],
// A = the tokens' int8 activations read in place (rows t, the activation row stride), B = 16 rows'
// bytes in the packed layout's dword order (row i of B: element dword i, lane r = weight row r),
// which is the layout TDPBSUD / TDPBSSD want. The per-row sub-block scales are folded into B as
// digits small enough for a byte (q * digit), so a super-block's whole isum is a few full tiles
// (Q4_K: C1 + 8 C2; Q6_K: C0 + 8 C1 + 64 C2) with no per-sub-block vector work. A group's B tiles
// are built once per call (unpack_q4k / unpack_q6k) and serve every token tile; C goes through
// memory into lanes (one row per token, one lane per weight row, as the VNNI kernels hold them)
// for the twin's f32 steps, the accumulators waiting in the output between super-blocks.
// Only whole tiles of 16 tokens come here; the caller runs the rest on the VNNI kernels.
#include <immintrin.h>
#include <unistd.h>

#include <atomic>
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

std::atomic<int> g_pairs{-1};  // set_amx_group_pairs

// True when two groups should share each A tile: when T activation rows of xrb bytes take more
// than half this core's L2 (sysconf; 2 MiB assumed where it says nothing), unless a test forces it.
bool acts_exceed_l2(int64_t T, size_t xrb) {
  const int forced = g_pairs.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  static const size_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{2} << 20;
  }();
  return static_cast<size_t>(T) * xrb > l2 / 2;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
// All eight tiles 16 rows x 64 bytes (C: 16 tokens x 16 rows of int32; A: 16 tokens x 64
// elements; B: 16 element dwords x 16 rows x 4 bytes).
constexpr TileConfig full_tiles() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) c.colsb[i] = 64, c.rows[i] = kTok;
  return c;
}

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

// The vector steps of one token tile (16 tokens from the activation super-block at a0) against a
// group's super-block at p: isum = C1 + 8 C2 (C1 at cb, C2 at cb + 256), msum, the twin's two f32
// steps, the accumulators in C (c: the first token's; zero when first).
void finish_q4k(const uint8_t* p, const int32_t* cb, const uint8_t* a0, size_t xrb, float* c, int64_t ldc,
                __mmask16 mask, bool first) {
  const __m512i S[3] = {_mm512_loadu_si512(p + 64), _mm512_loadu_si512(p + 128), _mm512_loadu_si512(p + 192)};
  __m512i MP[8];  // (m_j, m_j) int16 pairs per lane
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m512i m = q4k_min(S, j);
    MP[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
  }
  for (int t = 0; t < kTok; ++t) {
    const uint8_t* a = a0 + t * xrb;
    const __m512i isum = _mm512_add_epi32(_mm512_load_si512(cb + 16 * t), _mm512_slli_epi32(_mm512_load_si512(cb + kTok * 16 + 16 * t), 3));
    __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) msum = dpwssd_bcast(msum, MP[j], a + kBsums + 4 * j);
    __m512 acc = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, c + t * ldc);
    q4k_steps<1>(p, a, xrb, &isum, &msum, &acc);
    _mm512_mask_storeu_ps(c + t * ldc, mask, acc);
  }
}

// One super-block (packed at p, B tiles at u) for NT tiles of 16 tokens (activations of the
// first token's super-block at a0). Tiles: C1, C2 of token tile 0 in tmm0-1, of tile 1 in
// tmm2-3; A in tmm4-5; B1, B2 in tmm6-7: each loaded B serves NT tiles.
template <int NT>
void superblock_q4k(const uint8_t* p, const uint8_t* u, const uint8_t* a0, size_t xrb, float* c, int64_t ldc,
                    __mmask16 mask, bool first) {
  alignas(64) int32_t cbuf[NT][2][kTok * 16];
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
  _tile_stored(0, cbuf[0][0], 64);
  _tile_stored(1, cbuf[0][1], 64);
  if constexpr (NT == 2) {
    _tile_stored(2, cbuf[NT - 1][0], 64);
    _tile_stored(3, cbuf[NT - 1][1], 64);
  }
  for (int tt = 0; tt < NT; ++tt)
    finish_q4k(p, cbuf[tt][0], a0 + tt * kTok * xrb, xrb, c + tt * kTok * ldc, ldc, mask, first);
}

// One super-block of two groups (packed at p[g], B tiles at u[g], outputs at c + 16g) for one tile
// of 16 tokens: each loaded A serves both groups. Tiles: C1, C2 of group g in tmm(2g), tmm(2g+1);
// A in tmm4; B in tmm5-7 (group 1's B2 reuses tmm5).
void superblock_q4k_pair(const uint8_t* const* p, const uint8_t* const* u, const uint8_t* a0, size_t xrb, float* c,
                         int64_t ldc, const __mmask16* mask, bool first) {
  alignas(64) int32_t cbuf[2][2][kTok * 16];
  const long xs = static_cast<long>(xrb);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    _tile_loadd(4, a0 + kQ + 64 * k, xs);
    _tile_loadd(5, u[0] + 2 * k * kChunk, 64);
    _tile_loadd(6, u[0] + (2 * k + 1) * kChunk, 64);
    _tile_loadd(7, u[1] + 2 * k * kChunk, 64);
    _tile_dpbsud(0, 4, 5);
    _tile_dpbsud(1, 4, 6);
    _tile_dpbsud(2, 4, 7);
    _tile_loadd(5, u[1] + (2 * k + 1) * kChunk, 64);
    _tile_dpbsud(3, 4, 5);
  }
  _tile_stored(0, cbuf[0][0], 64);
  _tile_stored(1, cbuf[0][1], 64);
  _tile_stored(2, cbuf[1][0], 64);
  _tile_stored(3, cbuf[1][1], 64);
  for (int g = 0; g < 2; ++g) finish_q4k(p[g], cbuf[g][0], a0, xrb, c + 16 * g, ldc, mask[g], first);
}

// T tokens (a multiple of 16) at X (row stride xrb) against ng consecutive groups (B tiles at
// U[g]): C[t * ldc + 16g + r]. Super-blocks outer, token tiles inner, so a super-block's B tiles
// stay in L1 for every token tile; the f32 accumulators live in C between super-blocks (the
// twin's chain per output is unchanged: acc starts at 0 and takes the super-blocks in order).
// Two groups go together (each A tile serving both) when the activations do not fit in half
// the L2: otherwise each group would stream them from L3 again.
void groups_q4k(int ng, const uint8_t* const* G, const uint8_t* const* U, int64_t nb, const uint8_t* X, size_t xrb,
                int64_t T, float* C, int64_t ldc, const __mmask16* mask) {
  if (ng == 2 && acts_exceed_l2(T, xrb)) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p[2] = {G[0] + b * kQ4kBlock, G[1] + b * kQ4kBlock};
      const uint8_t* u[2] = {U[0] + b * kQ4kCodes, U[1] + b * kQ4kCodes};
      for (int64_t t0 = 0; t0 < T; t0 += kTok)
        superblock_q4k_pair(p, u, X + t0 * xrb + b * sizeof(BlockQA256), xrb, C + t0 * ldc, ldc, mask, b == 0);
    }
    return;
  }
  for (int g = 0; g < ng; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = G[g] + b * kQ4kBlock;
      const uint8_t* u = U[g] + b * kQ4kCodes;
      const uint8_t* xb = X + b * sizeof(BlockQA256);
      float* c = C + 16 * g;
      int64_t t0 = 0;
      for (; t0 + 2 * kTok <= T; t0 += 2 * kTok)
        superblock_q4k<2>(p, u, xb + t0 * xrb, xrb, c + t0 * ldc, ldc, mask[g], b == 0);
      if (t0 < T) superblock_q4k<1>(p, u, xb + t0 * xrb, xrb, c + t0 * ldc, ldc, mask[g], b == 0);
    }
}

// ---- Q6_K: the scales folded into B as balanced base-8 digits ----
// sc_j (int8) = d0 + 8 d1 + 64 d2 with digits in -3..4, so (q - 32) * d (q - 32 in -32..31) is a
// signed byte, and over the super-block's 256 elements
//   isum = sum_e qa_e (q_e - 32) sc_j(e) = C0 + 8 C1 + 64 C2,  Ck = sum_e qa_e ((q_e - 32) dk_j(e))
// (the twin's sum_j sc_j sum (q - 32) qa, offset included; |Ck| <= 256 * 128 * 128 < 2^31: exact):
// four full 64-element TDPBSSD per C, then the twin's one f32 step.
constexpr size_t kQ6kBlock = 16 * 210;  // a 16-row group's super-block
constexpr size_t kQ6kCodes = 4 * 3 * kChunk;

// Signed bytes v times the lane's s (-3..4, one per dword): 16-bit products of the even and the
// odd bytes, each in -128..127.
inline __m512i mul_sbytes(__m512i v, __m512i s) {
  const __m512i s16 = _mm512_or_si512(_mm512_and_si512(s, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(s, 16));
  const __m512i even = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8), s16);
  const __m512i odd = _mm512_mullo_epi16(_mm512_srai_epi16(v, 8), s16);
  return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00FF)), _mm512_slli_epi16(odd, 8));
}

// The group's B tiles: chunk c (elements 64c..64c+63) of super-block b has digit k's tile at
// U + b * kQ6kCodes + (3c + k) * kChunk, row i = element dword 16c + i. ql dword 16g + i holds
// elements 128g + 4i (low nibbles: chunk 2g, row i) and 128g + 64 + 4i (high: chunk 2g + 1), their
// high bits in qh dword 8g + i % 8 (matmul_packed.h); row i of chunk c is in sub-block 4c + i / 4.
void unpack_q6k(const uint8_t* G, int64_t nb, uint8_t* U) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), m32 = _mm512_set1_epi8(32);
  const __m512i three = _mm512_set1_epi32(3), m7 = _mm512_set1_epi32(7);
  auto digit = [&](__m512i v) { return _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(v, three), m7), three); };
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ6kBlock;
    for (int g = 0; g < 2; ++g)
      for (int i = 0; i < 16; ++i) {
        const __m512i raw = _mm512_loadu_si512(p + 288 + 64 * (16 * g + i));
        const __m512i QH = _mm512_loadu_si512(p + 2336 + 64 * (8 * g + i % 8));
        for (int h = 0; h < 2; ++h) {  // h = 0: low nibbles (chunk 2g), 1: high (chunk 2g + 1)
          const __m512i code = h ? q6_code(_mm512_srli_epi16(raw, 4), i < 8 ? hb4<2>(QH) : hb4<3>(QH), m0f, m30)
                                 : q6_code(raw, i < 8 ? hb4<0>(QH) : hb4<1>(QH), m0f, m30);
          const __m512i v = _mm512_sub_epi8(code, m32);
          const int c = 2 * g + h;
          const __m512i sc = q6k_scale(p, 4 * c + i / 4);
          const __m512i d0 = digit(sc), s1 = _mm512_srai_epi32(_mm512_sub_epi32(sc, d0), 3);
          const __m512i d1 = digit(s1), d2 = _mm512_srai_epi32(_mm512_sub_epi32(s1, d1), 3);
          uint8_t* row = U + b * kQ6kCodes + 3 * c * kChunk + 64 * i;
          _mm512_store_si512(row, mul_sbytes(v, d0));
          _mm512_store_si512(row + kChunk, mul_sbytes(v, d1));
          _mm512_store_si512(row + 2 * kChunk, mul_sbytes(v, d2));
        }
      }
  }
}

// T tokens (a multiple of 16) against NG groups (B tiles at U[g], outputs at C + 16g), super-blocks
// outer and tiles of 16 tokens inner as group_q4k. Two groups share each A tile: at K = 8960 a
// thread's activations (5.4 MB for 512 tokens) do not stay in L2, so each group would stream them
// from L3 again. Tiles: C0-C2 of group g in tmm(3g)..tmm(3g+2), B in tmm7 (NG = 2) or tmm4-6, A
// in tmm6 (NG = 2) or tmm3.
template <int NG>
void group_q6k(const uint8_t* const* G, const uint8_t* const* U, int64_t nb, const uint8_t* X, size_t xrb, int64_t T,
               float* C, int64_t ldc, const __mmask16* mask) {
  alignas(64) int32_t cbuf[NG][3][kTok * 16];
  const long xs = static_cast<long>(xrb);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* u0 = U[0] + b * kQ6kCodes;
    const uint8_t* u1 = U[NG - 1] + b * kQ6kCodes;
    for (int64_t t0 = 0; t0 < T; t0 += kTok) {
      const uint8_t* a0 = X + t0 * xrb + b * sizeof(BlockQA256);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      if constexpr (NG == 2) {
        _tile_zero(3);
        _tile_zero(4);
        _tile_zero(5);
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        if constexpr (NG == 2) {
          _tile_loadd(6, a0 + kQ + 64 * k, xs);
          _tile_loadd(7, u0 + 3 * k * kChunk, 64);
          _tile_dpbssd(0, 6, 7);
          _tile_loadd(7, u0 + (3 * k + 1) * kChunk, 64);
          _tile_dpbssd(1, 6, 7);
          _tile_loadd(7, u0 + (3 * k + 2) * kChunk, 64);
          _tile_dpbssd(2, 6, 7);
          _tile_loadd(7, u1 + 3 * k * kChunk, 64);
          _tile_dpbssd(3, 6, 7);
          _tile_loadd(7, u1 + (3 * k + 1) * kChunk, 64);
          _tile_dpbssd(4, 6, 7);
          _tile_loadd(7, u1 + (3 * k + 2) * kChunk, 64);
          _tile_dpbssd(5, 6, 7);
        } else {
          _tile_loadd(3, a0 + kQ + 64 * k, xs);
          _tile_loadd(4, u0 + 3 * k * kChunk, 64);
          _tile_loadd(5, u0 + (3 * k + 1) * kChunk, 64);
          _tile_loadd(6, u0 + (3 * k + 2) * kChunk, 64);
          _tile_dpbssd(0, 3, 4);
          _tile_dpbssd(1, 3, 5);
          _tile_dpbssd(2, 3, 6);
        }
      }
      _tile_stored(0, cbuf[0][0], 64);
      _tile_stored(1, cbuf[0][1], 64);
      _tile_stored(2, cbuf[0][2], 64);
      if constexpr (NG == 2) {
        _tile_stored(3, cbuf[NG - 1][0], 64);
        _tile_stored(4, cbuf[NG - 1][1], 64);
        _tile_stored(5, cbuf[NG - 1][2], 64);
      }
      for (int g = 0; g < NG; ++g) {
        const __m512 D = half16(G[g] + b * kQ6kBlock);
        float* c = C + t0 * ldc + 16 * g;
        for (int t = 0; t < kTok; ++t) {
          const int32_t* cb = cbuf[g][0] + 16 * t;
          const __m512i isum = _mm512_add_epi32(
              _mm512_load_si512(cb), _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cb + kTok * 16), 3),
                                                      _mm512_slli_epi32(_mm512_load_si512(cb + 2 * kTok * 16), 6)));
          const __m512 acc = b == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[g], c + t * ldc);
          const __m512 DA = _mm512_mul_ps(D, _mm512_set1_ps(ldf(a0 + t * xrb)));
          _mm512_mask_storeu_ps(c + t * ldc, mask[g], _mm512_fmadd_ps(DA, _mm512_cvtepi32_ps(isum), acc));
        }
      }
    }
  }
}

void groups_q6k(int ng, const uint8_t* const* G, const uint8_t* const* U, int64_t nb, const uint8_t* X, size_t xrb,
                int64_t T, float* C, int64_t ldc, const __mmask16* mask) {
  if (ng == 2 && acts_exceed_l2(T, xrb)) return group_q6k<2>(G, U, nb, X, xrb, T, C, ldc, mask);
  for (int g = 0; g < ng; ++g) group_q6k<1>(G + g, U + g, nb, X, xrb, T, C + 16 * g, ldc, mask + g);
}

struct AmxKernel {
  size_t block_bytes;  // a group's super-block
  size_t code_bytes;   // a group's super-block's B tiles
  const TileConfig* config;
  void (*unpack)(const uint8_t* G, int64_t nb, uint8_t* U);
  // T tokens (a multiple of 16) against ng (1 or 2) consecutive groups.
  void (*groups)(int ng, const uint8_t* const* G, const uint8_t* const* U, int64_t nb, const uint8_t* X, size_t xrb,
                 int64_t T, float* C, int64_t ldc, const __mmask16* mask);
};

}  // namespace

void set_amx_group_pairs(int mode) { g_pairs.store(mode, std::memory_order_relaxed); }

void matmul_packed_k_amx(gguf::GgmlType wtype, const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T,
                         float* C, int64_t ldc, int64_t n0, int64_t n1) {
  static constexpr TileConfig config = full_tiles();
  static const AmxKernel q4k{kQ4kBlock, kQ4kCodes, &config, unpack_q4k, groups_q4k};
  static const AmxKernel q6k{kQ6kBlock, kQ6kCodes, &config, unpack_q6k, groups_q6k};
  const AmxKernel* k = wtype == gguf::GgmlType::Q4_K ? &q4k : wtype == gguf::GgmlType::Q6_K ? &q6k : nullptr;
  if (!k) return;
  const int64_t nb = K / 256;
  const size_t group_bytes = static_cast<size_t>(nb) * k->block_bytes;
  thread_local std::vector<__m512i> codes;  // two groups' B tiles (64-byte aligned)
  const size_t per_group = static_cast<size_t>(nb) * k->code_bytes;
  codes.resize(2 * per_group / 64);
  uint8_t* const U[2] = {reinterpret_cast<uint8_t*>(codes.data()), reinterpret_cast<uint8_t*>(codes.data()) + per_group};
  _tile_loadconfig(k->config);
  for (int64_t n = n0; n < n1; n += 32) {
    const int ng = n + 16 < n1 ? 2 : 1;
    const uint8_t* G[2];
    __mmask16 mask[2];
    for (int g = 0; g < ng; ++g) {
      G[g] = P + static_cast<size_t>(n / 16 + g) * group_bytes;
      const int64_t left = n1 - n - 16 * g;
      mask[g] = static_cast<__mmask16>((1u << (left < 16 ? left : 16)) - 1);
      k->unpack(G[g], nb, U[g]);
    }
    k->groups(ng, G, U, nb, X, xrb, T / kTok * kTok, C + n, ldc, mask);
  }
  _tile_release();
}

}  // namespace ggflow::cpu::detail
