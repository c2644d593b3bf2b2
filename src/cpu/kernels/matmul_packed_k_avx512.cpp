// AVX-512 VNNI matmul over packed super-block weights (Q4_K, Q6_K; layout in matmul_packed.h), bit
// for bit the scalar twin of matmul.h: one f32 lane per row (16 rows per group), one chain per
// output over the super-blocks in order, each adding the twin's f32 steps
//   Q4_K  acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
//   Q6_K  acc = fma(d*da, (float)isum, acc)
// to exact integer sums built in any order (int32 addition is exact here and wraps associatively):
//   s_j   = sum over sub-block j of q_i * qa_i, vpdpbusd of the unsigned codes against the token's
//           activation dword broadcast to every lane (codes 0..15 / 0..63, activations int8)
//   isum  = sum_j sc_j * s_j  (vpmulld; the scales are per row, so per lane)
//   msum  = sum_j m_j * (bsums[2j] + bsums[2j+1])  (Q4_K: vpdpwssd of (m_j, m_j) int16 pairs
//           against the bsums dword j)
//   Q6_K's offset -32: isum -= 32 * sum_j sc_j * bsums[j]  (vpdpwssd of (sc_2p, sc_2p+1) pairs
//           against the bsums dword p), which is the twin's sum_j sc_j * sum (q_i - 32) * qa_i.
// Tiles of up to 4 tokens: each token keeps two sub-block sums in flight (the low and the high
// nibbles of a code dword belong to different sub-blocks), its isum and its acc; the codes of a
// dword are loaded and split once per tile. Tiles of 5-8 tokens (verification chunks, prompts)
// take one sub-block at a time (tile_q4_k_wide, tile_q6_k_wide). A group's super-blocks are contiguous; the next
// group is software-prefetched while this one computes, as in matmul_packed_avx512.cpp. Where
// amx_enabled(), whole 16-token tiles go to matmul_packed_k_amx.cpp first.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "cpu/isa.h"
#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/matmul_packed_avx512.h"
#include "cpu/kernels/quant_act.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;
using packed_avx512::dpbusd_bcast;
using packed_avx512::dpwssd_bcast;
using packed_avx512::half16;
using packed_avx512::q4k_finish;
using packed_avx512::hb4;
using packed_avx512::ldf;
using packed_avx512::q4k_scale;
using packed_avx512::q6_code;
using packed_avx512::q6k_scale;
using packed_avx512::q6k_scale_pair;
using packed_avx512::Prefetch;

constexpr int kTT = 8;  // tokens per tile at most
using packed_avx512::kBsums;
using packed_avx512::kQ;

#define TOKENS_UNROLLED _Pragma("GCC unroll 4")
#define TOKENS_UNROLLED8 _Pragma("GCC unroll 8")

inline __m512i ld(const uint8_t* p) { return _mm512_loadu_si512(p); }
template <int TT>
void tile_q4_k(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
               Prefetch pf) {
  constexpr size_t gbs = 16 * 144;
  __m512 acc[TT];
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    const __m512i S[3] = {ld(p + 64), ld(p + 128), ld(p + 192)};
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    __m512i isum[TT];
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) isum[t] = _mm512_setzero_si512();
    for (int pr = 0; pr < 4; ++pr) {  // sub-blocks 2pr (low nibbles) and 2pr+1 (high nibbles)
      pf.step();
      // Few tokens: two partial sums per sub-block (even and odd dwords), so each token has four
      // dependency chains of 4 instead of two of 8.
      constexpr bool split = TT <= 2;
      __m512i slo[TT], shi[TT], slo2[TT], shi2[TT];
      TOKENS_UNROLLED for (int t = 0; t < TT; ++t) slo[t] = shi[t] = slo2[t] = shi2[t] = _mm512_setzero_si512();
      for (int i = 0; i < 8; ++i) {
        const __m512i raw = ld(p + 256 + 64 * (8 * pr + i));
        const __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
          const uint8_t* q = a0 + t * xrb + kQ + 64 * pr + 4 * i;
          __m512i& l = split && i % 2 ? slo2[t] : slo[t];
          __m512i& h = split && i % 2 ? shi2[t] : shi[t];
          l = dpbusd_bcast(l, lo, q);
          h = dpbusd_bcast(h, hi, q + 32);
        }
      }
      if constexpr (split)
        TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
          slo[t] = _mm512_add_epi32(slo[t], slo2[t]);
          shi[t] = _mm512_add_epi32(shi[t], shi2[t]);
        }
      const __m512i sc0 = q4k_scale(S, 2 * pr), sc1 = q4k_scale(S, 2 * pr + 1);
      TOKENS_UNROLLED for (int t = 0; t < TT; ++t)
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(slo[t], sc0), _mm512_mullo_epi32(shi[t], sc1)));
    }
    q4k_finish<TT>(p, S, a0, xrb, isum, acc);
  }
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

// Q4_K, 5 to 8 tokens (prompts): one sub-block at a time, so each token keeps one partial sum
// (s), its isum and its acc in registers (24 of 32); a code dword is loaded twice (its low
// nibbles, then its high ones: from L1), and each weight byte serves up to 8 tokens.
template <int TT>
void tile_q4_k_wide(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
                    Prefetch pf) {
  constexpr size_t gbs = 16 * 144;
  __m512 acc[TT];
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    const __m512i S[3] = {ld(p + 64), ld(p + 128), ld(p + 192)};
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    __m512i isum[TT];
    TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {  // sub-block j: pair j/2, low (even j) or high (odd j) nibbles
      if (j % 2 == 0) pf.step();
      __m512i sj[TT];
      TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) sj[t] = _mm512_setzero_si512();
      for (int i = 0; i < 8; ++i) {
        const __m512i raw = ld(p + 256 + 64 * (8 * (j / 2) + i));
        const __m512i v = j % 2 ? _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4) : _mm512_and_si512(raw, m4);
        TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t)
          sj[t] = dpbusd_bcast(sj[t], v, a0 + t * xrb + kQ + 64 * (j / 2) + 32 * (j % 2) + 4 * i);
      }
      const __m512i sc = q4k_scale(S, j);
      TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sj[t], sc));
    }
    q4k_finish<TT>(p, S, a0, xrb, isum, acc);
  }
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

// The end of a Q6_K super-block for TT tokens: the offset's correction sum_j sc_j * bsums[j] (by
// scale pairs), isum - 32 * it, and the twin's f32 step acc = fma(d * da, (float)isum, acc).
template <int TT>
__attribute__((always_inline)) inline void q6k_finish(const uint8_t* p, const uint8_t* a0, size_t xrb, const __m512i* isum,
                                                      __m512* acc) {
  __m512i corr[TT];
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) corr[t] = _mm512_setzero_si512();
  for (int pr = 0; pr < 8; ++pr) {
    const __m512i pair = q6k_scale_pair(p, pr);
    TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) corr[t] = dpwssd_bcast(corr[t], pair, a0 + t * xrb + kBsums + 4 * pr);
  }
  const __m512 D = half16(p);
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) {
    const __m512i is = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr[t], 5));
    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(D, _mm512_set1_ps(ldf(a0 + t * xrb))), _mm512_cvtepi32_ps(is), acc[t]);
  }
}

template <int TT>
void tile_q6_k(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
               Prefetch pf) {
  constexpr size_t gbs = 16 * 210;
  __m512 acc[TT];
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    __m512i isum[TT];
    TOKENS_UNROLLED for (int t = 0; t < TT; ++t) isum[t] = _mm512_setzero_si512();
    for (int g = 0; g < 2; ++g)
      for (int Q = 0; Q < 4; ++Q) {  // ql dwords 16g+4Q..: sub-blocks 8g+Q (low) and 8g+4+Q (high)
        if (Q % 2 == 0) pf.step();
        __m512i slo[TT], shi[TT];
        TOKENS_UNROLLED for (int t = 0; t < TT; ++t) slo[t] = shi[t] = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
          const int i = 4 * Q + k;
          const __m512i raw = ld(p + 288 + 64 * (16 * g + i));
          const __m512i QH = ld(p + 2336 + 64 * (8 * g + i % 8));
          const __m512i lo = q6_code(raw, Q < 2 ? hb4<0>(QH) : hb4<1>(QH), m0f, m30);
          const __m512i hi = q6_code(_mm512_srli_epi16(raw, 4), Q < 2 ? hb4<2>(QH) : hb4<3>(QH), m0f, m30);
          TOKENS_UNROLLED for (int t = 0; t < TT; ++t) {
            const uint8_t* q = a0 + t * xrb + kQ + 128 * g + 4 * i;
            slo[t] = dpbusd_bcast(slo[t], lo, q);
            shi[t] = dpbusd_bcast(shi[t], hi, q + 64);
          }
        }
        const __m512i sc0 = q6k_scale(p, 8 * g + Q), sc1 = q6k_scale(p, 8 * g + 4 + Q);
        TOKENS_UNROLLED for (int t = 0; t < TT; ++t)
          isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(slo[t], sc0), _mm512_mullo_epi32(shi[t], sc1)));
      }
    q6k_finish<TT>(p, a0, xrb, isum, acc);
  }
  TOKENS_UNROLLED for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

// Q6_K, 5 to 8 tokens (verification chunks, small decode batches): one sub-block at a time, as
// tile_q4_k_wide, so each token keeps one partial sum, its isum and its acc in registers (24 of
// 32) and each decoded code byte serves up to 8 tokens (two 4-token tiles decoded every code twice:
// an 8-token step's Q6_K matrices took 1.9x the one-token time, the Q4_K ones 1.56x). A ql/qh pair
// is loaded twice (low nibbles, then high ones: from L1). The correction sums come after the
// sub-blocks (q6k_finish).
template <int TT>
void tile_q6_k_wide(const uint8_t* G, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __mmask16 mask,
                    Prefetch pf) {
  constexpr size_t gbs = 16 * 210;
  __m512 acc[TT];
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    __m512i isum[TT];
    TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) isum[t] = _mm512_setzero_si512();
    // The sub-block loops stay loops (one body of 4 code dwords x TT tokens): fully unrolled,
    // 6 tokens' address arithmetic spilled general registers and ran 25% slower than 5 or 7.
    _Pragma("GCC unroll 1") for (int g = 0; g < 2; ++g)
      _Pragma("GCC unroll 1") for (int Q = 0; Q < 4; ++Q) {
        if (Q % 2 == 0) pf.step();
        _Pragma("GCC unroll 1") for (int h = 0; h < 2; ++h) {  // sub-block 8g+Q (low nibbles), then 8g+4+Q (high)
          __m512i sj[TT];
          TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) sj[t] = _mm512_setzero_si512();
          for (int k = 0; k < 4; ++k) {
            const int i = 4 * Q + k;
            const __m512i raw = ld(p + 288 + 64 * (16 * g + i));
            const __m512i QH = ld(p + 2336 + 64 * (8 * g + i % 8));
            const __m512i v = h == 0 ? q6_code(raw, Q < 2 ? hb4<0>(QH) : hb4<1>(QH), m0f, m30)
                                     : q6_code(_mm512_srli_epi16(raw, 4), Q < 2 ? hb4<2>(QH) : hb4<3>(QH), m0f, m30);
            TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t)
              sj[t] = dpbusd_bcast(sj[t], v, a0 + t * xrb + kQ + 128 * g + 64 * h + 4 * i);
          }
          const __m512i sc = q6k_scale(p, 8 * g + 4 * h + Q);
          TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sj[t], sc));
        }
      }
    q6k_finish<TT>(p, a0, xrb, isum, acc);
  }
  TOKENS_UNROLLED8 for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, mask, acc[t]);
}

#undef TOKENS_UNROLLED
#undef TOKENS_UNROLLED8

using TileFn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, float*, int64_t, __mmask16, Prefetch);

// `tiles[k]`: the kernel for k+1 tokens, for k < max_tt.
void gemm(const TileFn* tiles, int max_tt, size_t block_bytes, const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb,
          int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 256;
  const size_t group_bytes = static_cast<size_t>(nb) * 16 * block_bytes;
  // Prefetch: the next group's lines spread over 4 steps per super-block (a burst of a whole
  // super-block's 36-53 lines at once overflows the core's outstanding-miss slots).
  const int per = static_cast<int>((group_bytes / 64 + 4 * nb) / (4 * nb));
  const uint8_t* end = P + static_cast<size_t>((n1 + 15) / 16) * group_bytes;
  SidePrefetch* side = &side_prefetch();
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* G = P + static_cast<size_t>(n / 16) * group_bytes;
    const int cnt = static_cast<int>(n1 - n < 16 ? n1 - n : 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << cnt) - 1);
    for (int64_t t0 = 0; t0 < T; t0 += max_tt) {
      // The first token tile prefetches the next group; later tiles find this one in cache.
      Prefetch pf{G + group_bytes, t0 == 0 ? end : G, per, side};
      const int tt = static_cast<int>(T - t0 < max_tt ? T - t0 : max_tt);
      tiles[tt - 1](G, nb, X + t0 * xrb, xrb, C + t0 * ldc + n, ldc, mask, pf);
    }
  }
}

}  // namespace

void matmul_packed_k_avx512(GgmlType t, const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
                            int64_t ldc, int64_t n0, int64_t n1) {
  static constexpr TileFn q4k[kTT] = {tile_q4_k<1>,      tile_q4_k<2>,      tile_q4_k<3>,      tile_q4_k<4>,
                                      tile_q4_k_wide<5>, tile_q4_k_wide<6>, tile_q4_k_wide<7>, tile_q4_k_wide<8>};
  static constexpr TileFn q6k[kTT] = {tile_q6_k<1>,      tile_q6_k<2>,      tile_q6_k<3>,      tile_q6_k<4>,
                                      tile_q6_k_wide<5>, tile_q6_k_wide<6>, tile_q6_k_wide<7>, tile_q6_k_wide<8>};
  if (T >= 16 && amx_enabled()) {  // whole tiles of 16 tokens on AMX, the rest here
    const int64_t T16 = T / 16 * 16;
    matmul_packed_k_amx(t, P, K, X, xrb, T16, C, ldc, n0, n1);
    if (T16 == T) return;
    X += T16 * xrb;
    C += T16 * ldc;
    T -= T16;
  }
  switch (t) {
    case GgmlType::Q4_K: return gemm(q4k, 8, 144, P, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q6_K: return gemm(q6k, 8, 210, P, K, X, xrb, T, C, ldc, n0, n1);
    default: return;
  }
}

}  // namespace ggflow::cpu::detail
