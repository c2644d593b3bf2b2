// AVX2 attention (attention.h), bit-identical to the scalar twin in attention.cpp, run over a tile
// of queries (one kv head, one block table; a single query is a tile of one):
//   scores: per 16-key chunk (two halves of 8), for the rows whose range meets it:
//           - few rows: per row and half, 4 key rows in flight, each key's 16 partial sums in two registers
//             (lanes 0-7 and 8-15), level w=8 as one add per key, then a transposed reduction
//             doing exactly tree16's remaining additions (w = 4, 2, 1) for the 8 keys;
//           - many rows: the chunk is transposed once (KT[d] = dim d of the 16 keys); per row
//             and half, partial i of its 8 keys is one register, FMA chain over d = i, i+16, ...
//             from +0, and tree16 adds the 16 registers lane-wise (scores_t), 2 rows x 2 halves
//             at a time (each KT load and q broadcast used twice);
//           scores outside a row's range are never stored; the scale is detail::score_scale
//           (scale, or scale / softcap);
//   soft-cap: per row with softcap != 0, s = softcap * tanh(s) over its stored scores (m256::tanh);
//   weights: per row, as softmax (16 partial sums over keys, two registers);
//   values: per block, lanes over d, 32 dims (4 registers) of up to 3 rows per pass over the
//           block's keys (rows that see the same keys of the block).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/kernels/attention.h"
#include "cpu/kernels/math_avx2.h"

namespace ggflow::cpu::detail {

namespace {

// A masked store; maskstore is slow on some CPUs (AMD), so a full mask takes a plain store.
inline void store_lanes(float* p, __m256i m, __m256 v) {
  if (_mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, m, v);
}

// V[k] holds key k's 8 level-1 sums (acc[i] + acc[i+8]); returns lane k = the rest of tree16.
inline __m256 reduce8x8(const __m256* V) {
  __m256 C[4], D[2];
  for (int m = 0; m < 4; ++m)  // C[m]: half 0 key 2m, half 1 key 2m+1 (w = 4 done)
    C[m] = _mm256_add_ps(_mm256_permute2f128_ps(V[2 * m], V[2 * m + 1], 0x20),
                         _mm256_permute2f128_ps(V[2 * m], V[2 * m + 1], 0x31));
  for (int o = 0; o < 2; ++o)  // D[o]: half h = [key 4o+h (2 lanes), key 4o+2+h (2 lanes)] (w = 2 done)
    D[o] = _mm256_add_ps(_mm256_shuffle_ps(C[2 * o], C[2 * o + 1], 0x44), _mm256_shuffle_ps(C[2 * o], C[2 * o + 1], 0xEE));
  // E lane 4h + r = key 2r + h (w = 1 done); permute to lane k = key k.
  const __m256 E = _mm256_add_ps(_mm256_shuffle_ps(D[0], D[1], 0x88), _mm256_shuffle_ps(D[0], D[1], 0xDD));
  return _mm256_permutevar8x32_ps(E, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Level-1 sums of 4 keys (rows kb + r*S, r < 4) with q, into V[0..4).
inline void dots4(const float* q, const float* kb, int64_t S, __m256* V) {
  __m256 lo[4], hi[4];
  for (int r = 0; r < 4; ++r) lo[r] = _mm256_setzero_ps(), hi[r] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 16 <= S; d += 16) {
    const __m256 ql = _mm256_loadu_ps(q + d), qh = _mm256_loadu_ps(q + d + 8);
    for (int r = 0; r < 4; ++r) {
      lo[r] = _mm256_fmadd_ps(ql, _mm256_loadu_ps(kb + r * S + d), lo[r]);
      hi[r] = _mm256_fmadd_ps(qh, _mm256_loadu_ps(kb + r * S + d + 8), hi[r]);
    }
  }
  if (d < S) {  // zero-filled lanes add +0 to partials that are never -0
    const int64_t rem = S - d;
    const __m256i ml = m256::tail_mask(rem);
    const __m256 ql = _mm256_maskload_ps(q + d, ml);
    for (int r = 0; r < 4; ++r) lo[r] = _mm256_fmadd_ps(ql, _mm256_maskload_ps(kb + r * S + d, ml), lo[r]);
    if (rem > 8) {
      const __m256i mh = m256::tail_mask(rem - 8);
      const __m256 qh = _mm256_maskload_ps(q + d + 8, mh);
      for (int r = 0; r < 4; ++r) hi[r] = _mm256_fmadd_ps(qh, _mm256_maskload_ps(kb + r * S + d + 8, mh), hi[r]);
    }
  }
  for (int r = 0; r < 4; ++r) V[r] = _mm256_add_ps(lo[r], hi[r]);
}

inline __m256 dots8(const float* q, const float* kb, int64_t S) {
  __m256 V[8];
  dots4(q, kb, S, V);
  dots4(q, kb + 4 * S, S, V + 4);
  return reduce8x8(V);
}

// ---- transposed scores

constexpr int64_t kMaxTS = 256;  // head sizes up to this take the transposed path (KT on the stack)
constexpr int kMinTRows = 8;     // ... when at least this many rows need the chunk

// KT[d*16 + 8h + k] = dim d of key row 8h + k (kb + (8h+k)*S), d < round_up(S, 8) (dims past S
// are zero): the 16 keys of a chunk, two halves of 8.
inline void transpose_chunk(const float* kb, int64_t S, float* KT) {
  for (int hf = 0; hf < 2; ++hf)
    for (int64_t d0 = 0; d0 < S; d0 += 8) {
      const __m256i m = m256::tail_mask(S - d0);
      __m256 r[8], t[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_maskload_ps(kb + (8 * hf + k) * S + d0, m);
      for (int i = 0; i < 4; ++i) {  // t[2i], t[2i+1]: rows 2i, 2i+1 interleaved, columns 4h+{0,1} / 4h+{2,3}
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
      }
      for (int i = 0; i < 2; ++i) {  // r[4i+j], 128-bit half h: rows 4i..4i+3 at column 4h+j
        r[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
      }
      for (int j = 0; j < 4; ++j) {
        _mm256_store_ps(KT + (d0 + j) * 16 + 8 * hf, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));      // column j
        _mm256_store_ps(KT + (d0 + 4 + j) * 16 + 8 * hf, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));  // column 4 + j
      }
    }
}

#define GGFLOW_INLINE inline __attribute__((always_inline))

// acc_i + acc_{i+8} (tree16's first level) for MR rows x the chunk's two halves of 8 keys
// (output 2m + h): acc_i = FMA chain over d = i, i+16, ... < S in order, from +0. SC: S known at
// compile time (the loops unroll), or 0.
template <int MR, int SC>
GGFLOW_INLINE void pair_sums(const float* const* q, const float* KT, int64_t Srt, int64_t i, __m256* r) {
  const int64_t S = SC > 0 ? SC : Srt;
  __m256 a[2 * MR], b[2 * MR];
  for (int m = 0; m < 2 * MR; ++m) a[m] = _mm256_setzero_ps(), b[m] = _mm256_setzero_ps();
  int64_t d = i;
#pragma GCC unroll 16
  for (; d + 8 < S; d += 16) {
    const __m256 k00 = _mm256_load_ps(KT + d * 16), k01 = _mm256_load_ps(KT + d * 16 + 8);
    const __m256 k10 = _mm256_load_ps(KT + (d + 8) * 16), k11 = _mm256_load_ps(KT + (d + 8) * 16 + 8);
    for (int m = 0; m < MR; ++m) {
      const __m256 q0 = _mm256_broadcast_ss(q[m] + d), q1 = _mm256_broadcast_ss(q[m] + d + 8);
      a[2 * m] = _mm256_fmadd_ps(q0, k00, a[2 * m]);
      a[2 * m + 1] = _mm256_fmadd_ps(q0, k01, a[2 * m + 1]);
      b[2 * m] = _mm256_fmadd_ps(q1, k10, b[2 * m]);
      b[2 * m + 1] = _mm256_fmadd_ps(q1, k11, b[2 * m + 1]);
    }
  }
  if (d < S) {
    const __m256 k00 = _mm256_load_ps(KT + d * 16), k01 = _mm256_load_ps(KT + d * 16 + 8);
    for (int m = 0; m < MR; ++m) {
      const __m256 q0 = _mm256_broadcast_ss(q[m] + d);
      a[2 * m] = _mm256_fmadd_ps(q0, k00, a[2 * m]);
      a[2 * m + 1] = _mm256_fmadd_ps(q0, k01, a[2 * m + 1]);
    }
  }
  for (int m = 0; m < 2 * MR; ++m) r[m] = _mm256_add_ps(a[m], b[m]);
}

// tree16's node (I, W): W = 8: acc_I + acc_{I+8}; else node(I, 2W) + node(I + W, 2W).
template <int MR, int SC, int I, int W>
GGFLOW_INLINE void tree_node(const float* const* q, const float* KT, int64_t S, __m256* r) {
  if constexpr (W == 8) {
    pair_sums<MR, SC>(q, KT, S, I, r);
  } else {
    __m256 x[2 * MR], y[2 * MR];
    tree_node<MR, SC, I, 2 * W>(q, KT, S, x);
    tree_node<MR, SC, I + W, 2 * W>(q, KT, S, y);
    for (int m = 0; m < 2 * MR; ++m) r[m] = _mm256_add_ps(x[m], y[m]);
  }
}

// The scores of MR rows (q[m], scale[m]) on a transposed chunk, stored to p[m] (two halves) under
// mask[2m + h].
template <int MR, int SC>
void scores_t(const float* const* q, const float* KT, int64_t S, const float* scale, float* const* p,
              const __m256i* mask) {
  __m256 r[2 * MR];
  tree_node<MR, SC, 0, 1>(q, KT, S, r);
  for (int m = 0; m < MR; ++m)
    for (int h = 0; h < 2; ++h)
      store_lanes(p[m] + 8 * h, mask[2 * m + h], _mm256_mul_ps(r[2 * m + h], _mm256_set1_ps(scale[m])));
}

constexpr int kMaxMr = 2;  // rows per pass over a transposed chunk
using ScoresFn = void (*)(const float* const*, const float*, int64_t, const float*, float* const*, const __m256i*);
template <int SC>
constexpr ScoresFn scores_fns[kMaxMr] = {scores_t<1, SC>, scores_t<2, SC>};
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

// ---- values

// ---- q8_0 scores (attention.h): integer dot products per 32-value block

// Half h (keys 8h .. 8h + 7) of a 16-key chunk of a q8_0 cache as bytes, lanes over keys:
// KS[g] lane k = dims [4g, 4g + 4) of key k's codes, KA[g] their absolute values (codes are in
// [-127, 127]), g < S / 4; dk[b] lane k = key k's scale of block b as f32 (vcvtph2ps: from_f16_quiet).
void transpose_q8(const KvCache& c, int64_t block, int64_t kvh, int64_t slot, int64_t S, __m256i* KS, __m256i* KA, __m256* dk) {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(c.bytes_at(true, block, kvh, slot));
  const int64_t rb = c.rows_bytes(true, 1);
  for (int64_t b = 0; b < S / 32; ++b) {
    const uint8_t* p = base + b * 34;
    uint16_t d[8];
    for (int k = 0; k < 8; ++k) std::memcpy(&d[k], p + k * rb, 2);
    dk[b] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
    __m256i z[8], t[8], u[8];
    for (int k = 0; k < 8; ++k) z[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 + k * rb));
    for (int i = 0; i < 4; ++i)  // per 128-bit half: keys 2i, 2i+1 interleaved
      t[2 * i] = _mm256_unpacklo_epi32(z[2 * i], z[2 * i + 1]), t[2 * i + 1] = _mm256_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    for (int h2 = 0; h2 < 2; ++h2) {  // u[4 h2 + j]: dword j (low half) and j + 4 (high half) of keys 4 h2 .. 4 h2 + 3
      u[4 * h2 + 0] = _mm256_unpacklo_epi64(t[4 * h2 + 0], t[4 * h2 + 2]);
      u[4 * h2 + 1] = _mm256_unpackhi_epi64(t[4 * h2 + 0], t[4 * h2 + 2]);
      u[4 * h2 + 2] = _mm256_unpacklo_epi64(t[4 * h2 + 1], t[4 * h2 + 3]);
      u[4 * h2 + 3] = _mm256_unpackhi_epi64(t[4 * h2 + 1], t[4 * h2 + 3]);
    }
    for (int j = 0; j < 4; ++j) {
      KS[b * 8 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
      KS[b * 8 + j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
    for (int g = 0; g < 8; ++g) KA[b * 8 + g] = _mm256_abs_epi8(KS[b * 8 + g]);
  }
}

// The scores of MR quantized rows on a transposed half chunk (8 keys), stored to p[m] under
// mask[m]: per block, i_b = Σ_g madd(maddubs(|k|, sign(q, k)), 1) (pairs of products <= 2 *
// 127 * 127: no saturation; int32 sums exact in any order), then acc = fma((float) i_b, dk_b *
// dq_b, acc) in block order from +0; times scale.
template <int MR>
void scores_q8(const QuantRow* const* q, const __m256i* KS, const __m256i* KA, const __m256* dk, int64_t S, const float* scale,
               float* const* p, const __m256i* mask) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR];
  for (int m = 0; m < MR; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < S / 32; ++b) {
    __m256i i0[MR], i1[MR];
    for (int m = 0; m < MR; ++m) i0[m] = _mm256_setzero_si256(), i1[m] = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += 2) {
      for (int m = 0; m < MR; ++m) {
        int32_t w0, w1;
        std::memcpy(&w0, q[m]->q + b * 32 + 4 * g, 4);
        std::memcpy(&w1, q[m]->q + b * 32 + 4 * g + 4, 4);
        const __m256i p0 = _mm256_maddubs_epi16(KA[b * 8 + g], _mm256_sign_epi8(_mm256_set1_epi32(w0), KS[b * 8 + g]));
        const __m256i p1 = _mm256_maddubs_epi16(KA[b * 8 + g + 1], _mm256_sign_epi8(_mm256_set1_epi32(w1), KS[b * 8 + g + 1]));
        i0[m] = _mm256_add_epi32(i0[m], _mm256_madd_epi16(p0, ones));
        i1[m] = _mm256_add_epi32(i1[m], _mm256_madd_epi16(p1, ones));
      }
    }
    for (int m = 0; m < MR; ++m)
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0[m], i1[m])), _mm256_mul_ps(dk[b], _mm256_set1_ps(q[m]->d[b])),
                               acc[m]);
  }
  for (int m = 0; m < MR; ++m)
    store_lanes(p[m], mask[m],
                q[m]->finite ? _mm256_mul_ps(acc[m], _mm256_set1_ps(scale[m])) : _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()));
}
using ScoresQ8Fn = void (*)(const QuantRow* const*, const __m256i*, const __m256i*, const __m256*, int64_t, const float*,
                            float* const*, const __m256i*);
constexpr ScoresQ8Fn scores_q8_fns[2] = {scores_q8<1>, scores_q8<2>};

// ---- values

inline __m256 load_lanes(const float* p, int v, int nv, __m256i last) {
  return v == nv - 1 ? _mm256_maskload_ps(p, last) : _mm256_loadu_ps(p);
}

// For NQ rows at once: out_q[0, 8*NV) += sum over keys i < count of w_q[i] * (row i at
// vb + i*Sv), key order, one FMA chain per lane and row; the last register is masked.
template <int NV, int NQ>
void vacc(const float* const* w, const float* vb, int64_t Sv, int64_t count, float* const* out, __m256i last) {
  const float* wq[NQ];
  float* oq[NQ];
  for (int q = 0; q < NQ; ++q) wq[q] = w[q], oq[q] = out[q];
  __m256 acc[NQ][NV];
#pragma GCC unroll 4
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[q][v] = load_lanes(oq[q] + 8 * v, v, NV, last);
  for (int64_t i = 0; i < count; ++i) {
    const float* row = vb + i * Sv;
    const __m256 vl = _mm256_maskload_ps(row + 8 * (NV - 1), last);
#pragma GCC unroll 4
    for (int q = 0; q < NQ; ++q) {
      const __m256 p = _mm256_broadcast_ss(wq[q] + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[q][v] = _mm256_fmadd_ps(p, v == NV - 1 ? vl : _mm256_loadu_ps(row + 8 * v), acc[q][v]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < NQ; ++q)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v == NV - 1) store_lanes(oq[q] + 8 * v, last, acc[q][v]);
      else _mm256_storeu_ps(oq[q] + 8 * v, acc[q][v]);
    }
}

constexpr int kMaxNq = 3;  // rows per pass over a block's values (NQ*NV <= 12 of 16 registers)
using VaccFn = void (*)(const float* const*, const float*, int64_t, int64_t, float* const*, __m256i);
template <int NV>
constexpr VaccFn vacc_fns[kMaxNq] = {vacc<NV, 1>, vacc<NV, 2>, vacc<NV, 3>};
VaccFn vacc_fn(int nv, int nq) {
  switch (nv) {
    case 1: return vacc_fns<1>[nq - 1];
    case 2: return vacc_fns<2>[nq - 1];
    case 3: return vacc_fns<3>[nq - 1];
    default: return vacc_fns<4>[nq - 1];
  }
}

}  // namespace

void attention_tile_avx2(const KvCache& c, const AttnTile& t) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const AttentionQuery* A = t.a;
  const AttnPlan* pl = t.pl;
  const int64_t Q = t.count, nq = A[0].nq, R = Q * nq, S = c.head_size, Sv = c.v_size, kvh = A[0].kv_head;
  const int32_t* table = A[0].block_table;
  float* sums = t.scratch + R * t.stride;
  auto weights = [&](int64_t r) { return t.scratch + r * t.stride + 16; };
  auto orow = [&](int64_t qi, int64_t h) { return A[qi].out + h * A[qi].out_stride; };
  const __m256 vninf = _mm256_set1_ps(ninf);
  // the keys the tile sees: [L, H)
  int64_t L = std::numeric_limits<int64_t>::max(), H = 0;
  for (int64_t qi = 0; qi < Q; ++qi)
    if (pl[qi].n > 0) L = std::min(L, pl[qi].lo), H = std::max(H, pl[qi].lo + pl[qi].n);

  // an f16 cache's K chunk and V block as f32 (check_cache: rows of at most kMaxHalfRow)
  alignas(32) float kconv[16 * kMaxHalfRow];
  alignas(32) float vconv[kKvBlock * kMaxHalfRow];

  // 1. scores, chunk by chunk; each chunk's keys are loaded for all the rows that see them
  alignas(32) float KT[kMaxTS * 16];
  const ScoresFn* sfns = scores_fns_for(S);
  // a q8_0 cache: the rows quantized once, the chunk's halves transposed as bytes
  static thread_local std::vector<QuantRow> qrows;
  __m256i KS[2][kMaxHalfRow / 4], KA[2][kMaxHalfRow / 4];
  __m256 dk[2][kMaxHalfRow / 32];
  if (c.q8()) {
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
    const bool q8 = c.q8(), tr = !q8 && S <= kMaxTS && active >= kMinTRows;
    const float* kb = nullptr;  // the chunk's f32 rows, when not q8_0
    if (q8)
      for (int h = 0; h < 2; ++h) transpose_q8(c, table[c0 / kKvBlock], kvh, c0 % kKvBlock + 8 * h, S, KS[h], KA[h], dk[h]);
    else kb = cache_rows(Isa::avx2, c, true, table[c0 / kKvBlock], kvh, c0 % kKvBlock, 16, kconv);
    if (tr) transpose_chunk(kb, S, KT);
    const float* qs[kMaxMr];
    const QuantRow* qq[kMaxMr];
    float* ps[kMaxMr];
    __m256i ms[2 * kMaxMr];
    float scl[kMaxMr];
    int k = 0;
    auto flush = [&] {
      if (q8) {
        for (int h = 0; h < 2; ++h) {
          float* ph[kMaxMr];
          __m256i mh[kMaxMr];
          for (int m = 0; m < k; ++m) ph[m] = ps[m] + 8 * h, mh[m] = ms[2 * m + h];
          scores_q8_fns[k - 1](qq, KS[h], KA[h], dk[h], S, scl, ph, mh);
        }
      } else if (tr) {
        sfns[k - 1](qs, KT, S, scl, ps, ms);
      } else {
        for (int m = 0; m < k; ++m)
          for (int h = 0; h < 2; ++h)  // s = dot * score_scale
            store_lanes(ps[m] + 8 * h, ms[2 * m + h], _mm256_mul_ps(dots8(qs[m], kb + 8 * h * S, S), _mm256_set1_ps(scl[m])));
      }
      k = 0;
    };
    for (int64_t qi = 0; qi < Q; ++qi) {
      const int64_t lo = pl[qi].lo, hi = pl[qi].lo + pl[qi].n;
      if (pl[qi].n == 0 || lo >= c0 + 16 || hi <= c0) continue;
      // lanes [lo - c0, hi - c0) of the chunk, 8 per half
      const __m256i m0 = _mm256_andnot_si256(m256::tail_mask(std::max<int64_t>(0, lo - c0)), m256::tail_mask(hi - c0));
      const __m256i m1 = _mm256_andnot_si256(m256::tail_mask(std::max<int64_t>(0, lo - c0 - 8)),
                                             m256::tail_mask(std::max<int64_t>(0, hi - c0 - 8)));
      for (int64_t h = 0; h < nq; ++h) {
        const int64_t r = qi * nq + h;
        qs[k] = A[qi].q + h * A[qi].q_stride, ps[k] = weights(r) + (c0 - lo), ms[2 * k] = m0, ms[2 * k + 1] = m1, scl[k] = score_scale(A[qi]);
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
    for (int64_t j = 0; j < n; j += 8) {
      const __m256i k = m256::tail_mask(n - j);
      store_lanes(P + j, k, _mm256_mul_ps(_mm256_set1_ps(cap), m256::tanh(_mm256_maskload_ps(P + j, k))));
    }
  }

  // 2. weights: max, exp, 16 partial sums (two registers)
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = pl[r / nq].n;
    float* P = weights(r);
    __m256 vmx = vninf;
    for (int64_t j = 0; j < n; j += 8) {
      const __m256i k = m256::tail_mask(n - j);
      vmx = _mm256_max_ps(m256::select(_mm256_castsi256_ps(k), vninf, _mm256_maskload_ps(P + j, k)), vmx);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    if (mx == ninf) {
      sums[r] = 0.0f;
      continue;
    }
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0, half = 0; j < n; j += 8, half ^= 1) {
      const __m256i k = m256::tail_mask(n - j);
      __m256 e = m256::exp(_mm256_sub_ps(_mm256_maskload_ps(P + j, k), vm));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
      store_lanes(P + j, k, e);
      acc[half] = _mm256_add_ps(acc[half], e);
    }
    sums[r] = m256::tree16(acc[0], acc[1]);
  }

  // 3. values, block by block; rows that see the same keys of a block share the pass
  for (int64_t r = 0; r < R; ++r) {
    float* out = orow(r / nq, r % nq);
    for (int64_t d = 0; d < Sv; d += 8) store_lanes(out + d, m256::tail_mask(Sv - d), _mm256_setzero_ps());
  }
  for (int64_t bi = H > L ? L / kKvBlock : 0; H > L && bi <= (H - 1) / kKvBlock; ++bi) {
    const int64_t p0 = bi * kKvBlock;
    bool seen = false;  // by some query of the tile (ranges may leave gaps; those table entries are unchecked)
    for (int64_t qi = 0; qi < Q && !seen; ++qi) seen = pl[qi].n > 0 && pl[qi].lo < p0 + kKvBlock && pl[qi].lo + pl[qi].n > p0;
    if (!seen) continue;
    if (bi < (H - 1) / kKvBlock) prefetch_rows(c, false, table[bi + 1], kvh, 0, kKvBlock);  // the next block's values
    const float* vblock = cache_rows(Isa::avx2, c, false, table[bi], kvh, 0, kKvBlock, vconv);
    for (int64_t dc = 0; dc < Sv; dc += 32) {
      const int64_t rem = std::min<int64_t>(32, Sv - dc);
      const int nv = static_cast<int>((rem + 7) / 8);
      const __m256i last = m256::tail_mask(rem - 8 * (nv - 1));
      const float* w[kMaxNq];
      float* o[kMaxNq];
      int k = 0;
      int64_t s0 = 0, s1 = 0;  // the block's slots of the rows in w / o
      auto flush = [&] {
        if (k > 0) vacc_fn(nv, k)(w, vblock + s0 * Sv + dc, Sv, s1 - s0, o, last);
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
    const __m256 vs = _mm256_set1_ps(sums[r]);
    for (int64_t d = 0; d < Sv; d += 8) {
      const __m256i k = m256::tail_mask(Sv - d);
      store_lanes(out + d, k, _mm256_div_ps(_mm256_maskload_ps(out + d, k), vs));
    }
  }
}

}  // namespace ggflow::cpu::detail
