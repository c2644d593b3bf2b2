// Helpers shared by the AVX-512 packed matmul kernels (matmul_packed_avx512.cpp: 32-blocks,
// matmul_packed_k_avx512.cpp: super-blocks, matmul_packed_k_amx.cpp: their AMX prompt GEMM).
// Included only by files compiled with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/quant_act.h"
#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu::detail::packed_avx512 {

constexpr int kSideLines = 2;  // queued lines (side_prefetch.h) issued per weight block (1-8 measured: 2)

// isum + w . (the activation dword at p, broadcast): vpdpbusd with the broadcast as its memory
// operand ({1to16}), one fused uop where set1 + vpdpbusd are two (GCC does not fold it): fewer
// uops per block leave the out-of-order window room for more weight loads in flight.
inline __m512i dpbusd_bcast(__m512i isum, __m512i w, const uint8_t* p) {
#if defined(__GNUC__)
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(isum) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return isum;
#else
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_dpbusd_epi32(isum, w, _mm512_set1_epi32(v));
#endif
}

inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m512 half16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

struct Prefetch {
  const uint8_t* p;
  const uint8_t* end;
  int per;  // cache lines per block
  SidePrefetch* side;  // another step's queue, a few lines per block
  // Towards L2 (prefetcht1), not L1: a core holds more L2 misses in flight than L1 fill buffers,
  // and the weight stream is what bounds a decode step. Qwen2.5 1.5B Q4_K_M tg on the Xeon VM,
  // 2 threads: 23.8 t/s with prefetcht0, 26.2 with t1 (t2 the same; a group further ahead slower).
  void step() {
    for (int i = 0; i < per && p < end; ++i, p += 64) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    if (!side->empty()) side_prefetch_step(*side, kSideLines);
  }
};

constexpr size_t kQ = offsetof(BlockQA256, q), kBsums = offsetof(BlockQA256, bsums);

// vpdpwssd against the dword at p broadcast (two int16 of the activation's bsums), with the
// broadcast as its memory operand as in dpbusd_bcast.
inline __m512i dpwssd_bcast(__m512i acc, __m512i w, const uint8_t* p) {
#if defined(__GNUC__)
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
#else
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_dpwssd_epi32(acc, w, _mm512_set1_epi32(v));
#endif
}

// Q4_K's 6-bit scale (sc) and min (m) of sub-block j, per lane, from the scale dwords S0, S1, S2
// (GGUF scale bytes 0..3, 4..7, 8..11 of each row): the twin's scale_min_k4.
inline __m512i q4k_scale(const __m512i S[3], int j) {
  const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  if (j < 4) return _mm512_and_si512(_mm512_srli_epi32(S[0], 8 * j), m63);
  const int k = j - 4;
  return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(S[2], 8 * k), m15), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(S[0], 8 * k + 6), m3), 4));
}
inline __m512i q4k_min(const __m512i S[3], int j) {
  const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  if (j < 4) return _mm512_and_si512(_mm512_srli_epi32(S[1], 8 * j), m63);
  const int k = j - 4;
  return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(S[2], 8 * k + 4), m15), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(S[1], 8 * k + 6), m3), 4));
}

// Q6_K: code = low nibble | (2 high bits << 4). hb4<s>(QH): bits 2s, 2s+1 of every byte moved to
// bits 4, 5 (16-bit shifts; what crosses a byte boundary lands outside 0x30 and is masked away).
template <int s>
inline __m512i hb4(__m512i QH) {
  if constexpr (s == 0) return _mm512_slli_epi16(QH, 4);
  if constexpr (s == 1) return _mm512_slli_epi16(QH, 2);
  if constexpr (s == 2) return QH;
  return _mm512_srli_epi16(QH, 2);
}
// (a & 0x0F) | (h & 0x30), with m30 = 0x30 bytes and m0f = 0x0F bytes.
inline __m512i q6_code(__m512i a, __m512i h, __m512i m0f, __m512i m30) {
  return _mm512_ternarylogic_epi32(a, _mm512_and_si512(h, m30), m0f, 0xEC);  // (A & C) | B
}
// Q6_K's int8 scales of sub-blocks 2pr and 2pr+1 as int16 pairs per lane (row), from the packed
// super-block at p (scale pairs at p + 32).
inline __m512i q6k_scale_pair(const uint8_t* p, int pr) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 + 32 * pr)));
}
// Q6_K's scale of sub-block j per lane, sign-extended to int32.
inline __m512i q6k_scale(const uint8_t* p, int j) {
  const __m512i pair = q6k_scale_pair(p, j / 2);
  return j % 2 ? _mm512_srai_epi32(pair, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
}

// The twin's two f32 steps of a Q4_K super-block for TT tokens (super-block at p, activations at a0).
template <int TT>
__attribute__((always_inline)) inline void q4k_steps(const uint8_t* p, const uint8_t* a0, size_t xrb, const __m512i* isum,
                                                     const __m512i* msum, __m512* acc) {
  const __m512 D = half16(p), DMIN = half16(p + 32);
  _Pragma("GCC unroll 16") for (int t = 0; t < TT; ++t) {
    const __m512 DA = _mm512_set1_ps(ldf(a0 + t * xrb));
    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(D, DA), _mm512_cvtepi32_ps(isum[t]), acc[t]);
    acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(DMIN, DA), _mm512_cvtepi32_ps(msum[t]), acc[t]);
  }
}

// The end of a Q4_K super-block for TT tokens: msum = sum_j m_j * (bsums[2j] + bsums[2j+1])
// (vpdpwssd of the (m_j, m_j) int16 pairs against the bsums dword j), then the twin's two f32 steps.
template <int TT>
__attribute__((always_inline)) inline void q4k_finish(const uint8_t* p, const __m512i S[3], const uint8_t* a0, size_t xrb, const __m512i* isum,
                       __m512* acc) {
  __m512i msum[TT];
  _Pragma("GCC unroll 16") for (int t = 0; t < TT; ++t) msum[t] = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    const __m512i m = q4k_min(S, j), mp = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    _Pragma("GCC unroll 16") for (int t = 0; t < TT; ++t) msum[t] = dpwssd_bcast(msum[t], mp, a0 + t * xrb + kBsums + 4 * j);
  }
  q4k_steps<TT>(p, a0, xrb, isum, msum, acc);
}

}  // namespace ggflow::cpu::detail::packed_avx512
