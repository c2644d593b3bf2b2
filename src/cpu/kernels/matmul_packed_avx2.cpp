// AVX2 + FMA + F16C matmul over packed weights (layout in matmul_packed.h) for the 32-element
// blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and Q4_K and Q6_K (below), bit for bit the scalar twin of matmul.h. A 16-row group
// is taken as two halves of 8 rows: in each packed field and code chunk a half's rows are 16 or 32
// contiguous bytes, so one register holds the 8 rows' dword of a chunk (lane r = row 8h + r) and
// one vcvtph2ps their scales. Without VNNI a lane's 4-element sum is vpmaddubsw against the
// activation dword broadcast, then vpmaddwd by ones; in lanes = rows there are no horizontal sums
// and no per-row scale shuffles (what the GGUF-layout kernel, matmul_avx2.cpp, spends per block).
// Integer sums are exact: Q4 / Q5 codes are unsigned (<= 31) and two pairs of them summed in int16
// stay <= 4 * 31 * 127; Q8_0 goes through the sign trick maddubs(|w|, sign(a, w)), |pair| <= 2 *
// 128 * 127. Q4_0 / Q5_0's offsets (-8, -16) enter as -zp * sum(qa) at the start of the token's
// integer sum; then the twin's f32 step acc = fma(d * da, (float)isum, acc). Q4_1 / Q5_1 keep
// llama.cpp's 8 lane chains and min chain per output (lane_tile).
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <span>

#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/quant_act.h"
#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;

struct PQ4_0 { static constexpr int bs = 18, fields = 1, chunks = 4, zp = 8;  static constexpr bool min = false, qh = false; };
struct PQ4_1 { static constexpr int bs = 20, fields = 2, chunks = 4, zp = 0;  static constexpr bool min = true,  qh = false; };
struct PQ5_0 { static constexpr int bs = 22, fields = 1, chunks = 4, zp = 16; static constexpr bool min = false, qh = true; };
struct PQ5_1 { static constexpr int bs = 24, fields = 2, chunks = 4, zp = 0;  static constexpr bool min = true,  qh = true; };
struct PQ8_0 { static constexpr int bs = 34, fields = 1, chunks = 8, zp = 0;  static constexpr bool min = false, qh = false; };

constexpr int kTT = 4;      // tokens per register tile (one chain per output)
constexpr int kLaneTT = 8;  // tokens per lane tile with the accumulators in L1 (Q4_1 / Q5_1)
constexpr int kSideLines = 2;

inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m256i ld256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 half8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256i bcast(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i ones16() { return _mm256_set1_epi16(1); }

// The next group's bytes, a few lines per block, and the attention's queue (side_prefetch.h).
struct Prefetch {
  const uint8_t* p;
  const uint8_t* end;
  int per;
  SidePrefetch* side;
  void step() {
    for (int i = 0; i < per && p < end; ++i, p += 64) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
    if (!side->empty()) side_prefetch_step(*side, kSideLines);
  }
};

// Half h's codes of chunk pair i of the block at p: lo = elements 4i..4i+3 of each row (lane),
// hi = 16+4i.. (Q4 / Q5; Q8_0: chunk i only, in lo). Q5: byte i of the lane's qh dword copied
// to the dword's 4 bytes, tested against 1,2,4,8 (lo) and 16,32,64,128 (hi); set bits add 16.
template <class Tr>
inline void codes(const uint8_t* p, int h, int i, __m256i* lo, __m256i* hi) {
  const uint8_t* q = p + 32 * Tr::fields + (Tr::qh ? 64 : 0) + 32 * h;
  const __m256i raw = ld256(q + 64 * i);
  if constexpr (Tr::chunks == 8) {
    *lo = raw;
    return;
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  *lo = _mm256_and_si256(raw, m4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
  if constexpr (Tr::qh) {
    const __m256i QH = ld256(p + 32 * Tr::fields + 32 * h);
    const __m256i sel = _mm256_add_epi8(_mm256_set1_epi32(0x01010101 * i),
                                        _mm256_set_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0, 0x0C0C0C0C,
                                                         0x08080808, 0x04040404, 0));
    const __m256i bi = _mm256_shuffle_epi8(QH, sel);
    const __m256i lo_bits = _mm256_set1_epi32(0x08040201), hi_bits = _mm256_set1_epi32(static_cast<int>(0x80402010u));
    const __m256i c16 = _mm256_set1_epi8(16);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bi, lo_bits), lo_bits), c16));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bi, hi_bits), hi_bits), c16));
  }
}

// isum + (the lanes' 4-element sums of w against the activation dword at a).
template <class Tr>
inline __m256i dot4(__m256i isum, __m256i w, const uint8_t* a) {
  const __m256i x = bcast(a);
  if constexpr (Tr::chunks == 8)
    return _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)), ones16()));
  return _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones16()));
}

// Q4 / Q5: both halves of a chunk pair summed in int16 before the widening (exact, see the top).
template <class Tr>
inline __m256i dot4_pair(__m256i isum, __m256i lo, __m256i hi, const uint8_t* alo, const uint8_t* ahi) {
  const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast(alo)), _mm256_maddubs_epi16(hi, bcast(ahi)));
  return _mm256_add_epi32(isum, _mm256_madd_epi16(p16, ones16()));
}

// TT tokens (<= kTT) of half h of the group at G: one chain per output.
template <class Tr, int TT>
void tile(const uint8_t* G, int h, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __m256i mask,
          Prefetch pf) {
  constexpr size_t gbs = 16 * Tr::bs;
  __m256 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    pf.step();
    // Activation block b of token t at a0 + t*xrb: {da, sa, sum(qa), -, qa[32]} (quant_act.h).
    const uint8_t* a0 = X + b * sizeof(BlockQA32);
    __m256i isum[TT];
    for (int t = 0; t < TT; ++t) {
      int32_t sum;
      std::memcpy(&sum, a0 + t * xrb + 8, 4);
      isum[t] = Tr::zp ? _mm256_set1_epi32(-Tr::zp * sum) : _mm256_setzero_si256();
    }
    if constexpr (Tr::chunks == 8) {
      for (int c = 0; c < 8; ++c) {
        __m256i w, unused;
        codes<Tr>(p, h, c, &w, &unused);
        for (int t = 0; t < TT; ++t) isum[t] = dot4<Tr>(isum[t], w, a0 + t * xrb + 16 + 4 * c);
      }
    } else {
      for (int i = 0; i < 4; ++i) {
        __m256i lo, hi;
        codes<Tr>(p, h, i, &lo, &hi);
        for (int t = 0; t < TT; ++t)
          isum[t] = dot4_pair<Tr>(isum[t], lo, hi, a0 + t * xrb + 16 + 4 * i, a0 + t * xrb + 16 + 4 * (4 + i));
      }
    }
    const __m256 DW = half8(p + 16 * h);
    for (int t = 0; t < TT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(DW, _mm256_set1_ps(ldf(a0 + t * xrb))), _mm256_cvtepi32_ps(isum[t]), acc[t]);
  }
  for (int t = 0; t < TT; ++t) _mm256_maskstore_ps(C + t * ldc, mask, acc[t]);
}

// The twin's end of a Q4_1 / Q5_1 output from its 8 lane chains l[] and min chain.
inline __m256 lane_sum(const __m256* l, __m256 ms) {
  const __m256 r0 = _mm256_add_ps(l[4], l[0]), r1 = _mm256_add_ps(l[5], l[1]);
  const __m256 r2 = _mm256_add_ps(l[6], l[2]), r3 = _mm256_add_ps(l[7], l[3]);
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)), ms);
}

// Q4_1 / Q5_1, one token (decode): chain i (elements 4i..4i+3 of every block) is l[i], chain 4+i
// (16+4i..) l[4+i], the 8 rows in lanes; everything in registers.
template <class Tr>
void lane_tile(const uint8_t* G, int h, int64_t nb, const uint8_t* x, float* c, __m256i mask, Prefetch pf) {
  constexpr size_t gbs = 16 * Tr::bs;
  __m256 l[8], ms = _mm256_setzero_ps();
  for (int j = 0; j < 8; ++j) l[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    pf.step();
    const uint8_t* a = x + b * sizeof(BlockQA32);
    const __m256 dd = _mm256_mul_ps(half8(p + 16 * h), _mm256_set1_ps(ldf(a)));
    ms = _mm256_fmadd_ps(half8(p + 32 + 16 * h), _mm256_set1_ps(ldf(a + 4)), ms);
    for (int i = 0; i < 4; ++i) {
      __m256i lo, hi;
      codes<Tr>(p, h, i, &lo, &hi);
      l[i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(dot4<Tr>(_mm256_setzero_si256(), lo, a + 16 + 4 * i)), l[i]);
      l[4 + i] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(dot4<Tr>(_mm256_setzero_si256(), hi, a + 16 + 4 * (4 + i))), l[4 + i]);
    }
  }
  _mm256_maskstore_ps(c, mask, lane_sum(l, ms));
}

// Q4_1 / Q5_1, up to kLaneTT tokens (prompts, batches): the block's codes are decoded once for all
// of them and each token's 9 accumulators live in L1 (a load and a store around each FMA); every
// chain takes the same FMAs in the same order as in lane_tile.
template <class Tr>
void lane_tiles(const uint8_t* G, int h, int64_t nb, const uint8_t* X, size_t xrb, int tt, float* C, int64_t ldc,
                __m256i mask, Prefetch pf) {
  constexpr size_t gbs = 16 * Tr::bs;
  alignas(32) float acc[kLaneTT][9][8];  // per token: l[0..7], min chain
  std::memset(acc, 0, sizeof acc);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * gbs;
    pf.step();
    __m256i lo[4], hi[4];
    for (int i = 0; i < 4; ++i) codes<Tr>(p, h, i, &lo[i], &hi[i]);
    const __m256 DW = half8(p + 16 * h), MW = half8(p + 32 + 16 * h);
    for (int t = 0; t < tt; ++t) {
      const uint8_t* a = X + t * xrb + b * sizeof(BlockQA32);
      float(*ac)[8] = acc[t];
      const __m256 dd = _mm256_mul_ps(DW, _mm256_set1_ps(ldf(a)));
      _mm256_store_ps(ac[8], _mm256_fmadd_ps(MW, _mm256_set1_ps(ldf(a + 4)), _mm256_load_ps(ac[8])));
      for (int i = 0; i < 4; ++i) {
        const __m256i pl = dot4<Tr>(_mm256_setzero_si256(), lo[i], a + 16 + 4 * i);
        const __m256i ph = dot4<Tr>(_mm256_setzero_si256(), hi[i], a + 16 + 4 * (4 + i));
        _mm256_store_ps(ac[i], _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(pl), _mm256_load_ps(ac[i])));
        _mm256_store_ps(ac[4 + i], _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(ph), _mm256_load_ps(ac[4 + i])));
      }
    }
  }
  for (int t = 0; t < tt; ++t) {
    __m256 l[8];
    for (int j = 0; j < 8; ++j) l[j] = _mm256_load_ps(acc[t][j]);
    _mm256_maskstore_ps(C + t * ldc, mask, lane_sum(l, _mm256_load_ps(acc[t][8])));
  }
}

// Lanes [0, rows) of a half, rows clipped to [0, 8].
inline __m256i rows_mask(int64_t rows) {
  const int r = static_cast<int>(rows < 0 ? 0 : rows > 8 ? 8 : rows);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The pf.step() calls of a pass fetch `bytes` from `next` (not past `end`) over `steps` calls.
inline Prefetch prefetch_span(const uint8_t* next, size_t bytes, const uint8_t* end, int64_t steps, SidePrefetch* side) {
  const int per = static_cast<int>((static_cast<int64_t>(bytes / 64) + steps) / steps);
  return Prefetch{next, next + bytes < end ? next + bytes : end, per, side};
}

// Calls f(G, h, mask, c0, first, later) for each 8-row half h of the groups that cover [n0, n1):
// G the group (group_bytes), mask its real rows, c0 = C + its first row, and two prefetches of
// half h's share of the next group, spread over `steps` pf.step() calls of a pass: `first` for the
// first token tile, `later` (spent) for the others, which find this group in cache.
template <class F>
void for_halves(const uint8_t* P, size_t group_bytes, int64_t steps, float* C, int64_t n0, int64_t n1, F&& f) {
  const size_t half_bytes = group_bytes / 2;
  const uint8_t* end = P + static_cast<size_t>((n1 + 15) / 16) * group_bytes;
  SidePrefetch* side = &side_prefetch();
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* G = P + static_cast<size_t>(n / 16) * group_bytes;
    for (int h = 0; h < 2 && n + 8 * h < n1; ++h) {
      const Prefetch first = prefetch_span(G + group_bytes + h * half_bytes, half_bytes, end, steps, side);
      f(G, h, rows_mask(n1 - n - 8 * h), C + n + 8 * h, first, Prefetch{first.p, first.p, first.per, side});
    }
  }
}

// One token over whole groups: f(G, masks of its two halves, its first row, a prefetch of the
// next group spread over `steps` pf.step() calls).
template <class F>
void for_groups(const uint8_t* P, size_t group_bytes, int64_t steps, int64_t n0, int64_t n1, F&& f) {
  const uint8_t* end = P + static_cast<size_t>((n1 + 15) / 16) * group_bytes;
  SidePrefetch* side = &side_prefetch();
  for (int64_t n = n0; n < n1; n += 16) {
    const uint8_t* G = P + static_cast<size_t>(n / 16) * group_bytes;
    const __m256i mask[2] = {rows_mask(n1 - n), rows_mask(n1 - n - 8)};
    f(G, mask, n, prefetch_span(G + group_bytes, group_bytes, end, steps, side));
  }
}

template <class Tr>
void gemm(const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc, int64_t n0,
          int64_t n1) {
  const int64_t nb = K / 32;
  for_halves(P, static_cast<size_t>(nb) * 16 * Tr::bs, nb, C, n0, n1,
             [&](const uint8_t* G, int h, __m256i mask, float* c0, Prefetch first, Prefetch later) {
               if constexpr (Tr::min) {
                 if (T == 1) return lane_tile<Tr>(G, h, nb, X, c0, mask, first);
                 for (int64_t t0 = 0; t0 < T; t0 += kLaneTT)
                   lane_tiles<Tr>(G, h, nb, X + t0 * xrb, xrb, static_cast<int>(T - t0 < kLaneTT ? T - t0 : kLaneTT),
                                  c0 + t0 * ldc, ldc, mask, t0 == 0 ? first : later);
               } else {
                 for (int64_t t0 = 0; t0 < T; t0 += kTT) {
                   const Prefetch pf = t0 == 0 ? first : later;
                   const uint8_t* x = X + t0 * xrb;
                   float* c = c0 + t0 * ldc;
                   switch (T - t0 < kTT ? T - t0 : kTT) {
                     case 1: tile<Tr, 1>(G, h, nb, x, xrb, c, ldc, mask, pf); break;
                     case 2: tile<Tr, 2>(G, h, nb, x, xrb, c, ldc, mask, pf); break;
                     case 3: tile<Tr, 3>(G, h, nb, x, xrb, c, ldc, mask, pf); break;
                     default: tile<Tr, 4>(G, h, nb, x, xrb, c, ldc, mask, pf); break;
                   }
                 }
               }
             });
}

// ================================ Q4_K ================================
// A packed Q4_K group block (2304 bytes, matmul_packed.h): d[16] @0, dmin[16] @32, scale dwords
// S_c[16] @64 + 64c, code dword c = 8p + i @256 + 64c (low nibbles: sub-block 2p, elements 4i..;
// high: sub-block 2p+1); half h's 8 rows at +16h (f16 fields) or +32h (dwords). The twin's steps
//   acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
// take exact integer sums: a sub-block's 8 vpmaddubsw results summed in int16 (8 * 2 * 15 * 127 =
// 30480), then one vpmaddwd against (sc_j, sc_j) gives sc_j * s_j in int32; msum = sum_j m_j *
// (bsums[2j] + bsums[2j+1]) by vpmaddwd of (m_j, m_j) against the bsums dword j.
constexpr size_t kQ4kBytes = 16 * 144;
constexpr size_t kQ = offsetof(BlockQA256, q), kBsums = offsetof(BlockQA256, bsums);

// Sub-block j's 6-bit scale (min: m) of each lane, in both int16 halves of its dword.
template <bool kMin>
inline __m256i q4k_pair16(const __m256i* S, int j) {
  const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
  const __m256i& A = kMin ? S[1] : S[0];
  __m256i v;
  if (j < 4) {
    v = _mm256_and_si256(_mm256_srli_epi32(A, 8 * j), m63);
  } else {
    const int k = j - 4;
    const __m256i low = _mm256_and_si256(_mm256_srli_epi32(S[2], 8 * k + (kMin ? 4 : 0)), m15);
    v = _mm256_or_si256(low, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(A, 8 * k + 6), m3), 4));
  }
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

// TT tokens (<= 8) of half h. TT <= 2: a code dword's two nibbles serve sub-blocks 2p and 2p+1
// at once (each token: two int16 sums, isum, acc); TT 3-8: one sub-block at a time (each code
// dword loaded twice, from L1), so each token keeps one int16 sum in a register (isum and acc
// too up to 4 tokens; beyond, those go to L1, touched once per sub-block and super-block). The
// more tokens share a decoded code register, the fewer decoding uops per vpmaddubsw.
template <int TT>
void tile_q4k(const uint8_t* G, int h, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __m256i mask,
              Prefetch pf) {
  __m256 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ4kBytes;
    const __m256i S[3] = {ld256(p + 64 + 32 * h), ld256(p + 128 + 32 * h), ld256(p + 192 + 32 * h)};
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    const uint8_t* codes = p + 256 + 32 * h;
    __m256i isum[TT];
    for (int t = 0; t < TT; ++t) isum[t] = _mm256_setzero_si256();
    if constexpr (TT <= 2) {
      for (int pr = 0; pr < 4; ++pr) {
        pf.step();
        __m256i slo[TT], shi[TT];
        for (int t = 0; t < TT; ++t) slo[t] = shi[t] = _mm256_setzero_si256();
        for (int i = 0; i < 8; ++i) {
          const __m256i raw = ld256(codes + 64 * (8 * pr + i));
          const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
          for (int t = 0; t < TT; ++t) {
            const uint8_t* q = a0 + t * xrb + kQ + 64 * pr + 4 * i;
            slo[t] = _mm256_add_epi16(slo[t], _mm256_maddubs_epi16(lo, bcast(q)));
            shi[t] = _mm256_add_epi16(shi[t], _mm256_maddubs_epi16(hi, bcast(q + 32)));
          }
        }
        const __m256i sc0 = q4k_pair16<false>(S, 2 * pr), sc1 = q4k_pair16<false>(S, 2 * pr + 1);
        for (int t = 0; t < TT; ++t)
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(slo[t], sc0), _mm256_madd_epi16(shi[t], sc1)));
      }
    } else {
      for (int j = 0; j < 8; ++j) {
        if (j % 2 == 0) pf.step();
        __m256i sj[TT];
        for (int t = 0; t < TT; ++t) sj[t] = _mm256_setzero_si256();
        for (int i = 0; i < 8; ++i) {
          const __m256i raw = ld256(codes + 64 * (8 * (j / 2) + i));
          const __m256i v = j % 2 ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
          for (int t = 0; t < TT; ++t)
            sj[t] = _mm256_add_epi16(sj[t], _mm256_maddubs_epi16(v, bcast(a0 + t * xrb + kQ + 64 * (j / 2) + 32 * (j % 2) + 4 * i)));
        }
        const __m256i sc = q4k_pair16<false>(S, j);
        for (int t = 0; t < TT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(sj[t], sc));
      }
    }
    __m256i msum[TT];
    for (int t = 0; t < TT; ++t) msum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i mp = q4k_pair16<true>(S, j);
      for (int t = 0; t < TT; ++t) msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(mp, bcast(a0 + t * xrb + kBsums + 4 * j)));
    }
    const __m256 D = half8(p + 16 * h), DMIN = half8(p + 32 + 16 * h);
    for (int t = 0; t < TT; ++t) {
      const __m256 DA = _mm256_set1_ps(ldf(a0 + t * xrb));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(D, DA), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(DMIN, DA), _mm256_cvtepi32_ps(msum[t]), acc[t]);
    }
  }
  for (int t = 0; t < TT; ++t) _mm256_maskstore_ps(C + t * ldc, mask, acc[t]);
}

// Q4_K, one token, both halves of a group in one pass: the same operations per lane as
// tile_q4k<1>, but each 64-byte code line is read whole at once (and each activation dword
// broadcast once for 16 rows), so a decode step streams the group's lines in order.
void group_q4k(const uint8_t* G, int64_t nb, const uint8_t* x, float* c, const __m256i* mask, Prefetch pf) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ4kBytes;
    const uint8_t* codes = p + 256;
    const uint8_t* a0 = x + b * sizeof(BlockQA256);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int pr = 0; pr < 4; ++pr) {
      pf.step();
      __m256i slo[2], shi[2];
      for (int h = 0; h < 2; ++h) slo[h] = shi[h] = _mm256_setzero_si256();
      for (int i = 0; i < 8; ++i) {
        const uint8_t* q = a0 + kQ + 64 * pr + 4 * i;
        const __m256i xl = bcast(q), xh = bcast(q + 32);
        for (int h = 0; h < 2; ++h) {
          const __m256i raw = ld256(codes + 64 * (8 * pr + i) + 32 * h);
          const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
          slo[h] = _mm256_add_epi16(slo[h], _mm256_maddubs_epi16(lo, xl));
          shi[h] = _mm256_add_epi16(shi[h], _mm256_maddubs_epi16(hi, xh));
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i S[3] = {ld256(p + 64 + 32 * h), ld256(p + 128 + 32 * h), ld256(p + 192 + 32 * h)};
        const __m256i sc0 = q4k_pair16<false>(S, 2 * pr), sc1 = q4k_pair16<false>(S, 2 * pr + 1);
        isum[h] = _mm256_add_epi32(isum[h], _mm256_add_epi32(_mm256_madd_epi16(slo[h], sc0), _mm256_madd_epi16(shi[h], sc1)));
      }
    }
    const __m256 DA = _mm256_set1_ps(ldf(a0));
    for (int h = 0; h < 2; ++h) {
      const __m256i S[3] = {ld256(p + 64 + 32 * h), ld256(p + 128 + 32 * h), ld256(p + 192 + 32 * h)};
      __m256i msum = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) msum = _mm256_add_epi32(msum, _mm256_madd_epi16(q4k_pair16<true>(S, j), bcast(a0 + kBsums + 4 * j)));
      const __m256 D = half8(p + 16 * h), DMIN = half8(p + 32 + 16 * h);
      acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(D, DA), _mm256_cvtepi32_ps(isum[h]), acc[h]);
      acc[h] = _mm256_fnmadd_ps(_mm256_mul_ps(DMIN, DA), _mm256_cvtepi32_ps(msum), acc[h]);
    }
  }
  for (int h = 0; h < 2; ++h) _mm256_maskstore_ps(c + 8 * h, mask[h], acc[h]);
}

// ================================ Q6_K ================================
// A packed Q6_K group block (3360 bytes, matmul_packed.h): d[16] @0, scale pairs @32 + 32p (row r:
// int8 scales 2p, 2p+1 at +2r), ql dword c = 16g + i @288 + 64c (low nibbles: elements 128g + 4i..,
// high: 128g + 64 + 4i..), qh dword 8g + i @2336 + 64(8g + i); half h's 8 rows at +16h (d, scale
// pairs) or +32h (dwords). A code (0..63: low nibble | 2 high bits << 4) goes through vpmaddubsw
// against the activation dword; a sub-block (16 elements, 4 dwords) is two int16 sums of two
// dwords each (<= 2 * 2 * 63 * 128 = 32256), each one vpmaddwd against (sc_j, sc_j) into isum.
// The offset -32: isum -= 32 * sum_j sc_j * bsums[j] (vpmaddwd of the scale pairs against the
// bsums dword p); then the twin's acc = fma(d * da, (float)isum, acc).
constexpr size_t kQ6kBytes = 16 * 210;

// Bits 2s, 2s+1 of every byte moved to bits 4, 5 (16-bit shifts; what crosses a byte lands
// outside 0x30 and is masked away), then code = (a & 0x0F) | (that & 0x30).
template <int s>
inline __m256i q6_code(__m256i a, __m256i QH, __m256i m0f, __m256i m30) {
  __m256i hb = QH;
  if constexpr (s == 0) hb = _mm256_slli_epi16(QH, 4);
  if constexpr (s == 1) hb = _mm256_slli_epi16(QH, 2);
  if constexpr (s == 3) hb = _mm256_srli_epi16(QH, 2);
  return _mm256_or_si256(_mm256_and_si256(a, m0f), _mm256_and_si256(hb, m30));
}
// The int8 scales of sub-blocks 2p and 2p+1 of half h's lanes as int16 pairs.
inline __m256i q6k_pairs(const uint8_t* p, int h, int pr) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 + 32 * pr + 16 * h)));
}
// Sub-block j's scale of each lane in both int16 halves of its dword: the pair's int16 half j % 2
// copied to the other by one vpshufb.
inline __m256i q6k_scale16(const uint8_t* p, int h, int j) {
  const __m256i even = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8,
                                        9, 8, 9, 12, 13, 12, 13);
  const __m256i odd = _mm256_add_epi8(even, _mm256_set1_epi8(2));
  return _mm256_shuffle_epi8(q6k_pairs(p, h, j / 2), j % 2 ? odd : even);
}

// TT tokens (<= 4) of half h, one sub-block at a time: each token keeps two int16 sums, isum and acc.
template <int TT>
void tile_q6k(const uint8_t* G, int h, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc, __m256i mask,
              Prefetch pf) {
  __m256 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = G + b * kQ6kBytes;
    const uint8_t* a0 = X + b * sizeof(BlockQA256);
    __m256i isum[TT];
    for (int t = 0; t < TT; ++t) isum[t] = _mm256_setzero_si256();
    // Unrolled whole (constant offsets): rolled, GCC computes the dword indices in scalar
    // registers and spills them, about as many uops as the vector work.
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g)
#pragma GCC unroll 4
      for (int Q = 0; Q < 4; ++Q) {  // ql dwords 16g+4Q..: sub-blocks 8g+Q (low nibbles) and 8g+4+Q (high)
        if (Q % 2 == 0) pf.step();
#pragma GCC unroll 2
        for (int hi = 0; hi < 2; ++hi) {
          __m256i s0[TT], s1[TT];  // dwords 0-1 and 2-3 of the sub-block
          for (int t = 0; t < TT; ++t) s0[t] = s1[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const int i = 4 * Q + k;
            const __m256i raw = ld256(p + 288 + 64 * (16 * g + i) + 32 * h);
            const __m256i QH = ld256(p + 2336 + 64 * (8 * g + i % 8) + 32 * h);
            const __m256i v = hi == 0 ? (Q < 2 ? q6_code<0>(raw, QH, m0f, m30) : q6_code<1>(raw, QH, m0f, m30))
                                      : (Q < 2 ? q6_code<2>(_mm256_srli_epi16(raw, 4), QH, m0f, m30)
                                               : q6_code<3>(_mm256_srli_epi16(raw, 4), QH, m0f, m30));
            for (int t = 0; t < TT; ++t) {
              __m256i& s = k < 2 ? s0[t] : s1[t];
              s = _mm256_add_epi16(s, _mm256_maddubs_epi16(v, bcast(a0 + t * xrb + kQ + 128 * g + 64 * hi + 4 * i)));
            }
          }
          const __m256i sc = q6k_scale16(p, h, 8 * g + 4 * hi + Q);
          for (int t = 0; t < TT; ++t)
            isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(s0[t], sc), _mm256_madd_epi16(s1[t], sc)));
        }
      }
    __m256i corr[TT];
    for (int t = 0; t < TT; ++t) corr[t] = _mm256_setzero_si256();
    for (int pr = 0; pr < 8; ++pr) {
      const __m256i pair = q6k_pairs(p, h, pr);
      for (int t = 0; t < TT; ++t) corr[t] = _mm256_add_epi32(corr[t], _mm256_madd_epi16(pair, bcast(a0 + t * xrb + kBsums + 4 * pr)));
    }
    const __m256 D = half8(p + 16 * h);
    for (int t = 0; t < TT; ++t) {
      const __m256i is = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr[t], 5));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(D, _mm256_set1_ps(ldf(a0 + t * xrb))), _mm256_cvtepi32_ps(is), acc[t]);
    }
  }
  for (int t = 0; t < TT; ++t) _mm256_maskstore_ps(C + t * ldc, mask, acc[t]);
}

using TileK = void (*)(const uint8_t*, int, int64_t, const uint8_t*, size_t, float*, int64_t, __m256i, Prefetch);

// The super-block types: tiles[k] runs k+1 tokens (up to tiles.size()) of a half; 4 pf.step() per
// super-block.
void gemm_k(std::span<const TileK> tiles, size_t block_bytes, const uint8_t* P, int64_t K, const uint8_t* X,
            size_t xrb, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 256, widest = static_cast<int64_t>(tiles.size());
  for_halves(P, static_cast<size_t>(nb) * block_bytes, 4 * nb, C, n0, n1,
             [&](const uint8_t* G, int h, __m256i mask, float* c0, Prefetch first, Prefetch later) {
               for (int64_t t0 = 0; t0 < T; t0 += widest)
                 tiles[(T - t0 < widest ? T - t0 : widest) - 1](G, h, nb, X + t0 * xrb, xrb, c0 + t0 * ldc, ldc, mask,
                                                                t0 == 0 ? first : later);
             });
}

}  // namespace

bool matmul_packed_avx2(GgmlType t, const uint8_t* P, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
                        int64_t ldc, int64_t n0, int64_t n1) {
  switch (t) {
    case GgmlType::Q4_0: gemm<PQ4_0>(P, K, X, xrb, T, C, ldc, n0, n1); return true;
    case GgmlType::Q4_1: gemm<PQ4_1>(P, K, X, xrb, T, C, ldc, n0, n1); return true;
    case GgmlType::Q5_0: gemm<PQ5_0>(P, K, X, xrb, T, C, ldc, n0, n1); return true;
    case GgmlType::Q5_1: gemm<PQ5_1>(P, K, X, xrb, T, C, ldc, n0, n1); return true;
    case GgmlType::Q8_0: gemm<PQ8_0>(P, K, X, xrb, T, C, ldc, n0, n1); return true;
    case GgmlType::Q4_K: {
      if (T == 1) {  // decode: whole groups
        for_groups(P, static_cast<size_t>(K / 256) * kQ4kBytes, 4 * (K / 256), n0, n1,
                   [&](const uint8_t* G, const __m256i* mask, int64_t n, Prefetch pf) { group_q4k(G, K / 256, X, C + n, mask, pf); });
        return true;
      }
      static constexpr TileK q4k[8] = {tile_q4k<1>, tile_q4k<2>, tile_q4k<3>, tile_q4k<4>,
                                       tile_q4k<5>, tile_q4k<6>, tile_q4k<7>, tile_q4k<8>};
      gemm_k(q4k, kQ4kBytes, P, K, X, xrb, T, C, ldc, n0, n1);
      return true;
    }
    case GgmlType::Q6_K: {
      static constexpr TileK q6k[4] = {tile_q6k<1>, tile_q6k<2>, tile_q6k<3>, tile_q6k<4>};
      gemm_k(q6k, kQ6kBytes, P, K, X, xrb, T, C, ldc, n0, n1);
      return true;
    }
    default: return false;
  }
}

}  // namespace ggflow::cpu::detail
