// AVX-512 (F/BW/VL/DQ + VNNI) matmul: the scalar twin's arithmetic (matmul.h), bit for bit.
//
// Layout: 16 weight rows at a time, one f32 lane per row. A quantized block's integer dot products
// are computed with vpdpbusd in "Z" vectors: Z_j (j = 0..3) holds 16 weight bytes of the rows
// 4i+j in its 128-bit lane i, against the same 16 activation bytes broadcast to every lane; each
// lane ends with 4 partial dwords of one row, and reduce4 adds them so that row r lands in dword r.
// Offsets (q - 8, q - 16, q - 32, ...) enter as an exact integer -offset*sum(qa) put into dword 0
// of each lane before the dot products. Signed Q8_0 weights become unsigned by xor 0x80 (+128,
// offset -128*sum(qa)). Integer sums are exact, so these orders do not matter; the f32 part is the
// twin's sequence, with the lanes over rows. Rows past the range repeat the last row and are masked
// off at the store.
// GCC 12 warns about the undefined-source operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <climits>
#include <cstring>

#include "cpu/kernels/matmul.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;

constexpr int kTT = 8;  // tokens per tile

inline __m512i srl16(__m512i v, int n) { return _mm512_srl_epi16(v, _mm_cvtsi32_si128(n)); }
inline __m512i sll16(__m512i v, int n) { return _mm512_sll_epi16(v, _mm_cvtsi32_si128(n)); }
inline __m512i srl32(__m512i v, int n) { return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n)); }
inline __m512i sll32(__m512i v, int n) { return _mm512_sll_epi32(v, _mm_cvtsi32_si128(n)); }
inline __m512i sra32(__m512i v, int n) { return _mm512_sra_epi32(v, _mm_cvtsi32_si128(n)); }

// The `width` bits starting at bit b of every byte, moved to bit p (same byte), others cleared.
inline __m512i bits_to(__m512i v, int b, int p, int width) {
  const __m512i s = b >= p ? srl16(v, b - p) : sll16(v, p - b);
  return _mm512_and_si512(s, _mm512_set1_epi8(static_cast<char>(((1 << width) - 1) << p)));
}

struct Rows16 {
  const uint8_t* r[16];
  __m512i gidx;  // byte offset of row r from r[0]
  __mmask16 mask;
  // Software prefetch of the next row group (its rows are contiguous), spread over this group's
  // block loop: `per` cache lines per block, while pf < pf_end.
  mutable const uint8_t* pf;
  const uint8_t* pf_end;
  int per;
  void prefetch_step() const {
    for (int i = 0; i < per && pf < pf_end; ++i, pf += 64) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
  }
};

inline void make_rows(const uint8_t* W, size_t wrb, int64_t n, int cnt, Rows16& R) {
  alignas(64) int32_t idx[16];
  for (int i = 0; i < 16; ++i) {
    const int ri = i < cnt ? i : cnt - 1;
    R.r[i] = W + (n + ri) * wrb;
    idx[i] = static_cast<int32_t>(ri * wrb);
  }
  R.gidx = _mm512_load_si512(idx);
  R.mask = static_cast<__mmask16>((1u << cnt) - 1);
}

inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m128i ld128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Z_j: 16 bytes at offset off of rows j, 4+j, 8+j, 12+j in lanes 0..3.
inline __m512i load4(const Rows16& R, int j, size_t off) {
  __m512i v = _mm512_castsi128_si512(ld128(R.r[j] + off));
  v = _mm512_inserti32x4(v, ld128(R.r[4 + j] + off), 1);
  v = _mm512_inserti32x4(v, ld128(R.r[8 + j] + off), 2);
  v = _mm512_inserti32x4(v, ld128(R.r[12 + j] + off), 3);
  return v;
}

// c[k] (k = 0..3): the Z_j vector of the 16-byte chunk at off + 16k, from one 64-byte load per
// row and a 4x4 transpose of 128-bit lanes (cheaper than four load4 calls).
inline void load4x4(const Rows16& R, int j, size_t off, __m512i* c) {
  const __m512i r0 = _mm512_loadu_si512(R.r[j] + off), r1 = _mm512_loadu_si512(R.r[4 + j] + off);
  const __m512i r2 = _mm512_loadu_si512(R.r[8 + j] + off), r3 = _mm512_loadu_si512(R.r[12 + j] + off);
  const __m512i a = _mm512_shuffle_i32x4(r0, r1, 0x44), b = _mm512_shuffle_i32x4(r0, r1, 0xEE);
  const __m512i e = _mm512_shuffle_i32x4(r2, r3, 0x44), f = _mm512_shuffle_i32x4(r2, r3, 0xEE);
  c[0] = _mm512_shuffle_i32x4(a, e, 0x88);
  c[1] = _mm512_shuffle_i32x4(a, e, 0xDD);
  c[2] = _mm512_shuffle_i32x4(b, f, 0x88);
  c[3] = _mm512_shuffle_i32x4(b, f, 0xDD);
}

// v[k] (k = 0..3): the dword at off + 4k of each of the 16 rows, in row order (a 16x4 transpose
// of the rows' 16-byte chunks; cheaper than four gathers).
inline void dwords4(const Rows16& R, size_t off, __m512i* v) {
  const __m512i z0 = load4(R, 0, off), z1 = load4(R, 1, off), z2 = load4(R, 2, off), z3 = load4(R, 3, off);
  const __m512i t0 = _mm512_unpacklo_epi32(z0, z1), t1 = _mm512_unpackhi_epi32(z0, z1);
  const __m512i t2 = _mm512_unpacklo_epi32(z2, z3), t3 = _mm512_unpackhi_epi32(z2, z3);
  v[0] = _mm512_unpacklo_epi64(t0, t2);
  v[1] = _mm512_unpackhi_epi64(t0, t2);
  v[2] = _mm512_unpacklo_epi64(t1, t3);
  v[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The dword at offset off of each of the 16 rows (row order).
inline __m512i gather(const Rows16& R, size_t off) { return _mm512_i32gather_epi32(R.gidx, R.r[0] + off, 1); }
inline __m512 half_lo(__m512i g) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)); }
inline __m512 half_hi(__m512i g) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))); }

// Lane i of z_j holds 4 partials of row 4i+j -> dword r = the sum for row r.
inline __m512i reduce4(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
  const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
  const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

// -off * s in dword 0 of each 128-bit lane.
inline __m512i offset_init(int32_t v) { return _mm512_maskz_set1_epi32(0x1111, v); }

template <class F>
inline void for_row_groups(const uint8_t* W, size_t wrb, int64_t n0, int64_t n1, int64_t nsteps, F&& f) {
  Rows16 R;
  for (int64_t n = n0; n < n1; n += 16) {
    const int cnt = static_cast<int>(n1 - n < 16 ? n1 - n : 16);
    make_rows(W, wrb, n, cnt, R);
    const int64_t next_end = n + 32 < n1 ? n + 32 : n1;
    R.pf = W + (n + cnt) * wrb;
    R.pf_end = next_end > n + cnt ? W + next_end * wrb : R.pf;
    const int64_t lines = (R.pf_end - R.pf + 63) / 64;
    R.per = static_cast<int>((lines + nsteps - 1) / nsteps);
    f(R, n);
  }
}

// ================================ 32-blocks ================================
struct TQ4_0 { static constexpr int bs = 18, qs = 2, qh = -1, zp = 8;   static constexpr bool min = false, q8 = false; };
struct TQ4_1 { static constexpr int bs = 20, qs = 4, qh = -1, zp = 0;   static constexpr bool min = true,  q8 = false; };
struct TQ5_0 { static constexpr int bs = 22, qs = 6, qh = 2,  zp = 16;  static constexpr bool min = false, q8 = false; };
struct TQ5_1 { static constexpr int bs = 24, qs = 8, qh = 4,  zp = 0;   static constexpr bool min = true,  q8 = false; };
struct TQ8_0 { static constexpr int bs = 34, qs = 2, qh = -1, zp = 128; static constexpr bool min = false, q8 = true; };

// Block b's codes of the 16 rows as unsigned bytes in Z layout: wl (elements 0..15), wh (16..31).
template <class Tr>
inline void decode_q32(const Rows16& R, size_t off, __m512i* wl, __m512i* wh) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (Tr::q8) {
    const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 4; ++j) {
      wl[j] = _mm512_xor_si512(load4(R, j, off + Tr::qs), x80);
      wh[j] = _mm512_xor_si512(load4(R, j, off + Tr::qs + 16), x80);
    }
  } else {
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = load4(R, j, off + Tr::qs);
      wl[j] = _mm512_and_si512(raw, m4);
      wh[j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    }
  }
  if constexpr (Tr::qh >= 0) {
    const __m512i QH = gather(R, off + Tr::qh);
    // byte l of each lane: (l < 8 ? 0 : 1) for the low 16 elements, (l < 8 ? 2 : 3) for the high.
    const __m512i sel_lo = _mm512_set4_epi32(0x01010101, 0x01010101, 0x00000000, 0x00000000);
    const __m512i sel_hi = _mm512_set4_epi32(0x03030303, 0x03030303, 0x02020202, 0x02020202);
    const __m512i bitsel = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ULL));
    const __m512i c16 = _mm512_set1_epi8(16);
    for (int j = 0; j < 4; ++j) {
      const __m512i H = _mm512_permutexvar_epi32(
          _mm512_set_epi32(12 + j, 12 + j, 12 + j, 12 + j, 8 + j, 8 + j, 8 + j, 8 + j, 4 + j, 4 + j, 4 + j, 4 + j, j,
                           j, j, j),
          QH);
      const __mmask64 klo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(H, sel_lo), bitsel);
      const __mmask64 khi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(H, sel_hi), bitsel);
      wl[j] = _mm512_mask_add_epi8(wl[j], klo, wl[j], c16);
      wh[j] = _mm512_mask_add_epi8(wh[j], khi, wh[j], c16);
    }
  }
}

template <class Tr, int TT>
void q32_tile(const Rows16& R, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc) {
  static_assert(!Tr::min, "Q4_1 / Q5_1: q32_lane_tile");
  __m512 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * Tr::bs;
    R.prefetch_step();
    __m512i wl[4], wh[4];
    decode_q32<Tr>(R, off, wl, wh);
    const __m512i G = gather(R, off);
    const __m512 DW = half_lo(G);
    for (int t = 0; t < TT; ++t) {
      const uint8_t* a = X + t * xrb + b * sizeof(BlockQA32);
      float da;
      int32_t sum;
      std::memcpy(&da, a, 4);
      std::memcpy(&sum, a + 8, 4);
      const __m512i init = Tr::zp ? offset_init(-Tr::zp * sum) : _mm512_setzero_si512();
      const __m512i al = _mm512_broadcast_i32x4(ld128(a + 16)), ah = _mm512_broadcast_i32x4(ld128(a + 32));
      __m512i z[4];
      for (int j = 0; j < 4; ++j) z[j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, wl[j], al), wh[j], ah);
      const __m512i isum = reduce4(z[0], z[1], z[2], z[3]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(DW, _mm512_set1_ps(da)), _mm512_cvtepi32_ps(isum), acc[t]);
    }
  }
  for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(C + t * ldc, R.mask, acc[t]);
}

// Q4_1 / Q5_1 in llama.cpp's order (matmul.h): 8 lane chains and the min chain per output. In Z
// layout dword k of 128-bit lane i of Z_j . (activation bytes 0..15) is lane k of row 4i+j, of
// Z_j . (bytes 16..31) lane 4+k; so each token keeps 8 accumulators in that layout (lo[j], hi[j]),
// with each row's scale copied to its lane's 4 dwords, and one min accumulator in row order.
constexpr int kLaneTT = 2;

template <class Tr, int TT>
void q32_lane_tile(const Rows16& R, int64_t nb, const uint8_t* X, size_t xrb, float* C, int64_t ldc) {
  __m512 lo[TT][4], hi[TT][4], ms[TT];
  for (int t = 0; t < TT; ++t) {
    ms[t] = _mm512_setzero_ps();
    for (int j = 0; j < 4; ++j) lo[t][j] = hi[t][j] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const size_t off = static_cast<size_t>(b) * Tr::bs;
    R.prefetch_step();
    __m512i wl[4], wh[4];
    decode_q32<Tr>(R, off, wl, wh);
    const __m512i G = gather(R, off);
    const __m512 DW = half_lo(G), MW = half_hi(G);
    __m512 DWz[4];  // dword k of lane i: row 4i+j's d
    for (int j = 0; j < 4; ++j)
      DWz[j] = _mm512_permutexvar_ps(_mm512_set_epi32(12 + j, 12 + j, 12 + j, 12 + j, 8 + j, 8 + j, 8 + j, 8 + j,
                                                      4 + j, 4 + j, 4 + j, 4 + j, j, j, j, j),
                                     DW);
    for (int t = 0; t < TT; ++t) {
      const uint8_t* a = X + t * xrb + b * sizeof(BlockQA32);
      float da, sa;
      std::memcpy(&da, a, 4);
      std::memcpy(&sa, a + 4, 4);
      ms[t] = _mm512_fmadd_ps(MW, _mm512_set1_ps(sa), ms[t]);
      const __m512i al = _mm512_broadcast_i32x4(ld128(a + 16)), ah = _mm512_broadcast_i32x4(ld128(a + 32));
      for (int j = 0; j < 4; ++j) {
        const __m512 dd = _mm512_mul_ps(DWz[j], _mm512_set1_ps(da));
        const __m512i pl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wl[j], al);
        const __m512i ph = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wh[j], ah);
        lo[t][j] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(pl), lo[t][j]);
        hi[t][j] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(ph), hi[t][j]);
      }
    }
  }
  for (int t = 0; t < TT; ++t) {
    __m512 v[4];  // dword 0 of lane i: row 4i+j's lane sum
    for (int j = 0; j < 4; ++j) {
      const __m512 r = _mm512_add_ps(hi[t][j], lo[t][j]);     // r_k = l_{4+k} + l_k
      const __m512 u = _mm512_add_ps(r, _mm512_permute_ps(r, 0x4E));  // u_0 = r_0 + r_2, u_1 = r_1 + r_3
      v[j] = _mm512_add_ps(u, _mm512_permute_ps(u, 0xB1));            // v_0 = u_0 + u_1
    }
    const __m512 t0 = _mm512_unpacklo_ps(v[0], v[1]), t1 = _mm512_unpacklo_ps(v[2], v[3]);
    const __m512 rows = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1)));
    _mm512_mask_storeu_ps(C + t * ldc, R.mask, _mm512_add_ps(rows, ms[t]));
  }
}

template <class Tr>
void gemm_q32(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
              int64_t ldc, int64_t n0, int64_t n1) {
  const int64_t nb = K / 32;
  for_row_groups(W, wrb, n0, n1, nb, [&](const Rows16& R, int64_t n) {
    if constexpr (Tr::min) {
      for (int64_t t0 = 0; t0 < T; t0 += kLaneTT) {
        const uint8_t* x = X + t0 * xrb;
        float* c = C + t0 * ldc + n;
        if (T - t0 >= 2) q32_lane_tile<Tr, 2>(R, nb, x, xrb, c, ldc);
        else q32_lane_tile<Tr, 1>(R, nb, x, xrb, c, ldc);
      }
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
// A super-block of 16 rows decoded once per token tile: 16 segments of 16 elements (segment s =
// elements 16s..16s+15, against activation bytes q[16s..16s+15]) as unsigned bytes in Z layout,
// the integer scale per sub-block (lanes = rows), the min pairs, d and dmin.
struct KBuf {
  __m512i w[16][4];
  __m512i sc[16];
  __m512i mp[8];  // dword r: (min for even pair member) | (min for odd member) << 16, see each type
  __m512 d, dmin;
};

inline __m512i byte_of(const __m512i* S, int i) {
  return _mm512_and_si512(srl32(S[i / 4], 8 * (i % 4)), _mm512_set1_epi32(0xFF));
}

void dec_q2_k(const Rows16& R, size_t off, KBuf& B) {
  const __m512i G = gather(R, off + 80);
  B.d = half_lo(G);
  B.dmin = half_hi(G);
  __m512i S[4], m[16];
  dwords4(R, off, S);
  for (int s = 0; s < 16; ++s) {
    const __m512i by = byte_of(S, s);
    B.sc[s] = _mm512_and_si512(by, _mm512_set1_epi32(15));
    m[s] = srl32(by, 4);
  }
  for (int i = 0; i < 8; ++i) B.mp[i] = _mm512_or_si512(m[2 * i], sll32(m[2 * i + 1], 16));
  const __m512i m3 = _mm512_set1_epi8(3);
  for (int j = 0; j < 4; ++j) {
    R.prefetch_step();
    __m512i c[4];  // qs chunk 2g+h
    load4x4(R, j, off + 16, c);
    for (int g = 0; g < 2; ++g)
      for (int h = 0; h < 2; ++h)
        for (int jj = 0; jj < 4; ++jj) B.w[8 * g + 2 * jj + h][j] = _mm512_and_si512(srl16(c[2 * g + h], 2 * jj), m3);
  }
}

void dec_q3_k(const Rows16& R, size_t off, KBuf& B) {
  B.d = half_hi(gather(R, off + 106));
  __m512i S[3];
  for (int i = 0; i < 3; ++i) S[i] = gather(R, off + 96 + 4 * i);
  const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  for (int k = 0; k < 16; ++k) {
    const __m512i lo = k < 8 ? _mm512_and_si512(byte_of(S, k), m15) : _mm512_and_si512(srl32(byte_of(S, k - 8), 4), m15);
    const __m512i hi = _mm512_and_si512(srl32(byte_of(S, 8 + k % 4), 2 * (k / 4)), m3);
    B.sc[k] = _mm512_sub_epi32(_mm512_or_si512(lo, sll32(hi, 4)), _mm512_set1_epi32(32));
  }
  const __m512i m3b = _mm512_set1_epi8(3);
  for (int j = 0; j < 4; ++j) {
    R.prefetch_step();
    __m512i hm[4], qs[4];  // hm chunks 0, 1 (bytes 0..31); qs chunk 2g+h (bytes 32..95)
    load4x4(R, j, off, hm);
    load4x4(R, j, off + 32, qs);
    for (int g = 0; g < 2; ++g)
      for (int h = 0; h < 2; ++h)
        for (int jj = 0; jj < 4; ++jj)
          B.w[8 * g + 2 * jj + h][j] = _mm512_or_si512(_mm512_and_si512(srl16(qs[2 * g + h], 2 * jj), m3b),
                                                       bits_to(hm[h], 4 * g + jj, 2, 1));
  }
}

// The 6-bit scales and mins of Q4_K / Q5_K (12 bytes at off + 4).
inline void scales_k4(const Rows16& R, size_t off, KBuf& B) {
  __m512i H[4];  // d|dmin, scale bytes 0..3, 4..7, 8..11
  dwords4(R, off, H);
  const __m512i S0 = H[1], S1 = H[2], S2 = H[3];
  const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  for (int j = 0; j < 8; ++j) {
    __m512i sc, m;
    if (j < 4) {
      sc = _mm512_and_si512(srl32(S0, 8 * j), m63);
      m = _mm512_and_si512(srl32(S1, 8 * j), m63);
    } else {
      const int k = j - 4;
      sc = _mm512_or_si512(_mm512_and_si512(srl32(S2, 8 * k), m15),
                           sll32(_mm512_and_si512(srl32(S0, 8 * k + 6), m3), 4));
      m = _mm512_or_si512(_mm512_and_si512(srl32(S2, 8 * k + 4), m15),
                          sll32(_mm512_and_si512(srl32(S1, 8 * k + 6), m3), 4));
    }
    B.sc[j] = sc;
    B.mp[j] = _mm512_or_si512(m, sll32(m, 16));
  }
  B.d = half_lo(H[0]);
  B.dmin = half_hi(H[0]);
}

void dec_q4_k(const Rows16& R, size_t off, KBuf& B) {
  scales_k4(R, off, B);
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int j = 0; j < 4; ++j) {
    R.prefetch_step();
    __m512i c[8];  // qs chunk 2g+h
    load4x4(R, j, off + 16, c);
    load4x4(R, j, off + 80, c + 4);
    for (int g = 0; g < 4; ++g)
      for (int h = 0; h < 2; ++h) {
        const __m512i raw = c[2 * g + h];
        B.w[4 * g + h][j] = _mm512_and_si512(raw, m4);
        B.w[4 * g + 2 + h][j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      }
  }
}

void dec_q5_k(const Rows16& R, size_t off, KBuf& B) {
  scales_k4(R, off, B);
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int j = 0; j < 4; ++j) {
    R.prefetch_step();
    __m512i qh[4], c[8];  // qh chunks 0, 1 (bytes 16..47); qs chunk 2g+h (bytes 48..175)
    load4x4(R, j, off + 16, qh);
    load4x4(R, j, off + 48, c);
    load4x4(R, j, off + 112, c + 4);
    for (int g = 0; g < 4; ++g)
      for (int h = 0; h < 2; ++h) {
        const __m512i raw = c[2 * g + h];
        B.w[4 * g + h][j] = _mm512_or_si512(_mm512_and_si512(raw, m4), bits_to(qh[h], 2 * g, 4, 1));
        B.w[4 * g + 2 + h][j] =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), bits_to(qh[h], 2 * g + 1, 4, 1));
      }
  }
}

void dec_q6_k(const Rows16& R, size_t off, KBuf& B) {
  B.d = half_hi(gather(R, off + 206));
  __m512i S[4];
  dwords4(R, off + 192, S);
  for (int s = 0; s < 16; ++s) B.sc[s] = sra32(sll32(S[s / 4], 24 - 8 * (s % 4)), 24);
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int j = 0; j < 4; ++j) {
    R.prefetch_step();
    __m512i ql[8], qh[4];  // ql chunk 4g+c (bytes 0..127); qh chunk 2g+h (bytes 128..191)
    load4x4(R, j, off, ql);
    load4x4(R, j, off + 64, ql + 4);
    load4x4(R, j, off + 128, qh);
    for (int g = 0; g < 2; ++g) {
      for (int c = 0; c < 4; ++c) {
        const __m512i raw = ql[4 * g + c];
        B.w[8 * g + c][j] = _mm512_and_si512(raw, m4);
        B.w[8 * g + c + 4][j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      }
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k) {
          __m512i& w = B.w[8 * g + 2 * k + h][j];
          w = _mm512_or_si512(w, bits_to(qh[2 * g + h], 2 * k, 4, 2));
        }
    }
  }
}

// One token against a decoded super-block. kSegs: segments per sub-block (2 for Q4_K/Q5_K);
// kOff: the weight offset (q - kOff) handled through bsums; kMin: the dmin term.
template <int kSegs, int kOff, bool kMin>
inline __m512 k_token(const KBuf& B, const uint8_t* a, __m512 acc) {
  float da;
  int16_t bs[16];
  std::memcpy(&da, a + offsetof(BlockQA256, d), 4);
  std::memcpy(bs, a + offsetof(BlockQA256, bsums), sizeof bs);
  const uint8_t* q = a + offsetof(BlockQA256, q);
  __m512i isum = _mm512_setzero_si512();
  for (int sg = 0; sg < 16 / kSegs; ++sg) {
    static_assert(kOff == 0 || kSegs == 1);
    const __m512i init = kOff ? offset_init(-kOff * bs[sg]) : _mm512_setzero_si512();
    __m512i z0 = init, z1 = init, z2 = init, z3 = init;
    for (int u = 0; u < kSegs; ++u) {
      const int s = sg * kSegs + u;
      const __m512i av = _mm512_broadcast_i32x4(ld128(q + 16 * s));
      z0 = _mm512_dpbusd_epi32(z0, B.w[s][0], av);
      z1 = _mm512_dpbusd_epi32(z1, B.w[s][1], av);
      z2 = _mm512_dpbusd_epi32(z2, B.w[s][2], av);
      z3 = _mm512_dpbusd_epi32(z3, B.w[s][3], av);
    }
    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(reduce4(z0, z1, z2, z3), B.sc[sg]));
  }
  const __m512 DA = _mm512_set1_ps(da);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(B.d, DA), _mm512_cvtepi32_ps(isum), acc);
  if constexpr (kMin) {
    __m512i msum = _mm512_setzero_si512();
    for (int i = 0; i < 8; ++i) {
      int32_t pair;
      std::memcpy(&pair, bs + 2 * i, 4);
      msum = _mm512_dpwssd_epi32(msum, B.mp[i], _mm512_set1_epi32(pair));
    }
    acc = _mm512_fnmadd_ps(_mm512_mul_ps(B.dmin, DA), _mm512_cvtepi32_ps(msum), acc);
  }
  return acc;
}

template <void (*Dec)(const Rows16&, size_t, KBuf&), int kSegs, int kOff, bool kMin>
void gemm_k(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
            int64_t n0, int64_t n1, size_t bsize) {
  const int64_t nb = K / 256;
  for_row_groups(W, wrb, n0, n1, 4 * nb, [&](const Rows16& R, int64_t n) {
    KBuf B;
    for (int64_t t0 = 0; t0 < T; t0 += kTT) {
      const int tt = static_cast<int>(T - t0 < kTT ? T - t0 : kTT);
      __m512 acc[kTT];
      for (int t = 0; t < kTT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        Dec(R, b * bsize, B);  // prefetches the next row group as it goes
        for (int t = 0; t < tt; ++t)
          acc[t] = k_token<kSegs, kOff, kMin>(B, X + (t0 + t) * xrb + b * sizeof(BlockQA256), acc[t]);
      }
      for (int t = 0; t < tt; ++t) _mm512_mask_storeu_ps(C + (t0 + t) * ldc + n, R.mask, acc[t]);
    }
  });
}

// ================================ F32 / F16 / BF16 ================================
template <GgmlType kT>
inline __m512 loadw16(const uint8_t* p) {
  if constexpr (kT == GgmlType::F32) return _mm512_loadu_ps(p);
  if constexpr (kT == GgmlType::F16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  if constexpr (kT == GgmlType::BF16)
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
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

// r[i] = row i (16 values) -> out[k] = column k (16 rows).
inline void transpose16(const __m512* r, float (*out)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4q + c]: lane L = column 4L+c of rows 4q..4q+3
  for (int q = 0; q < 4; ++q) {
    u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
    u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
    u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
    u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 e = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), f = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    _mm512_store_ps(out[c], _mm512_shuffle_f32x4(a, e, 0x88));
    _mm512_store_ps(out[4 + c], _mm512_shuffle_f32x4(a, e, 0xDD));
    _mm512_store_ps(out[8 + c], _mm512_shuffle_f32x4(b, f, 0x88));
    _mm512_store_ps(out[12 + c], _mm512_shuffle_f32x4(b, f, 0xDD));
  }
}

// A row group's weights are transposed once per panel of kPanelF columns (lanes over rows) and
// every token tile passes over the panel; a tile's running sums wait in C between panels (an f32
// store and load are exact, and each element's chain still runs k = 0, 1, ... in order).
constexpr int64_t kPanelF = 256;
static_assert(kTT == 8, "gemm_f's switch covers tiles of 1..8 tokens");

// acc[t] = fma(w[k], x_t[k], acc[t]) for k in [0, kp), the N chains interleaved.
template <int N>
inline void panel_fma(const float (*tb)[16], int64_t kp, const uint8_t* x, size_t xrb, __m512* acc) {
  __m512 a[N];
  for (int t = 0; t < N; ++t) a[t] = acc[t];
  for (int64_t kk = 0; kk < kp; ++kk) {
    const __m512 w = _mm512_load_ps(tb[kk]);
    for (int t = 0; t < N; ++t) a[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(ldf(x + t * xrb + 4 * kk)), a[t]);
  }
  for (int t = 0; t < N; ++t) acc[t] = a[t];
}

template <GgmlType kT>
void gemm_f(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
            int64_t n0, int64_t n1) {
  constexpr int eb = kT == GgmlType::F32 ? 4 : 2;
  for_row_groups(W, wrb, n0, n1, (K + 15) / 16, [&](const Rows16& R, int64_t n) {
    alignas(64) float tb[kPanelF][16];
    for (int64_t p0 = 0; p0 < K; p0 += kPanelF) {
      const int64_t kp = K - p0 < kPanelF ? K - p0 : kPanelF;
      for (int64_t k0 = 0; k0 < kp; k0 += 16) {
        const int kc = static_cast<int>(kp - k0 < 16 ? kp - k0 : 16);
        R.prefetch_step();
        if (kc == 16) {
          __m512 r[16];
          for (int i = 0; i < 16; ++i) r[i] = loadw16<kT>(R.r[i] + (p0 + k0) * eb);
          transpose16(r, tb + k0);
        } else {
          for (int kk = 0; kk < kc; ++kk)
            for (int i = 0; i < 16; ++i) tb[k0 + kk][i] = loadw1<kT>(R.r[i] + (p0 + k0 + kk) * eb);
        }
      }
      for (int64_t t0 = 0; t0 < T; t0 += kTT) {
        const int tt = static_cast<int>(T - t0 < kTT ? T - t0 : kTT);
        __m512 acc[kTT];
        for (int t = 0; t < tt; ++t)
          acc[t] = p0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(R.mask, C + (t0 + t) * ldc + n);
        const uint8_t* x = X + t0 * xrb + p0 * 4;
        switch (tt) {  // the tile's chains interleaved (one FMA's latency hidden by the others)
          case 8: panel_fma<8>(tb, kp, x, xrb, acc); break;
          case 7: panel_fma<7>(tb, kp, x, xrb, acc); break;
          case 6: panel_fma<6>(tb, kp, x, xrb, acc); break;
          case 5: panel_fma<5>(tb, kp, x, xrb, acc); break;
          case 4: panel_fma<4>(tb, kp, x, xrb, acc); break;
          case 3: panel_fma<3>(tb, kp, x, xrb, acc); break;
          case 2: panel_fma<2>(tb, kp, x, xrb, acc); break;
          default: panel_fma<1>(tb, kp, x, xrb, acc); break;
        }
        for (int t = 0; t < tt; ++t) _mm512_mask_storeu_ps(C + (t0 + t) * ldc + n, R.mask, acc[t]);
      }
    }
  });
}

}  // namespace

void matmul_avx512(GgmlType wtype, const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T,
                   float* C, int64_t ldc, int64_t n0, int64_t n1) {
  // Gathers take int32 row offsets (15 rows): very long rows use the twin (same bits).
  if (wrb > static_cast<size_t>(INT32_MAX / 16)) return matmul_scalar(wtype, W, wrb, K, X, xrb, T, C, ldc, n0, n1);
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
