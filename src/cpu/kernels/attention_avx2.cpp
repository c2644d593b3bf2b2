// AVX2 attention (attention.h), bit-identical to the scalar twin in attention.cpp.
//   scores: 8 keys at a time (4 key rows in flight), each key's 16 partial sums in two registers
//           (lanes 0-7 and 8-15), level w=8 as one add per key, then a transposed reduction doing
//           exactly tree16's remaining additions (w = 4, 2, 1) for the 8 keys;
//   weights: as softmax (16 partial sums over keys, two registers);
//   values: lanes over d, 32 dims (4 registers) of up to 3 queries per pass over a block's keys.
#include <algorithm>
#include <limits>

#include "cpu/kernels/attention.h"
#include "cpu/kernels/math_avx2.h"

namespace ggflow::cpu::detail {

namespace {

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

inline __m256i lane_mask(int v, int nv, __m256i last) { return v == nv - 1 ? last : _mm256_set1_epi32(-1); }

// For NQ queries at once: out_q[0, 8*NV) += sum over keys i < count of w_q[i] * (row i at
// vb + i*Sv), key order, one FMA chain per lane and query; the last register is masked.
template <int NV, int NQ>
void vacc(const float* const* w, const float* vb, int64_t Sv, int64_t count, float* const* out, __m256i last) {
  __m256 acc[NQ][NV];
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) acc[q][v] = _mm256_maskload_ps(out[q] + 8 * v, lane_mask(v, NV, last));
  for (int64_t i = 0; i < count; ++i) {
    const float* row = vb + i * Sv;
    for (int q = 0; q < NQ; ++q) {
      const __m256 p = _mm256_set1_ps(w[q][i]);
      for (int v = 0; v < NV; ++v)
        acc[q][v] = _mm256_fmadd_ps(p, _mm256_maskload_ps(row + 8 * v, lane_mask(v, NV, last)), acc[q][v]);
    }
  }
  for (int q = 0; q < NQ; ++q)
    for (int v = 0; v < NV; ++v) _mm256_maskstore_ps(out[q] + 8 * v, lane_mask(v, NV, last), acc[q][v]);
}

constexpr int kMaxNq = 3;  // queries per pass over a block's values (NQ*NV <= 12 of 16 registers)
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

void attention_avx2(const KvCache& c, const AttentionQuery& a, const AttnPlan& pl, float* scratch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t S = c.head_size, Sv = c.v_size, lo = pl.lo, hi = pl.lo + pl.n;
  float* sums = scratch + a.nq * pl.np;
  const int64_t b0 = lo / kKvBlock, b1 = pl.n > 0 ? (hi - 1) / kKvBlock + 1 : b0;
  const __m256 vscale = _mm256_set1_ps(a.scale), vninf = _mm256_set1_ps(ninf);

  // 1. scores
  for (int64_t bi = b0; bi < b1; ++bi) {
    const float* kblock = c.k + ((a.block_table[bi] * c.kv_heads + a.kv_head) * kKvBlock) * S;
    for (int64_t g = 0; g < kKvBlock; g += 8) {
      const int64_t p0 = bi * kKvBlock + g, p1 = p0 + 8;
      if (p1 <= lo || p0 >= hi) continue;
      for (int64_t qi = 0; qi < a.nq; ++qi) {
        const __m256 sc = _mm256_mul_ps(dots8(a.q + qi * a.q_stride, kblock + g * S, S), vscale);
        float* P = scratch + qi * pl.np;
        if (p0 >= lo && p1 <= hi) {
          _mm256_storeu_ps(P + (p0 - lo), sc);
        } else {
          alignas(32) float tmp[8];
          _mm256_store_ps(tmp, sc);
          for (int64_t p = std::max(p0, lo); p < std::min(p1, hi); ++p) P[p - lo] = tmp[p - p0];
        }
      }
    }
  }

  // 2. weights: max, exp, 16 partial sums (two registers)
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    float* P = scratch + qi * pl.np;
    __m256 vmx = vninf;
    for (int64_t j = 0; j < pl.n; j += 8) {
      const __m256i k = m256::tail_mask(pl.n - j);
      vmx = _mm256_max_ps(m256::select(_mm256_castsi256_ps(k), vninf, _mm256_maskload_ps(P + j, k)), vmx);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    if (mx == ninf) {
      sums[qi] = 0.0f;
      continue;
    }
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0, half = 0; j < pl.n; j += 8, half ^= 1) {
      const __m256i k = m256::tail_mask(pl.n - j);
      __m256 e = m256::exp(_mm256_sub_ps(_mm256_maskload_ps(P + j, k), vm));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
      _mm256_maskstore_ps(P + j, k, e);
      acc[half] = _mm256_add_ps(acc[half], e);
    }
    sums[qi] = m256::tree16(acc[0], acc[1]);
  }

  // 3. values
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    float* out = a.out + qi * a.out_stride;
    for (int64_t d = 0; d < Sv; d += 8) _mm256_maskstore_ps(out + d, m256::tail_mask(Sv - d), _mm256_setzero_ps());
  }
  for (int64_t bi = b0; bi < b1; ++bi) {
    const float* vblock = c.v + ((a.block_table[bi] * c.kv_heads + a.kv_head) * kKvBlock) * Sv;
    const int64_t s0 = std::max(lo, bi * kKvBlock) - bi * kKvBlock;
    const int64_t s1 = std::min(hi, (bi + 1) * kKvBlock) - bi * kKvBlock;
    for (int64_t dc = 0; dc < Sv; dc += 32) {
      const int64_t rem = std::min<int64_t>(32, Sv - dc);
      const int nv = static_cast<int>((rem + 7) / 8);
      const __m256i last = m256::tail_mask(rem - 8 * (nv - 1));
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
    const __m256 vs = _mm256_set1_ps(sums[qi]);
    for (int64_t d = 0; d < Sv; d += 8) {
      const __m256i k = m256::tail_mask(Sv - d);
      _mm256_maskstore_ps(out + d, k, _mm256_div_ps(_mm256_maskload_ps(out + d, k), vs));
    }
  }
}

}  // namespace ggflow::cpu::detail
