// AVX2 + FMA + F16C matmul: the scalar twin's arithmetic (matmul.h), bit for bit.
//
// The AVX-512 file's layout at half width: 8 weight rows at a time, one f32 lane per row; Z_j
// (j = 0..3) holds 16 weight bytes of rows j and 4+j in its two 128-bit lanes. Integer dot
// products use maddubs (u8 x s8 -> saturating i16 pairs) + madd (-> i32). They never saturate:
// unsigned weight bytes are <= 63 and activations in [-127, 127], so |pair| <= 2*63*127, and two
// pairs of 5-bit weights summed in i16 stay <= 4*31*127; signed Q8_0 weights go through the sign
// trick maddubs(|w|, sign(a, w)) with |w| <= 128 (|pair| <= 2*128*127 = 32512). Exact integers,
// then the twin's f32 sequence with lanes over rows.
#include <immintrin.h>

#include <climits>
#include <cstring>

#include "cpu/kernels/matmul.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;

constexpr int kTT = 8;  // tokens per tile

inline __m256i srl16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
inline __m256i sll16(__m256i v, int n) { return _mm256_sll_epi16(v, _mm_cvtsi32_si128(n)); }
inline __m256i srl32(__m256i v, int n) { return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n)); }
inline __m256i sll32(__m256i v, int n) { return _mm256_sll_epi32(v, _mm_cvtsi32_si128(n)); }
inline __m256i sra32(__m256i v, int n) { return _mm256_sra_epi32(v, _mm_cvtsi32_si128(n)); }

inline __m256i bits_to(__m256i v, int b, int p, int width) {
  const __m256i s = b >= p ? srl16(v, b - p) : sll16(v, p - b);
  return _mm256_and_si256(s, _mm256_set1_epi8(static_cast<char>(((1 << width) - 1) << p)));
}

struct Rows8 {
  const uint8_t* r[8];
  __m256i gidx;
  __m256i mask;  // store mask (all-ones lanes for real rows)
  // Software prefetch of the next row group (its rows are contiguous), spread over this group's
  // block loop: `per` cache lines per block, while pf < pf_end.
  mutable const uint8_t* pf;
  const uint8_t* pf_end;
  int per;
  void prefetch_step() const {
    for (int i = 0; i < per && pf < pf_end; ++i, pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
  }
};

inline void make_rows(const uint8_t* W, size_t wrb, int64_t n, int cnt, Rows8& R) {
  alignas(32) int32_t idx[8], m[8];
  for (int i = 0; i < 8; ++i) {
    const int ri = i < cnt ? i : cnt - 1;
    R.r[i] = W + (n + ri) * wrb;
    idx[i] = static_cast<int32_t>(ri * wrb);
    m[i] = i < cnt ? -1 : 0;
  }
  R.gidx = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  R.mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
}

inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m128i ld128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

inline __m256i load2(const Rows8& R, int j, size_t off) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(ld128(R.r[j] + off)), ld128(R.r[4 + j] + off), 1);
}

// v[k] (k = 0..3): the dword at off + 4k of each of the 8 rows, in row order (an 8x4 transpose of
// the rows' 16-byte chunks; cheaper than four gathers).
inline void dwords4(const Rows8& R, size_t off, __m256i* v) {
  const __m256i z0 = load2(R, 0, off), z1 = load2(R, 1, off), z2 = load2(R, 2, off), z3 = load2(R, 3, off);
  const __m256i t0 = _mm256_unpacklo_epi32(z0, z1), t1 = _mm256_unpackhi_epi32(z0, z1);
  const __m256i t2 = _mm256_unpacklo_epi32(z2, z3), t3 = _mm256_unpackhi_epi32(z2, z3);
  v[0] = _mm256_unpacklo_epi64(t0, t2);
  v[1] = _mm256_unpackhi_epi64(t0, t2);
  v[2] = _mm256_unpacklo_epi64(t1, t3);
  v[3] = _mm256_unpackhi_epi64(t1, t3);
}

// Dword k (0..3) of the 16 bytes at off of each of the 8 rows, in row order, where those 16 bytes
// lie inside the row (unpacks of four paired 16-byte loads: a vpgatherdd costs more on AMD cores).
template <int k>
inline __m256i dword_rows(const Rows8& R, size_t off) {
  const __m256i z0 = load2(R, 0, off), z1 = load2(R, 1, off), z2 = load2(R, 2, off), z3 = load2(R, 3, off);
  const __m256i t0 = k < 2 ? _mm256_unpacklo_epi32(z0, z1) : _mm256_unpackhi_epi32(z0, z1);
  const __m256i t1 = k < 2 ? _mm256_unpacklo_epi32(z2, z3) : _mm256_unpackhi_epi32(z2, z3);
  return k % 2 == 0 ? _mm256_unpacklo_epi64(t0, t1) : _mm256_unpackhi_epi64(t0, t1);
}

inline __m256i gather(const Rows8& R, size_t off) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(R.r[0] + off), R.gidx, 1);
}
inline __m256 half_of(__m256i g) {  // f16 in the low 16 bits of each dword
  const __m256i m = _mm256_and_si256(g, _mm256_set1_epi32(0xFFFF));
  const __m256i p = _mm256_packus_epi32(m, m);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
}
inline __m256 half_lo(__m256i g) { return half_of(g); }
inline __m256 half_hi(__m256i g) { return half_of(_mm256_srli_epi32(g, 16)); }

inline __m256i reduce4(__m256i z0, __m256i z1, __m256i z2, __m256i z3) {
  const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(z0, z1), _mm256_unpackhi_epi32(z0, z1));
  const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(z2, z3), _mm256_unpackhi_epi32(z2, z3));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
}

inline __m256i offset_init(int32_t v) { return _mm256_setr_epi32(v, 0, 0, 0, v, 0, 0, 0); }

inline __m256i ones16() { return _mm256_set1_epi16(1); }

template <class F>
inline void for_row_groups(const uint8_t* W, size_t wrb, int64_t n0, int64_t n1, int64_t nsteps, F&& f) {
  Rows8 R;
  for (int64_t n = n0; n < n1; n += 8) {
    const int cnt = static_cast<int>(n1 - n < 8 ? n1 - n : 8);
    make_rows(W, wrb, n, cnt, R);
    const int64_t next_end = n + 16 < n1 ? n + 16 : n1;
    R.pf = W + (n + cnt) * wrb;
    R.pf_end = next_end > n + cnt ? W + next_end * wrb : R.pf;
    const int64_t lines = (R.pf_end - R.pf + 63) / 64;
    R.per = static_cast<int>((lines + nsteps - 1) / nsteps);
    f(R, n);
  }
}

// ================================ 32-blocks ================================
struct TQ4_0 { static constexpr int bs = 18, qs = 2, qh = -1, zp = 8;  static constexpr bool min = false, q8 = false; };
struct TQ4_1 { static constexpr int bs = 20, qs = 4, qh = -1, zp = 0;  static constexpr bool min = true,  q8 = false; };
struct TQ5_0 { static constexpr int bs = 22, qs = 6, qh = 2,  zp = 16; static constexpr bool min = false, q8 = false; };
struct TQ5_1 { static constexpr int bs = 24, qs = 8, qh = 4,  zp = 0;  static constexpr bool min = true,  q8 = false; };
struct TQ8_0 { static constexpr int bs = 34, qs = 2, qh = -1, zp = 0;  static constexpr bool min = false, q8 = true; };

// Block b's codes of the 8 rows in Z layout: wl (elements 0..15), wh (16..31); unsigned bytes,
// Q8_0's raw signed ones.
template <class Tr>
inline void decode_q32(const Rows8& R, size_t off, __m256i* wl, __m256i* wh) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if constexpr (Tr::q8) {
    for (int j = 0; j < 4; ++j) {
      wl[j] = load2(R, j, off + Tr::qs);
      wh[j] = load2(R, j, off + Tr::qs + 16);
    }
  } else {
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = load2(R, j, off + Tr::qs);
      wl[j] = _mm256_and_si256(raw, m4);
      wh[j] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    }
  }
  if constexpr (Tr::qh >= 0) {
    const __m256i QH = dword_rows<0>(R, off + Tr::qh);  // Q5_0 / Q5_1: 16 bytes from qh fit the block
    const __m256i sel_lo = _mm256_setr_epi32(0, 0, 0x01010101, 0x01010101, 0, 0, 0x01010101, 0x01010101);
    const __m256i sel_hi = _mm256_setr_epi32(0x02020202, 0x02020202, 0x03030303, 0x03030303, 0x02020202,
                                             0x02020202, 0x03030303, 0x03030303);
    const __m256i bitsel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    const __m256i c16 = _mm256_set1_epi8(16);
    for (int j = 0; j < 4; ++j) {
      const __m256i H = _mm256_permutevar8x32_epi32(QH, _mm256_setr_epi32(j, j, j, j, 4 + j, 4 + j, 4 + j, 4 + j));
      const __m256i blo = _mm256_and_si256(_mm256_shuffle_epi8(H, sel_lo), bitsel);
      const __m256i bhi = _mm256_and_si256(_mm256_shuffle_epi8(H, sel_hi), bitsel);
      wl[j] = _mm256_or_si256(wl[j], _mm256_and_si256(_mm256_cmpeq_epi8(blo, bitsel), c16));
      wh[j] = _mm256_or_si256(wh[j], _mm256_and_si256(_mm256_cmpeq_epi8(bhi, bitsel), c16));
    }
  }
}

template <class Tr, int TT>
void q32_tile(const Rows8& R, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc) {
  static_assert(!Tr::min, "Q4_1 / Q5_1: q32_lane_tile");
  __m256 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * Tr::bs;
    R.prefetch_step();
    __m256i wl[4], wh[4];  // Q8_0: the raw signed bytes
    decode_q32<Tr>(R, off, wl, wh);
    __m256i al8[4], ah8[4];  // Q8_0: |w|
    if constexpr (Tr::q8)
      for (int j = 0; j < 4; ++j) {
        al8[j] = _mm256_abs_epi8(wl[j]);
        ah8[j] = _mm256_abs_epi8(wh[j]);
      }
    const __m256i G = dword_rows<0>(R, off);
    const __m256 DW = half_lo(G);
    for (int t = 0; t < TT; ++t) {
      const uint8_t* a = X + t * xrb + b * sizeof(BlockQA32);
      float da;
      int32_t sum;
      std::memcpy(&da, a, 4);
      std::memcpy(&sum, a + 8, 4);
      const __m128i xl = ld128(a + 16), xh = ld128(a + 32);
      const __m256i al = _mm256_set_m128i(xl, xl), ah = _mm256_set_m128i(xh, xh);
      __m256i z[4];
      if constexpr (Tr::q8) {
        for (int j = 0; j < 4; ++j) {
          const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(al8[j], _mm256_sign_epi8(al, wl[j])), ones16());
          const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(ah8[j], _mm256_sign_epi8(ah, wh[j])), ones16());
          z[j] = _mm256_add_epi32(pl, ph);
        }
      } else {
        const __m256i init = Tr::zp ? offset_init(-Tr::zp * sum) : _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
          const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(wl[j], al), _mm256_maddubs_epi16(wh[j], ah));
          z[j] = _mm256_add_epi32(init, _mm256_madd_epi16(p16, ones16()));
        }
      }
      const __m256i isum = reduce4(z[0], z[1], z[2], z[3]);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(DW, _mm256_set1_ps(da)), _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < TT; ++t) _mm256_maskstore_ps(C + t * ldc, R.mask, acc[t]);
}

// Q4_1 / Q5_1 in llama.cpp's order (matmul.h): 8 lane chains and the min chain per output. In Z
// layout dword k of 128-bit lane i of Z_j . (activation bytes 0..15) is lane k of row j+4i, of
// Z_j . (bytes 16..31) lane 4+k: one token's 8 accumulators in that layout (lo[j], hi[j]), each
// row's scale copied to its lane's 4 dwords, and the min accumulator in row order.

// The 8 rows' results from one token's lane accumulators: the twin's sum of the 8 lanes, then the
// min chain.
inline __m256 lane_rows(const __m256* lo, const __m256* hi, __m256 ms) {
  __m256 v[4];  // dword 0 of lane i: row j+4i's lane sum
  for (int j = 0; j < 4; ++j) {
    const __m256 r = _mm256_add_ps(hi[j], lo[j]);                    // r_k = l_{4+k} + l_k
    const __m256 u = _mm256_add_ps(r, _mm256_permute_ps(r, 0x4E));   // u_0 = r_0 + r_2, u_1 = r_1 + r_3
    v[j] = _mm256_add_ps(u, _mm256_permute_ps(u, 0xB1));             // v_0 = u_0 + u_1
  }
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpacklo_ps(v[2], v[3]);
  const __m256 rows = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t1)));
  return _mm256_add_ps(rows, ms);
}

inline __m256 row_pair_scale(__m256 DW, int j) {  // row j's scale in lanes 0..3, row 4+j's in 4..7
  return _mm256_permutevar8x32_ps(DW, _mm256_setr_epi32(j, j, j, j, 4 + j, 4 + j, 4 + j, 4 + j));
}

// One token (decode): the 8 lane accumulators stay in registers (the 16 registers hold no more).
template <class Tr>
void q32_lane_tile(const Rows8& R, int64_t nb, const uint8_t* x, float* c) {
  __m256 lo[4], hi[4], ms = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * Tr::bs;
    R.prefetch_step();
    __m256i wl[4], wh[4];
    decode_q32<Tr>(R, off, wl, wh);
    const __m256i G = dword_rows<0>(R, off);
    const uint8_t* a = x + b * sizeof(BlockQA32);
    const __m256 DA = _mm256_set1_ps(ldf(a));
    const __m256 DW = half_lo(G);
    ms = _mm256_fmadd_ps(half_hi(G), _mm256_set1_ps(ldf(a + 4)), ms);
    const __m128i xl = ld128(a + 16), xh = ld128(a + 32);
    const __m256i al = _mm256_set_m128i(xl, xl), ah = _mm256_set_m128i(xh, xh);
    for (int j = 0; j < 4; ++j) {
      const __m256 dd = _mm256_mul_ps(row_pair_scale(DW, j), DA);
      const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(wl[j], al), ones16());
      const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(wh[j], ah), ones16());
      lo[j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(pl), lo[j]);
      hi[j] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(ph), hi[j]);
    }
  }
  _mm256_maskstore_ps(c, R.mask, lane_rows(lo, hi, ms));
}

// Up to kTT tokens (prompts, batches): the block is decoded once for all of them and each token's
// 9 accumulators live in L1 (a load and a store around each FMA cost less than decoding the
// weights again per token: one thread, Q4_1 1536 x 576 at 64 tokens, 18.6 -> ~40 GMAC/s).
// Every chain takes the same FMAs in the same order as in q32_lane_tile.
template <class Tr>
void q32_lane_tiles(const Rows8& R, int64_t nb, const uint8_t* X, size_t xrb, int tt, float* C, int64_t ldc) {
  alignas(32) float acc[kTT][9][8];  // per token: lo[0..3], hi[0..3], min chain
  std::memset(acc, 0, sizeof acc);
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * Tr::bs;
    R.prefetch_step();
    __m256i wl[4], wh[4];
    decode_q32<Tr>(R, off, wl, wh);
    const __m256i G = dword_rows<0>(R, off);
    const __m256 DW = half_lo(G), MW = half_hi(G);
    alignas(32) float dwj[4][8];
    for (int j = 0; j < 4; ++j) _mm256_store_ps(dwj[j], row_pair_scale(DW, j));
    for (int t = 0; t < tt; ++t) {
      const uint8_t* a = X + t * xrb + b * sizeof(BlockQA32);
      float(*ac)[8] = acc[t];
      const __m256 DA = _mm256_set1_ps(ldf(a));
      _mm256_store_ps(ac[8], _mm256_fmadd_ps(MW, _mm256_set1_ps(ldf(a + 4)), _mm256_load_ps(ac[8])));
      const __m256i al = _mm256_broadcastsi128_si256(ld128(a + 16)), ah = _mm256_broadcastsi128_si256(ld128(a + 32));
      for (int j = 0; j < 4; ++j) {
        const __m256 dd = _mm256_mul_ps(_mm256_load_ps(dwj[j]), DA);
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(wl[j], al), ones16());
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(wh[j], ah), ones16());
        _mm256_store_ps(ac[j], _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(pl), _mm256_load_ps(ac[j])));
        _mm256_store_ps(ac[4 + j], _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(ph), _mm256_load_ps(ac[4 + j])));
      }
    }
  }
  for (int t = 0; t < tt; ++t) {
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
      lo[j] = _mm256_load_ps(acc[t][j]);
      hi[j] = _mm256_load_ps(acc[t][4 + j]);
    }
    _mm256_maskstore_ps(C + t * ldc, R.mask, lane_rows(lo, hi, _mm256_load_ps(acc[t][8])));
  }
}

template <class Tr>
void gemm_q32(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
              int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 32;
  for_row_groups(W, wrb, n0, n1, nb, [&](const Rows8& R, int64_t n) {
    if constexpr (Tr::min) {
      if (T == 1) return q32_lane_tile<Tr>(R, nb, X, C + n);
      for (int64_t t0 = 0; t0 < T; t0 += kTT)
        q32_lane_tiles<Tr>(R, nb, X + t0 * xrb, xrb, static_cast<int>(T - t0 < kTT ? T - t0 : kTT), C + t0 * ldc + n, ldc);
    } else {
      for (int64_t t0 = 0; t0 < T; t0 += kTT) {
        const uint8_t* x = X + t0 * xrb;
        float* c = C + t0 * ldc + n;
        switch (T - t0 < kTT ? T - t0 : kTT) {
          case 1: q32_tile<Tr, 1>(R, nb, x, xrb, c, ldc); break;
          case 2: q32_tile<Tr, 2>(R, nb, x, xrb, c, ldc); break;
          case 3: q32_tile<Tr, 3>(R, nb, x, xrb, c, ldc); break;
          case 4: q32_tile<Tr, 4>(R, nb, x, xrb, c, ldc); break;
          case 5: q32_tile<Tr, 5>(R, nb, x, xrb, c, ldc); break;
          case 6: q32_tile<Tr, 6>(R, nb, x, xrb, c, ldc); break;
          case 7: q32_tile<Tr, 7>(R, nb, x, xrb, c, ldc); break;
          default: q32_tile<Tr, 8>(R, nb, x, xrb, c, ldc); break;
        }
      }
    }
  });
}

// ================================ 256-super-blocks ================================
struct KBuf {
  __m256i w[16][4];
  __m256i sc[16];
  __m256i mp[8];
  __m256 d, dmin;
};

inline __m256i byte_of(const __m256i* S, int i) {
  return _mm256_and_si256(srl32(S[i / 4], 8 * (i % 4)), _mm256_set1_epi32(0xFF));
}

void dec_q2_k(const Rows8& R, size_t off, KBuf& B) {
  const __m256i G = gather(R, off + 80);
  B.d = half_lo(G);
  B.dmin = half_hi(G);
  __m256i S[4], m[16];
  dwords4(R, off, S);
  for (int s = 0; s < 16; ++s) {
    const __m256i by = byte_of(S, s);
    B.sc[s] = _mm256_and_si256(by, _mm256_set1_epi32(15));
    m[s] = srl32(by, 4);
  }
  for (int i = 0; i < 8; ++i) B.mp[i] = _mm256_or_si256(m[2 * i], sll32(m[2 * i + 1], 16));
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int g = 0; g < 2; ++g)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j) {
        const __m256i raw = load2(R, j, off + 16 + 32 * g + 16 * h);
        for (int jj = 0; jj < 4; ++jj) B.w[8 * g + 2 * jj + h][j] = _mm256_and_si256(srl16(raw, 2 * jj), m3);
      }
}

void dec_q3_k(const Rows8& R, size_t off, KBuf& B) {
  B.d = half_hi(gather(R, off + 106));
  __m256i S[3];
  for (int i = 0; i < 3; ++i) S[i] = gather(R, off + 96 + 4 * i);
  const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
  for (int k = 0; k < 16; ++k) {
    const __m256i lo =
        k < 8 ? _mm256_and_si256(byte_of(S, k), m15) : _mm256_and_si256(srl32(byte_of(S, k - 8), 4), m15);
    const __m256i hi = _mm256_and_si256(srl32(byte_of(S, 8 + k % 4), 2 * (k / 4)), m3);
    B.sc[k] = _mm256_sub_epi32(_mm256_or_si256(lo, sll32(hi, 4)), _mm256_set1_epi32(32));
  }
  const __m256i m3b = _mm256_set1_epi8(3);
  for (int g = 0; g < 2; ++g)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j) {
        const __m256i raw = load2(R, j, off + 32 + 32 * g + 16 * h);
        const __m256i hm = load2(R, j, off + 16 * h);
        for (int jj = 0; jj < 4; ++jj)
          B.w[8 * g + 2 * jj + h][j] =
              _mm256_or_si256(_mm256_and_si256(srl16(raw, 2 * jj), m3b), bits_to(hm, 4 * g + jj, 2, 1));
      }
}

inline void scales_k4(const Rows8& R, size_t off, KBuf& B) {
  __m256i H[4];  // d|dmin, scale bytes 0..3, 4..7, 8..11
  dwords4(R, off, H);
  const __m256i S0 = H[1], S1 = H[2], S2 = H[3];
  const __m256i m63 = _mm256_set1_epi32(63), m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
  for (int j = 0; j < 8; ++j) {
    __m256i sc, m;
    if (j < 4) {
      sc = _mm256_and_si256(srl32(S0, 8 * j), m63);
      m = _mm256_and_si256(srl32(S1, 8 * j), m63);
    } else {
      const int k = j - 4;
      sc = _mm256_or_si256(_mm256_and_si256(srl32(S2, 8 * k), m15),
                           sll32(_mm256_and_si256(srl32(S0, 8 * k + 6), m3), 4));
      m = _mm256_or_si256(_mm256_and_si256(srl32(S2, 8 * k + 4), m15),
                          sll32(_mm256_and_si256(srl32(S1, 8 * k + 6), m3), 4));
    }
    B.sc[j] = sc;
    B.mp[j] = _mm256_or_si256(m, sll32(m, 16));
  }
  B.d = half_lo(H[0]);
  B.dmin = half_hi(H[0]);
}

void dec_q4_k(const Rows8& R, size_t off, KBuf& B) {
  scales_k4(R, off, B);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int g = 0; g < 4; ++g)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j) {
        const __m256i raw = load2(R, j, off + 16 + 32 * g + 16 * h);
        B.w[4 * g + h][j] = _mm256_and_si256(raw, m4);
        B.w[4 * g + 2 + h][j] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      }
}

void dec_q5_k(const Rows8& R, size_t off, KBuf& B) {
  scales_k4(R, off, B);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j) {
      const __m256i qh = load2(R, j, off + 16 + 16 * h);
      for (int g = 0; g < 4; ++g) {
        const __m256i raw = load2(R, j, off + 48 + 32 * g + 16 * h);
        B.w[4 * g + h][j] = _mm256_or_si256(_mm256_and_si256(raw, m4), bits_to(qh, 2 * g, 4, 1));
        B.w[4 * g + 2 + h][j] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), bits_to(qh, 2 * g + 1, 4, 1));
      }
    }
}

void dec_q6_k(const Rows8& R, size_t off, KBuf& B) {
  B.d = half_hi(dword_rows<3>(R, off + 194));  // the dword at 206 (d at 208)
  __m256i S[4];
  dwords4(R, off + 192, S);
  for (int s = 0; s < 16; ++s) B.sc[s] = sra32(sll32(S[s / 4], 24 - 8 * (s % 4)), 24);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int g = 0; g < 2; ++g)
    for (int j = 0; j < 4; ++j) {
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = load2(R, j, off + 64 * g + 16 * c);
        B.w[8 * g + c][j] = _mm256_and_si256(raw, m4);
        B.w[8 * g + c + 4][j] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i qh = load2(R, j, off + 128 + 32 * g + 16 * h);
        for (int k = 0; k < 4; ++k) {
          __m256i& w = B.w[8 * g + 2 * k + h][j];
          w = _mm256_or_si256(w, bits_to(qh, 2 * k, 4, 2));
        }
      }
    }
}

template <int kSegs, int kOff, bool kMin>
inline __m256 k_token(const KBuf& B, const uint8_t* a, __m256 acc) {
  float da;
  int16_t bs[16];
  std::memcpy(&da, a + offsetof(BlockQA256, d), 4);
  std::memcpy(bs, a + offsetof(BlockQA256, bsums), sizeof bs);
  const uint8_t* q = a + offsetof(BlockQA256, q);
  __m256i isum = _mm256_setzero_si256();
  for (int sg = 0; sg < 16 / kSegs; ++sg) {
    static_assert(kOff == 0 || kSegs == 1);
    const __m256i init = kOff ? offset_init(-kOff * bs[sg]) : _mm256_setzero_si256();
    __m256i z[4];
    if constexpr (kSegs == 2) {
      const __m128i x0 = ld128(q + 32 * sg), x1 = ld128(q + 32 * sg + 16);
      const __m256i a0 = _mm256_set_m128i(x0, x0), a1 = _mm256_set_m128i(x1, x1);
      for (int j = 0; j < 4; ++j) {
        const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(B.w[2 * sg][j], a0),
                                             _mm256_maddubs_epi16(B.w[2 * sg + 1][j], a1));
        z[j] = _mm256_add_epi32(init, _mm256_madd_epi16(p16, ones16()));
      }
    } else {
      const __m128i x0 = ld128(q + 16 * sg);
      const __m256i a0 = _mm256_set_m128i(x0, x0);
      for (int j = 0; j < 4; ++j)
        z[j] = _mm256_add_epi32(init, _mm256_madd_epi16(_mm256_maddubs_epi16(B.w[sg][j], a0), ones16()));
    }
    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(reduce4(z[0], z[1], z[2], z[3]), B.sc[sg]));
  }
  const __m256 DA = _mm256_set1_ps(da);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(B.d, DA), _mm256_cvtepi32_ps(isum), acc);
  if constexpr (kMin) {
    __m256i msum = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i) {
      int32_t pair;
      std::memcpy(&pair, bs + 2 * i, 4);
      msum = _mm256_add_epi32(msum, _mm256_madd_epi16(B.mp[i], _mm256_set1_epi32(pair)));
    }
    acc = _mm256_fnmadd_ps(_mm256_mul_ps(B.dmin, DA), _mm256_cvtepi32_ps(msum), acc);
  }
  return acc;
}

template <void (*Dec)(const Rows8&, size_t, KBuf&), int kSegs, int kOff, bool kMin>
void gemm_k(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
            int64_t n0, int64_t n1, size_t bsize) {
  const int64_t nb = K / 256;
  for_row_groups(W, wrb, n0, n1, nb, [&](const Rows8& R, int64_t n) {
    KBuf B;
    for (int64_t t0 = 0; t0 < T; t0 += kTT) {
      const int tt = static_cast<int>(T - t0 < kTT ? T - t0 : kTT);
      __m256 acc[kTT];
      for (int t = 0; t < kTT; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        R.prefetch_step();
        Dec(R, b * bsize, B);
        for (int t = 0; t < tt; ++t)
          acc[t] = k_token<kSegs, kOff, kMin>(B, X + (t0 + t) * xrb + b * sizeof(BlockQA256), acc[t]);
      }
      for (int t = 0; t < tt; ++t) _mm256_maskstore_ps(C + (t0 + t) * ldc + n, R.mask, acc[t]);
    }
  });
}

// ================================ F32 / F16 / BF16 ================================
template <GgmlType kT>
inline __m256 loadw8(const uint8_t* p) {
  if constexpr (kT == GgmlType::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (kT == GgmlType::F16) return _mm256_cvtph_ps(ld128(p));
  if constexpr (kT == GgmlType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(ld128(p)), 16));
}

template <GgmlType kT>
inline float loadw1(const uint8_t* p) {
  if constexpr (kT == GgmlType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    if constexpr (kT == GgmlType::F16) return _cvtsh_ss(h);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
}

inline void transpose8(const __m256* r, float (*out)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int q = 0; q < 2; ++q) {
    u[4 * q + 0] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
    u[4 * q + 1] = _mm256_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
    u[4 * q + 2] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
    u[4 * q + 3] = _mm256_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_store_ps(out[c], _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    _mm256_store_ps(out[4 + c], _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
  }
}

template <GgmlType kT>
void gemm_f(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
            int64_t n0, int64_t n1) {
  constexpr int eb = kT == GgmlType::F32 ? 4 : 2;
  for_row_groups(W, wrb, n0, n1, (K + 7) / 8, [&](const Rows8& R, int64_t n) {
    alignas(32) float tb[8][8];
    for (int64_t t0 = 0; t0 < T; t0 += kTT) {
      const int tt = static_cast<int>(T - t0 < kTT ? T - t0 : kTT);
      __m256 acc[kTT];
      for (int t = 0; t < kTT; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t k0 = 0; k0 < K; k0 += 8) {
        const int kc = static_cast<int>(K - k0 < 8 ? K - k0 : 8);
        R.prefetch_step();
        if (kc == 8) {
          __m256 r[8];
          for (int i = 0; i < 8; ++i) r[i] = loadw8<kT>(R.r[i] + k0 * eb);
          transpose8(r, tb);
        } else {
          for (int kk = 0; kk < kc; ++kk)
            for (int i = 0; i < 8; ++i) tb[kk][i] = loadw1<kT>(R.r[i] + (k0 + kk) * eb);
        }
        for (int t = 0; t < tt; ++t) {
          const uint8_t* x = X + (t0 + t) * xrb + k0 * 4;
          __m256 a = acc[t];
          for (int kk = 0; kk < kc; ++kk) a = _mm256_fmadd_ps(_mm256_load_ps(tb[kk]), _mm256_set1_ps(ldf(x + 4 * kk)), a);
          acc[t] = a;
        }
      }
      for (int t = 0; t < tt; ++t) _mm256_maskstore_ps(C + (t0 + t) * ldc + n, R.mask, acc[t]);
    }
  });
}

}  // namespace

void matmul_avx2(GgmlType wtype, const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T,
                 float* C, int64_t ldc, int64_t n0, int64_t n1) {
  if (wrb > static_cast<size_t>(INT32_MAX / 8)) return matmul_scalar(wtype, W, wrb, K, X, xrb, T, C, ldc, n0, n1);
  // (Block sizes written out: no inline function from another header is instantiated in this
  // file, whose code is compiled for this ISA only.)
  switch (wtype) {
    case GgmlType::F32: return gemm_f<GgmlType::F32>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::F16: return gemm_f<GgmlType::F16>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::BF16: return gemm_f<GgmlType::BF16>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q4_0: return gemm_q32<TQ4_0>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q4_1: return gemm_q32<TQ4_1>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q5_0: return gemm_q32<TQ5_0>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q5_1: return gemm_q32<TQ5_1>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q8_0: return gemm_q32<TQ8_0>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q2_K: return gemm_k<dec_q2_k, 1, 0, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, 84);
    case GgmlType::Q3_K: return gemm_k<dec_q3_k, 1, 4, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, 110);
    case GgmlType::Q4_K: return gemm_k<dec_q4_k, 2, 0, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, 144);
    case GgmlType::Q5_K: return gemm_k<dec_q5_k, 2, 0, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, 176);
    case GgmlType::Q6_K: return gemm_k<dec_q6_k, 1, 32, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, 210);
    default: return matmul_scalar(wtype, W, wrb, K, X, xrb, T, C, ldc, n0, n1);
  }
}

}  // namespace ggflow::cpu::detail
