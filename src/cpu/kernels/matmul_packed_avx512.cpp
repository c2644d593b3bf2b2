// AVX-512 VNNI matmul over packed weights (layout in matmul_packed.h), bit for bit the scalar
// twin of matmul.h: one f32 lane per row, one chain per output over the blocks in order. Codes
// are unsigned (Q4: 0..15, Q5: 0..31, Q8: int8 + 128); the offsets (-8, -16, -128) enter exactly
// as -zp * sum(qa) at the start of each token's integer sum.
//
// Register tile: the block's code registers, in pairs (dword i and dword 4+i; lane r = row r's
// elements 4i..4i+3, Q4 nibbles split into the pair), are loaded once and used by up to 8 tokens;
// isum[t] is token t's exact integer sum (offset -zp*sum(qa) as its start value), built by
// vpdpbusd against the token's activation dword broadcast to every lane (up to 4 tokens: in two
// partial sums, added at the end; integer addition is exact in any order). Then per token the
// twin's f32 step acc = fma(d*da, (float)isum, acc). Q4_1 / Q5_1 keep llama.cpp's 8 lane chains
// and min chain instead (lane_tile). The next group is software-prefetched while this one
// computes (its bytes follow this group's).
// GCC 12 warns about the undefined-source operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/matmul_packed_avx512.h"
#include "cpu/kernels/quant_act.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;
using packed_avx512::dpbusd_bcast;
using packed_avx512::half16;
using packed_avx512::ldf;
using packed_avx512::Prefetch;

constexpr int kTT = 8;  // tokens per tile

struct PQ4_0 { static constexpr int bs = 18, fields = 1, chunks = 4, zp = 8;   static constexpr bool min = false, qh = false; };
struct PQ4_1 { static constexpr int bs = 20, fields = 2, chunks = 4, zp = 0;   static constexpr bool min = true,  qh = false; };
struct PQ5_0 { static constexpr int bs = 22, fields = 1, chunks = 4, zp = 16;  static constexpr bool min = false, qh = true; };
struct PQ5_1 { static constexpr int bs = 24, fields = 2, chunks = 4, zp = 0;   static constexpr bool min = true,  qh = true; };
struct PQ8_0 { static constexpr int bs = 34, fields = 1, chunks = 8, zp = 128; static constexpr bool min = false, qh = false; };

// vpshufb index base: in every byte of dword k of a 128-bit lane, 4k (the dword's first byte).
inline __m512i dword_base() { return _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0x00000000); }

// Every loop over a tile's tokens is unrolled: left as loops, GCC turns acc's zeroing into a
// memset, keeps acc[] on the stack and stores all of it after every block (8 stores per block);
// unrolled, acc[] and isum[] stay in registers (hot, Q4_1 8 tokens: 168 -> 182 GMAC/s).
#define TOKENS_UNROLLED _Pragma("GCC unroll 8")

template <class Tr, int TT>
void tile(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
          Prefetch pf) {
  static_assert(!Tr::min, "Q4_1 / Q5_1: lane_tile");
  constexpr size_t gbs = 16 * Tr::bs;
  __m512 acc[TT];
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), x80 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    pf.step();
    const __m512 DW = half16(p);
    const uint8_t* q = p + 32 * Tr::fields + (Tr::qh ? 64 : 0);
    // Activation block b of token t at a0 + t*xrb: {da, sa, sum(qa), -, qa[32]} (quant_act.h).
    const uint8_t* a0 = X + b * sizeof(BlockQA32);
    // Up to 4 tokens, two partial sums per token (isum: dwords 0-3 of the block, isum2: dwords
    // 4-7), added at the end: int32 addition wraps and is associative, so the sum is the same bits,
    // and each token has two dependency chains of 4 instead of one of 8 (few tokens: the chains'
    // latency bounded the tile; one token, hot: 108 -> 121 GMAC/s; 8 tokens keep one chain each).
    constexpr bool split = TT <= 4;
    __m512i isum[TT], isum2[TT];
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
      int32_t sum;
      std::memcpy(&sum, a0 + t * xrb + 8, 4);
      isum[t] = Tr::zp ? _mm512_set1_epi32(-Tr::zp * sum) : _mm512_setzero_si512();
      isum2[t] = _mm512_setzero_si512();
    }
    // Lane r's qh dword (Q5): byte i = chunk i's fifth bits (bit j: element 4i+j, bit 4+j:
    // 16+4i+j). Byte i copied to the 4 bytes of its dword, then tested against 1,2,4,8 (low
    // elements) and 16,32,64,128 (high): the set ones get +16.
    __m512i QH = _mm512_setzero_si512();
    if constexpr (Tr::qh) QH = _mm512_loadu_si512(p + 32 * Tr::fields);
    const __m512i lo_bits = _mm512_set1_epi32(0x08040201), hi_bits = _mm512_set1_epi32(static_cast<int>(0x80402010u));
    const __m512i c16 = _mm512_set1_epi8(16);
    for (int i = 0; i < 4; ++i) {
      __m512i lo, hi;  // the codes of dwords i and 4+i
      if constexpr (Tr::chunks == 8) {
        lo = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * i), x80);  // int8 + 128
        hi = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * (4 + i)), x80);
      } else {
        const __m512i raw = _mm512_loadu_si512(q + 64 * i);
        lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if constexpr (Tr::qh) {
          const __m512i sel = _mm512_set1_epi32(0x01010101 * i);  // within each dword: byte i
          const __m512i bi = _mm512_shuffle_epi8(QH, _mm512_add_epi8(sel, dword_base()));
          lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(bi, lo_bits), lo, c16);
          hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(bi, hi_bits), hi, c16);
        }
      }
      TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
        isum[t] = dpbusd_bcast(isum[t], lo, a0 + t * xrb + 16 + 4 * i);
        __m512i& h = split ? isum2[t] : isum[t];
        h = dpbusd_bcast(h, hi, a0 + t * xrb + 16 + 4 * (4 + i));
      }
    }
    if constexpr (split) TOKENS_UNROLLED for (int t = 0; t < TT; ++t) isum[t] = _mm512_add_epi32(isum[t], isum2[t]);
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
      const uint8_t* a = a0 + t * xrb;
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(DW, _mm512_set1_ps(ldf(a))), _mm512_cvtepi32_ps(isum[t]), acc[t]);
    }
  }
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

// Q4_1 / Q5_1 (Tr::min) in llama.cpp's order (matmul.h): per output 8 lane chains and the min
// chain, summed at the end. Code dword i (low nibbles: elements 4i..4i+3, high: 16+4i..) is lane i
// (lane 4+i), so one vpdpbusd from zero gives one lane's integer sum for 16 rows. Eight
// accumulators per token (the min chain runs in a second pass over the group, then in L1): tiles
// of kLaneTT tokens.
constexpr int kLaneTT = 4;

template <class Tr, int TT>
void lane_tile(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
               Prefetch pf) {
  constexpr size_t gbs = 16 * Tr::bs;
  __m512 acc[TT][8];
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) for (int j = 0; j < 8; ++j) acc[t][j] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i lo_bits = _mm512_set1_epi32(0x08040201), hi_bits = _mm512_set1_epi32(static_cast<int>(0x80402010u));
  const __m512i c16 = _mm512_set1_epi8(16);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    pf.step();
    const __m512 DW = half16(p);
    const uint8_t* q = p + 64 + (Tr::qh ? 64 : 0);
    const uint8_t* a0 = X + b * sizeof(BlockQA32);
    __m512 dd[TT];
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) dd[t] = _mm512_mul_ps(DW, _mm512_set1_ps(ldf(a0 + t * xrb)));
    __m512i QH = _mm512_setzero_si512();
    if constexpr (Tr::qh) QH = _mm512_loadu_si512(p + 64);
    for (int i = 0; i < 4; ++i) {
      const __m512i raw = _mm512_loadu_si512(q + 64 * i);
      __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (Tr::qh) {  // as in tile
        const __m512i sel = _mm512_set1_epi32(0x01010101 * i);
        const __m512i bi = _mm512_shuffle_epi8(QH, _mm512_add_epi8(sel, dword_base()));
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(bi, lo_bits), lo, c16);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(bi, hi_bits), hi, c16);
      }
      TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
        const __m512i pl = dpbusd_bcast(_mm512_setzero_si512(), lo, a0 + t * xrb + 16 + 4 * i);
        const __m512i ph = dpbusd_bcast(_mm512_setzero_si512(), hi, a0 + t * xrb + 16 + 4 * (4 + i));
        acc[t][i] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(pl), acc[t][i]);
        acc[t][4 + i] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(ph), acc[t][4 + i]);
      }
    }
  }
  __m512 s[TT], ms[TT];
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
    const __m512* l = acc[t];
    const __m512 r0 = _mm512_add_ps(l[4], l[0]), r1 = _mm512_add_ps(l[5], l[1]);
    const __m512 r2 = _mm512_add_ps(l[6], l[2]), r3 = _mm512_add_ps(l[7], l[3]);
    s[t] = _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3));
    ms[t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 MW = half16(G + b * gbs + 32);
    const uint8_t* a0 = X + b * sizeof(BlockQA32) + 4;
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) ms[t] = _mm512_fmadd_ps(MW, _mm512_set1_ps(ldf(a0 + t * xrb)), ms[t]);
  }
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, _mm512_add_ps(s[t], ms[t]));
}

#undef TOKENS_UNROLLED

template <class Tr>
void gemm(const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
          int64_t n0, int64_t n1) {
  const int64_t nb = K / 32;
  const size_t group_bytes = static_cast<size_t>(nb) * 16 * Tr::bs;
  const int per = static_cast<int>((group_bytes / 64 + nb) / nb);
  const uint8_t* end = P + static_cast<size_t>((n1 + 15) / 16) * group_bytes;
  SidePrefetch* side = &side_prefetch();
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* G = P + static_cast<size_t>(n / 16) * group_bytes;
    const int cnt = static_cast<int>(n1 - n < 16 ? n1 - n : 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << cnt) - 1);
    if constexpr (Tr::min) {
      for (int64_t t0 = 0; t0 < T; t0 += kLaneTT) {
        Prefetch pf{G + group_bytes, t0 == 0 ? end : G, per, side};
        const uint8_t* x = X + t0 * xrb;
        float* c = C + t0 * ldc + n;
        switch (T - t0 < kLaneTT ? T - t0 : kLaneTT) {
          case 1: lane_tile<Tr, 1>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 2: lane_tile<Tr, 2>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 3: lane_tile<Tr, 3>(G, nb, x, xrb, c, ldc, mask, pf); break;
          default: lane_tile<Tr, kLaneTT>(G, nb, x, xrb, c, ldc, mask, pf); break;
        }
      }
    } else {
      for (int64_t t0 = 0; t0 < T; t0 += kTT) {
        // The first token tile prefetches the next group; later tiles find this one in cache.
        Prefetch pf{G + group_bytes, t0 == 0 ? end : G, per, side};
        const uint8_t* x = X + t0 * xrb;
        float* c = C + t0 * ldc + n;
        switch (T - t0 < kTT ? T - t0 : kTT) {
          case 1: tile<Tr, 1>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 2: tile<Tr, 2>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 3: tile<Tr, 3>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 4: tile<Tr, 4>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 5: tile<Tr, 5>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 6: tile<Tr, 6>(G, nb, x, xrb, c, ldc, mask, pf); break;
          case 7: tile<Tr, 7>(G, nb, x, xrb, c, ldc, mask, pf); break;
          default: tile<Tr, 8>(G, nb, x, xrb, c, ldc, mask, pf); break;
        }
      }
    }
  }
}

}  // namespace

void matmul_packed_avx512(GgmlType t, const uint8_t* P, int64_t /*N*/, int64_t K, const uint8_t* X, size_t xrb,
                          int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  switch (t) {
    case GgmlType::Q4_0: return gemm<PQ4_0>(P, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q4_1: return gemm<PQ4_1>(P, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q5_0: return gemm<PQ5_0>(P, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q5_1: return gemm<PQ5_1>(P, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q8_0: return gemm<PQ8_0>(P, K, X, xrb, T, C, ldc, n0, n1);
    default: return matmul_packed_k_avx512(t, P, K, X, xrb, T, C, ldc, n0, n1);
  }
}

}  // namespace ggflow::cpu::detail
