// AVX-512 attention (attention.h), bit-identical to the scalar twin in attention.cpp, run over a
// tile of queries (one kv head, one block table; a single query is a tile of one):
//   scores: per 16-key chunk (slots 0-15 or 16-31 of a block), for the rows whose range meets it:
//           - few rows: per row, one register of 16 partial sums per key, then a transposed
//             reduction doing exactly tree16's additions for the 16 keys (reduce16x16);
//           - many rows: the chunk is transposed once (KT[d] = dim d of the 16 keys; an f16
//             cache's rows converted as they load); per row,
//             partial i of all 16 keys is one register, FMA chain over d = i, i+16, ... from +0,
//             and tree16 adds the 16 registers lane-wise (scores_t), 4 rows at a time sharing the
//             KT loads;
//           - a q8_0 cache, any rows: the chunk transposed as bytes (transpose_q8), per row one
//             dpbusd chain per 32-value block (scores_q8);
//           scores outside a row's range are never stored; the scale is detail::score_scale
//           (scale, or scale / softcap);
//   soft-cap: per row with softcap != 0, s = softcap * tanh(s) over its stored scores (m512::tanh);
//   weights: per row, as softmax (16 partial sums over keys);
//   values: per block, lanes over d, 64 dims (4 registers) of up to 6 rows per pass over the
//           block's keys (rows that see the same keys of the block; an f16 or q8_0 cache's rows
//           converted as they load, a q8_0 block's scales once), the running sums kept in the
//           output rows between blocks.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/kernels/attention.h"
#include "cpu/kernels/math_avx512.h"

namespace ggflow::cpu::detail {

namespace {

// A[k] holds key k's 16 partial sums; returns lane k = tree16(A[k]).
// Level w=8 pairs lanes (i, i+8), w=4 (i, i+4), w=2 (i, i+2), w=1 (i, i+1), each as one add of two
// shuffles that line the pairs up for several keys at once.
inline __m512 reduce16x16(const __m512* A) {
  __m512 B[8], C[4], D[2];
  for (int m = 0; m < 8; ++m)  // B[m]: lanes 0-7 key 2m, lanes 8-15 key 2m+1 (w = 8 done)
    B[m] = _mm512_add_ps(_mm512_shuffle_f32x4(A[2 * m], A[2 * m + 1], 0x44),
                         _mm512_shuffle_f32x4(A[2 * m], A[2 * m + 1], 0xEE));
  for (int n = 0; n < 4; ++n)  // C[n]: 128-bit chunk c = key 4n+c (w = 4 done)
    C[n] = _mm512_add_ps(_mm512_shuffle_f32x4(B[2 * n], B[2 * n + 1], 0x88),
                         _mm512_shuffle_f32x4(B[2 * n], B[2 * n + 1], 0xDD));
  for (int o = 0; o < 2; ++o)  // D[o]: chunk c = [key 8o+c (2 lanes), key 8o+4+c (2 lanes)] (w = 2 done)
    D[o] = _mm512_add_ps(_mm512_shuffle_ps(C[2 * o], C[2 * o + 1], 0x44), _mm512_shuffle_ps(C[2 * o], C[2 * o + 1], 0xEE));
  // E lane 4c + r = key 4r + c (w = 1 done); permute to lane k = key k.
  const __m512 E = _mm512_add_ps(_mm512_shuffle_ps(D[0], D[1], 0x88), _mm512_shuffle_ps(D[0], D[1], 0xDD));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(idx, E);
}

// The 16 dot products of q with key rows kb + r*S, r < 16 (lane r).
inline __m512 dots16(const float* q, const float* kb, int64_t S) {
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + 16 <= S; d += 16) {
    const __m512 qv = _mm512_loadu_ps(q + d);
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kb + r * S + d), acc[r]);
  }
  if (d < S) {  // zero-filled lanes add +0 to partials that are never -0
    const __mmask16 m = m512::tail_mask(S - d);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kb + r * S + d), acc[r]);
  }
  return reduce16x16(acc);
}

// ---- transposed scores

constexpr int64_t kMaxTS = 256;  // head sizes up to this take the transposed path (KT on the stack)
constexpr int kMinTRows = 4;     // ... when at least this many rows need the chunk

#define GGFLOW_INLINE inline __attribute__((always_inline))

// The cache's element type, for the loads that convert as they go (attention.h's KvCache).
enum class Elem { f32, f16, q8_0 };
Elem elem_of(const KvCache& c) { return c.q8() ? Elem::q8_0 : c.half() ? Elem::f16 : Elem::f32; }

// Dims [d, d + 16) of the K or V row at `row` (its first byte) as f32 under mask m, zeros outside:
// loaded in place (f32) or converted as loaded (f16: vcvtph2ps): the values cache_rows gives. (A
// q8_0 cache's keys are transposed as bytes, transpose_q8; its values converted in vacc.)
template <Elem E>
GGFLOW_INLINE __m512 load_dims(const char* row, int64_t d, __mmask16 m) {
  static_assert(E != Elem::q8_0);
  if constexpr (E == Elem::f32) return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + d);
  else return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + d));
}

// KT[d*16 + k] = dim d of key row k, d < round_up(S, 16) (dims past S are zero); load(k, d0, m):
// dims [d0, d0 + 16) of row k under mask m as f32, zeros outside m.
template <class Load>
GGFLOW_INLINE void transpose_rows(Load&& load, int64_t S, float* KT) {
  for (int64_t d0 = 0; d0 < S; d0 += 16) {
    const __mmask16 m = m512::tail_mask(S - d0);
    __m512 r[16], t[16];
    for (int k = 0; k < 16; ++k) r[k] = load(k, d0, m);
    for (int i = 0; i < 8; ++i) {  // t[2i], t[2i+1]: rows 2i, 2i+1 interleaved, columns 4c+{0,1} / 4c+{2,3}
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // r[4i+j], 128-bit chunk c: rows 4i..4i+3 at column 4c+j
      r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; ++j) {
      const __m512 a01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), a23 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
      const __m512 b01 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44), b23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
      float* o = KT + (d0 + j) * 16;
      _mm512_store_ps(o + 0 * 64, _mm512_shuffle_f32x4(a01, b01, 0x88));  // column j
      _mm512_store_ps(o + 1 * 64, _mm512_shuffle_f32x4(a01, b01, 0xDD));  // column 4 + j
      _mm512_store_ps(o + 2 * 64, _mm512_shuffle_f32x4(a23, b23, 0x88));  // column 8 + j
      _mm512_store_ps(o + 3 * 64, _mm512_shuffle_f32x4(a23, b23, 0xDD));  // column 12 + j
    }
  }
}

// The 16 key rows from `slot` of kv head kvh in cache block `block`, converted as they load (the
// values cache_rows gives), so that an f16 or q8_0 chunk is not stored as f32 and loaded back
// before its transpose.
template <Elem E>
void transpose_chunk(const KvCache& c, int64_t block, int64_t kvh, int64_t slot, int64_t S, float* KT) {
  const char* base = c.bytes_at(true, block, kvh, slot);
  const int64_t rb = c.rows_bytes(true, 1);
  transpose_rows([&](int k, int64_t d0, __mmask16 m) { return load_dims<E>(base + k * rb, d0, m); }, S, KT);
}
using TransposeFn = void (*)(const KvCache&, int64_t, int64_t, int64_t, int64_t, float*);
TransposeFn transpose_fn(Elem e) {  // f32 or f16 (a q8_0 chunk: transpose_q8)
  return e == Elem::f16 ? transpose_chunk<Elem::f16> : transpose_chunk<Elem::f32>;
}

// acc_i + acc_{i+8} (tree16's first level) for MR rows, lanes over the chunk's 16 keys:
// acc_i = FMA chain over d = i, i+16, ... < S in order, from +0. SC: S known at compile time
// (the loops unroll), or 0.
template <int MR, int SC>
GGFLOW_INLINE void pair_sums(const float* const* q, const float* KT, int64_t Srt, int64_t i, __m512* r) {
  const int64_t S = SC > 0 ? SC : Srt;
  __m512 a[MR], b[MR];
  for (int m = 0; m < MR; ++m) a[m] = _mm512_setzero_ps(), b[m] = _mm512_setzero_ps();
  int64_t d = i;
#pragma GCC unroll 16
  for (; d + 8 < S; d += 16) {
    const __m512 k0 = _mm512_load_ps(KT + d * 16), k1 = _mm512_load_ps(KT + (d + 8) * 16);
    for (int m = 0; m < MR; ++m) {
      a[m] = _mm512_fmadd_ps(_mm512_set1_ps(q[m][d]), k0, a[m]);
      b[m] = _mm512_fmadd_ps(_mm512_set1_ps(q[m][d + 8]), k1, b[m]);
    }
  }
  if (d < S) {
    const __m512 k0 = _mm512_load_ps(KT + d * 16);
    for (int m = 0; m < MR; ++m) a[m] = _mm512_fmadd_ps(_mm512_set1_ps(q[m][d]), k0, a[m]);
  }
  for (int m = 0; m < MR; ++m) r[m] = _mm512_add_ps(a[m], b[m]);
}

// tree16's node (I, W): W = 8: acc_I + acc_{I+8}; else node(I, 2W) + node(I + W, 2W) (the level
// w = W adds acc[i] + acc[i+W]); node(0, 1) is the whole sum.
template <int MR, int SC, int I, int W>
GGFLOW_INLINE void tree_node(const float* const* q, const float* KT, int64_t S, __m512* r) {
  if constexpr (W == 8) {
    pair_sums<MR, SC>(q, KT, S, I, r);
  } else {
    __m512 x[MR], y[MR];
    tree_node<MR, SC, I, 2 * W>(q, KT, S, x);
    tree_node<MR, SC, I + W, 2 * W>(q, KT, S, y);
    for (int m = 0; m < MR; ++m) r[m] = _mm512_add_ps(x[m], y[m]);
  }
}

// The scores of MR rows (q[m], scale[m]) on a transposed chunk, stored to p[m] under mask[m].
template <int MR, int SC>
void scores_t(const float* const* q, const float* KT, int64_t S, const float* scale, float* const* p,
              const __mmask16* mask) {
  __m512 r[MR];
  tree_node<MR, SC, 0, 1>(q, KT, S, r);
  for (int m = 0; m < MR; ++m) _mm512_mask_storeu_ps(p[m], mask[m], _mm512_mul_ps(r[m], _mm512_set1_ps(scale[m])));
}

constexpr int kMaxMr = 4;  // rows per pass over a transposed chunk (5 * MR + 2 <= 32 registers)
using ScoresFn = void (*)(const float* const*, const float*, int64_t, const float*, float* const*, const __mmask16*);
template <int SC>
constexpr ScoresFn scores_fns[kMaxMr] = {scores_t<1, SC>, scores_t<2, SC>, scores_t<3, SC>, scores_t<4, SC>};
// The head sizes with unrolled kernels; others run the loop.
const ScoresFn* scores_fns_for(int64_t S) {
  switch (S) {
    case 64: return scores_fns<64>;
    case 80: return scores_fns<80>;
    case 96: return scores_fns<96>;
    case 128: return scores_fns<128>;
    case 256: return scores_fns<256>;
    default: return scores_fns<0>;
  }
}

// ---- q8_0 scores (attention.h): integer dot products per 32-value block

// The f16 scales of 16 q8_0 blocks at p + k * rb (k < 16) as f32, lane k (vcvtph2ps: as
// from_f16_quiet).
inline __m512 scales16(const void* p, int64_t rb) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(static_cast<int32_t>(rb)));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(idx, p, 1)));
}

// A 16-key chunk of a q8_0 cache as bytes, lanes over keys: KT8[g] lane k = dims [4g, 4g + 4) of
// key k's codes + 128 (unsigned), g < S / 4; dk[b] lane k = key k's scale of block b, as f32.
// Per block, the 16 keys' 32 code bytes go in as 8 registers of two keys (k | k + 4, k < 4;
// k + 4 | k + 8, k >= 4: the order the 8 x 8 dword transpose below leaves natural), out as 8.
void transpose_q8(const KvCache& c, int64_t block, int64_t kvh, int64_t slot, int64_t S, __m512i* KT8, __m512* dk) {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(c.bytes_at(true, block, kvh, slot));
  const int64_t rb = c.rows_bytes(true, 1);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  constexpr int lo_key[8] = {0, 1, 2, 3, 8, 9, 10, 11};
  for (int64_t b = 0; b < S / 32; ++b) {
    const uint8_t* p = base + b * 34;
    dk[b] = scales16(p, rb);
    __m512i z[8], t[8], u[8];
    for (int i = 0; i < 8; ++i)
      z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 + lo_key[i] * rb))),
                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 + (lo_key[i] + 4) * rb)), 1);
    for (int i = 0; i < 4; ++i)
      t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]), t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    for (int h = 0; h < 2; ++h) {  // u[4h + j]: dword j (lane pairs 0/2) and j + 4 (1/3) of keys 4-at-a-time
      u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
      u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
      u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
      u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int j = 0; j < 4; ++j) {
      KT8[b * 8 + j] = _mm512_xor_si512(_mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), flip);
      KT8[b * 8 + j + 4] = _mm512_xor_si512(_mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD), flip);
    }
  }
}

// The scores of MR quantized rows on a transposed q8_0 chunk, stored to p[m] under mask[m]:
// per block, i_b = bias_b + Σ_g dpbusd (two chains, even and odd g: int32 sums are exact in any
// order), then acc = fma((float) i_b, dk_b * dq_b, acc) in block order from +0; times scale.
template <int MR>
void scores_q8(const QuantRow* const* q, const __m512i* KT8, const __m512* dk, int64_t S, const float* scale, float* const* p,
               const __mmask16* mask) {
  __m512 acc[MR];
  for (int m = 0; m < MR; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < S / 32; ++b) {
    __m512i i0[MR], i1[MR];
    for (int m = 0; m < MR; ++m) i0[m] = _mm512_set1_epi32(q[m]->bias[b]), i1[m] = _mm512_setzero_si512();
    for (int g = 0; g < 8; g += 2) {
      const __m512i k0 = KT8[b * 8 + g], k1 = KT8[b * 8 + g + 1];
      for (int m = 0; m < MR; ++m) {
        int32_t w0, w1;
        std::memcpy(&w0, q[m]->q + b * 32 + 4 * g, 4);
        std::memcpy(&w1, q[m]->q + b * 32 + 4 * g + 4, 4);
        i0[m] = _mm512_dpbusd_epi32(i0[m], k0, _mm512_set1_epi32(w0));
        i1[m] = _mm512_dpbusd_epi32(i1[m], k1, _mm512_set1_epi32(w1));
      }
    }
    for (int m = 0; m < MR; ++m)
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[m], i1[m])), _mm512_mul_ps(dk[b], _mm512_set1_ps(q[m]->d[b])),
                               acc[m]);
  }
  for (int m = 0; m < MR; ++m) {
    const __m512 s = q[m]->finite ? _mm512_mul_ps(acc[m], _mm512_set1_ps(scale[m])) : _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
    _mm512_mask_storeu_ps(p[m], mask[m], s);
  }
}
using ScoresQ8Fn = void (*)(const QuantRow* const*, const __m512i*, const __m512*, int64_t, const float*, float* const*,
                            const __mmask16*);
constexpr ScoresQ8Fn scores_q8_fns[4] = {scores_q8<1>, scores_q8<2>, scores_q8<3>, scores_q8<4>};

// ---- values

// For NQ rows at once: out_q[0, 16*NV) += sum over keys i < count of w_q[i] * (dims [dc, dc +
// 16*NV) of the value row at vb + i*rb), key order, one FMA chain per lane and row (NQ*NV
// independent chains); the last register of each row is masked by `last`. A q8_0 row's values are
// d * q with key i's scale of block b at dv[b * 32 + i] (f32, converted once per cache block).
template <Elem E, int NV, int NQ>
void vacc(const float* const* w, const char* vb, int64_t rb, int64_t dc, int64_t count, float* const* out, __mmask16 last,
          const float* dv) {
  const float* wq[NQ];
  float* oq[NQ];
  for (int q = 0; q < NQ; ++q) wq[q] = w[q], oq[q] = out[q];
  __m512 acc[NQ][NV];
#pragma GCC unroll 8
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[q][v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, oq[q] + 16 * v);
  for (int64_t i = 0; i < count; ++i) {
    const char* row = vb + i * rb;
    __m512 vv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? last : 0xFFFF;
      if constexpr (E == Elem::q8_0) {  // d * q, d from dv (a broadcast load): exact, as cache_rows
        const int64_t d = dc + 16 * v;
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d / 32 * 34 + 2 + d % 32));
        vv[v] = _mm512_maskz_mul_ps(m, _mm512_set1_ps(dv[d / 32 * 32 + i]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
      } else {
        vv[v] = load_dims<E>(row, dc + 16 * v, m);
      }
    }
#pragma GCC unroll 8
    for (int q = 0; q < NQ; ++q) {
      const __m512 p = _mm512_set1_ps(wq[q][i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[q][v] = _mm512_fmadd_ps(p, vv[v], acc[q][v]);
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(oq[q] + 16 * v, v == NV - 1 ? last : 0xFFFF, acc[q][v]);
}

// A q8_0 value block's scales (slots [0, 32) of kv head kvh in cache block `block`, Sv / 32 blocks
// each) as f32: dv[b * 32 + slot], converted as from_f16_quiet (vcvtph2ps).
void value_scales(const KvCache& c, int64_t block, int64_t kvh, float* dv) {
  const char* base = c.bytes_at(false, block, kvh, 0);
  const int64_t rb = c.rows_bytes(false, 1);
  for (int64_t b = 0; b < c.v_size / 32; ++b)
    for (int h = 0; h < 2; ++h) _mm512_storeu_ps(dv + b * 32 + 16 * h, scales16(base + 16 * h * rb + b * 34, rb));
}

constexpr int kMaxNq = 6;  // rows per pass over a block's values (NQ*NV + NV <= 28 registers)
using VaccFn = void (*)(const float* const*, const char*, int64_t, int64_t, int64_t, float* const*, __mmask16, const float*);
template <Elem E, int NV>
constexpr VaccFn vacc_fns[kMaxNq] = {vacc<E, NV, 1>, vacc<E, NV, 2>, vacc<E, NV, 3>,
                                     vacc<E, NV, 4>, vacc<E, NV, 5>, vacc<E, NV, 6>};
template <Elem E>
VaccFn vacc_fn_of(int nv, int nq) {
  switch (nv) {
    case 1: return vacc_fns<E, 1>[nq - 1];
    case 2: return vacc_fns<E, 2>[nq - 1];
    case 3: return vacc_fns<E, 3>[nq - 1];
    default: return vacc_fns<E, 4>[nq - 1];
  }
}
VaccFn vacc_fn(Elem e, int nv, int nq) {
  return e == Elem::q8_0 ? vacc_fn_of<Elem::q8_0>(nv, nq) : e == Elem::f16 ? vacc_fn_of<Elem::f16>(nv, nq) : vacc_fn_of<Elem::f32>(nv, nq);
}

}  // namespace

void attention_tile_avx512(const KvCache& c, const AttnTile& t) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const AttentionQuery* A = t.a;
  const AttnPlan* pl = t.pl;
  const int64_t Q = t.count, nq = A[0].nq, R = Q * nq, S = c.head_size, Sv = c.v_size, kvh = A[0].kv_head;
  const int32_t* table = A[0].block_table;
  float* sums = t.scratch + R * t.stride;
  auto weights = [&](int64_t r) { return t.scratch + r * t.stride + 16; };
  auto orow = [&](int64_t qi, int64_t h) { return A[qi].out + h * A[qi].out_stride; };
  // the keys the tile sees: [L, H)
  int64_t L = std::numeric_limits<int64_t>::max(), H = 0;
  for (int64_t qi = 0; qi < Q; ++qi)
    if (pl[qi].n > 0) L = std::min(L, pl[qi].lo), H = std::max(H, pl[qi].lo + pl[qi].n);

  // an f16 cache's K chunk as f32 where it is not transposed as it loads (check_cache: rows
  // of at most kMaxHalfRow)
  alignas(64) float kconv[16 * kMaxHalfRow];
  const Elem elem = elem_of(c);
  const TransposeFn transpose = transpose_fn(elem);
  const int64_t vrow = c.rows_bytes(false, 1);  // bytes of a value row

  // 1. scores, chunk by chunk; each chunk's keys are loaded for all the rows that see them
  alignas(64) float KT[kMaxTS * 16];
  const ScoresFn* sfns = scores_fns_for(S);
  // a q8_0 cache: the rows quantized once, the chunks transposed as bytes
  const bool q8 = elem == Elem::q8_0;
  static thread_local std::vector<QuantRow> qrows;
  __m512i KT8[kMaxHalfRow / 4];
  __m512 dk[kMaxHalfRow / 32];
  if (q8) {
    if (static_cast<int64_t>(qrows.size()) < R) qrows.resize(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) quantize_row(A[r / nq].q + r % nq * A[r / nq].q_stride, S, &qrows[static_cast<size_t>(r)]);
  }
  for (int64_t c0 = H > L ? L / 16 * 16 : H; c0 < H; c0 += 16) {
    int64_t active = 0;
    for (int64_t qi = 0; qi < Q; ++qi)
      if (pl[qi].n > 0 && pl[qi].lo < c0 + 16 && pl[qi].lo + pl[qi].n > c0) active += nq;
    if (active == 0) continue;
    // the next chunk's keys (or, after the last, the first block's values) arrive while this one computes
    if (c0 + 16 < H) prefetch_rows(c, true, table[(c0 + 16) / kKvBlock], kvh, (c0 + 16) % kKvBlock, 16);
    else prefetch_rows(c, false, table[L / kKvBlock], kvh, 0, kKvBlock);
    const bool tr = S <= kMaxTS && active >= kMinTRows;
    const float* kb = nullptr;  // the chunk's f32 rows, when not transposed
    if (q8) transpose_q8(c, table[c0 / kKvBlock], kvh, c0 % kKvBlock, S, KT8, dk);
    else if (tr) transpose(c, table[c0 / kKvBlock], kvh, c0 % kKvBlock, S, KT);
    else kb = cache_rows(Isa::avx512, c, true, table[c0 / kKvBlock], kvh, c0 % kKvBlock, 16, kconv);
    const float* qs[kMaxMr];
    const QuantRow* qq[kMaxMr];
    float* ps[kMaxMr];
    __mmask16 ms[kMaxMr];
    float scl[kMaxMr];
    int k = 0;
    auto flush = [&] {
      if (q8) {
        scores_q8_fns[k - 1](qq, KT8, dk, S, scl, ps, ms);
      } else if (tr) {
        sfns[k - 1](qs, KT, S, scl, ps, ms);
      } else {
        for (int m = 0; m < k; ++m)
          _mm512_mask_storeu_ps(ps[m], ms[m], _mm512_mul_ps(dots16(qs[m], kb, S), _mm512_set1_ps(scl[m])));  // s = dot * score_scale
      }
      k = 0;
    };
    for (int64_t qi = 0; qi < Q; ++qi) {
      const int64_t lo = pl[qi].lo, hi = pl[qi].lo + pl[qi].n;
      if (pl[qi].n == 0 || lo >= c0 + 16 || hi <= c0) continue;
      // lanes [lo - c0, hi - c0) of the chunk
      const __mmask16 m = static_cast<__mmask16>(m512::tail_mask(hi - c0) & ~m512::tail_mask(std::max<int64_t>(0, lo - c0)));
      for (int64_t h = 0; h < nq; ++h) {
        const int64_t r = qi * nq + h;
        qs[k] = A[qi].q + h * A[qi].q_stride, ps[k] = weights(r) + (c0 - lo), ms[k] = m, scl[k] = score_scale(A[qi]);
        if (q8) qq[k] = &qrows[static_cast<size_t>(r)];
        if (++k == kMaxMr) flush();
      }
    }
    if (k > 0) flush();
  }

  // 1b. the logit soft-cap, per row over its stored scores: s = softcap * tanh(s)
  for (int64_t r = 0; r < R; ++r) {
    const float cap = A[r / nq].softcap;
    if (cap == 0.0f) continue;
    const int64_t n = pl[r / nq].n;
    float* P = weights(r);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = m512::tail_mask(n - j);
      _mm512_mask_storeu_ps(P + j, k, _mm512_mul_ps(_mm512_set1_ps(cap), m512::tanh(_mm512_maskz_loadu_ps(k, P + j))));
    }
  }

  // 2. weights: max, exp, 16 partial sums
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = pl[r / nq].n;
    float* P = weights(r);
    __m512 vmx = _mm512_set1_ps(ninf);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = m512::tail_mask(n - j);
      vmx = _mm512_mask_max_ps(vmx, k, _mm512_maskz_loadu_ps(k, P + j), vmx);
    }
    const float mx = _mm512_reduce_max_ps(vmx);
    if (mx == ninf) {  // no keys or all -inf: zeros (flagged by a zero sum)
      sums[r] = 0.0f;
      continue;
    }
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = m512::tail_mask(n - j);
      const __m512 e = m512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, P + j), vm));
      _mm512_mask_storeu_ps(P + j, k, e);
      acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    sums[r] = m512::tree16(acc);
  }

  // 3. values, block by block; rows that see the same keys of a block share the pass
  alignas(64) float dv[kMaxHalfRow];  // a q8_0 block's value scales (value_scales)
  for (int64_t r = 0; r < R; ++r) {
    float* out = orow(r / nq, r % nq);
    for (int64_t d = 0; d < Sv; d += 16) _mm512_mask_storeu_ps(out + d, m512::tail_mask(Sv - d), _mm512_setzero_ps());
  }
  for (int64_t bi = H > L ? L / kKvBlock : 0; H > L && bi <= (H - 1) / kKvBlock; ++bi) {
    const int64_t p0 = bi * kKvBlock;
    bool seen = false;  // by some query of the tile (ranges may leave gaps; those table entries are unchecked)
    for (int64_t qi = 0; qi < Q && !seen; ++qi) seen = pl[qi].n > 0 && pl[qi].lo < p0 + kKvBlock && pl[qi].lo + pl[qi].n > p0;
    if (!seen) continue;
    if (bi < (H - 1) / kKvBlock) prefetch_rows(c, false, table[bi + 1], kvh, 0, kKvBlock);  // the next block's values
    const char* vblock = c.bytes_at(false, table[bi], kvh, 0);  // rows converted as vacc loads them
    if (elem == Elem::q8_0) value_scales(c, table[bi], kvh, dv);
    for (int64_t dc = 0; dc < Sv; dc += 64) {
      const int64_t rem = std::min<int64_t>(64, Sv - dc);
      const int nv = static_cast<int>((rem + 15) / 16);
      const __mmask16 last = m512::tail_mask(rem - 16 * (nv - 1));
      const float* w[kMaxNq];
      float* o[kMaxNq];
      int k = 0;
      int64_t s0 = 0, s1 = 0;  // the block's slots of the rows in w / o
      auto flush = [&] {
        if (k > 0) vacc_fn(elem, nv, k)(w, vblock + s0 * vrow, vrow, dc, s1 - s0, o, last, dv + s0);
        k = 0;
      };
      for (int64_t qi = 0; qi < Q; ++qi) {
        const int64_t lo = pl[qi].lo, hi = pl[qi].lo + pl[qi].n;
        const int64_t a = std::max(lo, p0) - p0, b = std::min(hi, p0 + kKvBlock) - p0;
        if (a >= b) continue;
        if (k > 0 && (a != s0 || b != s1)) flush();
        s0 = a, s1 = b;
        for (int64_t h = 0; h < nq; ++h) {
          const int64_t r = qi * nq + h;
          if (sums[r] == 0.0f) continue;  // zeros
          w[k] = weights(r) + (p0 + a - lo);
          o[k] = orow(qi, h) + dc;
          if (++k == kMaxNq) flush();
        }
      }
      flush();
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    if (sums[r] == 0.0f) continue;
    float* out = orow(r / nq, r % nq);
    const __m512 vs = _mm512_set1_ps(sums[r]);
    for (int64_t d = 0; d < Sv; d += 16) {
      const __mmask16 k = m512::tail_mask(Sv - d);
      _mm512_mask_storeu_ps(out + d, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, out + d), vs));
    }
  }
}

}  // namespace ggflow::cpu::detail
