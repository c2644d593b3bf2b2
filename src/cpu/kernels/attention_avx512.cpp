// AVX-512 attention (attention.h), bit-identical to the scalar twin in attention.cpp.
//   scores: 16 keys at a time (slots 0-15 and 16-31 of a block), one register of 16 partial sums
//           per key, then a transposed reduction doing exactly tree16's additions for all 16 keys;
//   weights: as softmax (16 partial sums over keys);
//   values: lanes over d, 64 dims (4 registers) of up to 6 queries per pass over a block's keys
//           (enough independent FMA chains to hide the latency), the running sums kept in the
//           output rows between blocks.
#include <algorithm>
#include <limits>

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

// For NQ queries at once: out_q[0, 16*NV) += sum over keys i < count of w_q[i] * (row i at
// vb + i*Sv), key order, one FMA chain per lane and query (NQ*NV independent chains); the last
// register of each row is masked by `last`.
template <int NV, int NQ>
void vacc(const float* const* w, const float* vb, int64_t Sv, int64_t count, float* const* out, __mmask16 last) {
  __m512 acc[NQ][NV];
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) acc[q][v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, out[q] + 16 * v);
  for (int64_t i = 0; i < count; ++i) {
    const float* row = vb + i * Sv;
    __m512 vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = _mm512_maskz_loadu_ps(v == NV - 1 ? last : 0xFFFF, row + 16 * v);
    for (int q = 0; q < NQ; ++q) {
      const __m512 p = _mm512_set1_ps(w[q][i]);
      for (int v = 0; v < NV; ++v) acc[q][v] = _mm512_fmadd_ps(p, vv[v], acc[q][v]);
    }
  }
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(out[q] + 16 * v, v == NV - 1 ? last : 0xFFFF, acc[q][v]);
}

constexpr int kMaxNq = 6;  // queries per pass over a block's values (NQ*NV + NV <= 28 registers)
using VaccFn = void (*)(const float* const*, const float*, int64_t, int64_t, float* const*, __mmask16);
template <int NV>
constexpr VaccFn vacc_fns[kMaxNq] = {vacc<NV, 1>, vacc<NV, 2>, vacc<NV, 3>, vacc<NV, 4>, vacc<NV, 5>, vacc<NV, 6>};
VaccFn vacc_fn(int nv, int nq) {
  switch (nv) {
    case 1: return vacc_fns<1>[nq - 1];
    case 2: return vacc_fns<2>[nq - 1];
    case 3: return vacc_fns<3>[nq - 1];
    default: return vacc_fns<4>[nq - 1];
  }
}

}  // namespace

void attention_avx512(const KvCache& c, const AttentionQuery& a, const AttnPlan& pl, float* scratch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t S = c.head_size, Sv = c.v_size, lo = pl.lo, hi = pl.lo + pl.n;
  float* sums = scratch + a.nq * pl.np;
  const int64_t b0 = lo / kKvBlock, b1 = pl.n > 0 ? (hi - 1) / kKvBlock + 1 : b0;
  const __m512 vscale = _mm512_set1_ps(a.scale);

  // 1. scores
  for (int64_t bi = b0; bi < b1; ++bi) {
    const float* kblock = c.k + ((a.block_table[bi] * c.kv_heads + a.kv_head) * kKvBlock) * S;
    for (int64_t g = 0; g < kKvBlock; g += 16) {
      const int64_t p0 = bi * kKvBlock + g, p1 = p0 + 16;
      if (p1 <= lo || p0 >= hi) continue;
      for (int64_t qi = 0; qi < a.nq; ++qi) {
        const __m512 sc = _mm512_mul_ps(dots16(a.q + qi * a.q_stride, kblock + g * S, S), vscale);
        float* P = scratch + qi * pl.np;
        if (p0 >= lo && p1 <= hi) {
          _mm512_storeu_ps(P + (p0 - lo), sc);
        } else {
          alignas(64) float tmp[16];
          _mm512_store_ps(tmp, sc);
          for (int64_t p = std::max(p0, lo); p < std::min(p1, hi); ++p) P[p - lo] = tmp[p - p0];
        }
      }
    }
  }

  // 2. weights: max, exp, 16 partial sums
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    float* P = scratch + qi * pl.np;
    __m512 vmx = _mm512_set1_ps(ninf);
    for (int64_t j = 0; j < pl.n; j += 16) {
      const __mmask16 k = m512::tail_mask(pl.n - j);
      vmx = _mm512_mask_max_ps(vmx, k, _mm512_maskz_loadu_ps(k, P + j), vmx);
    }
    const float mx = _mm512_reduce_max_ps(vmx);
    if (mx == ninf) {  // no keys or all -inf: zeros (flagged by a zero sum)
      sums[qi] = 0.0f;
      continue;
    }
    const __m512 vm = _mm512_set1_ps(mx);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < pl.n; j += 16) {
      const __mmask16 k = m512::tail_mask(pl.n - j);
      const __m512 e = m512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, P + j), vm));
      _mm512_mask_storeu_ps(P + j, k, e);
      acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    sums[qi] = m512::tree16(acc);
  }

  // 3. values
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    float* out = a.out + qi * a.out_stride;
    for (int64_t d = 0; d < Sv; d += 16)
      _mm512_mask_storeu_ps(out + d, m512::tail_mask(Sv - d), _mm512_setzero_ps());
  }
  for (int64_t bi = b0; bi < b1; ++bi) {
    const float* vblock = c.v + ((a.block_table[bi] * c.kv_heads + a.kv_head) * kKvBlock) * Sv;
    const int64_t s0 = std::max(lo, bi * kKvBlock) - bi * kKvBlock;
    const int64_t s1 = std::min(hi, (bi + 1) * kKvBlock) - bi * kKvBlock;
    for (int64_t dc = 0; dc < Sv; dc += 64) {
      const int64_t rem = std::min<int64_t>(64, Sv - dc);
      const int nv = static_cast<int>((rem + 15) / 16);
      const __mmask16 last = m512::tail_mask(rem - 16 * (nv - 1));
      const float* w[kMaxNq];
      float* o[kMaxNq];
      int k = 0;
      for (int64_t qi = 0; qi < a.nq; ++qi) {
        if (sums[qi] == 0.0f) continue;  // zeros
        w[k] = scratch + qi * pl.np + (bi * kKvBlock + s0 - lo);
        o[k] = a.out + qi * a.out_stride + dc;
        if (++k == kMaxNq) {
          vacc_fn(nv, k)(w, vblock + s0 * Sv + dc, Sv, s1 - s0, o, last);
          k = 0;
        }
      }
      if (k > 0) vacc_fn(nv, k)(w, vblock + s0 * Sv + dc, Sv, s1 - s0, o, last);
    }
  }
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    if (sums[qi] == 0.0f) continue;
    float* out = a.out + qi * a.out_stride;
    const __m512 vs = _mm512_set1_ps(sums[qi]);
    for (int64_t d = 0; d < Sv; d += 16) {
      const __mmask16 k = m512::tail_mask(Sv - d);
      _mm512_mask_storeu_ps(out + d, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, out + d), vs));
    }
  }
}

}  // namespace ggflow::cpu::detail
