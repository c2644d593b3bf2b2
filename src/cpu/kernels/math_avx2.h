// AVX2+FMA mirror of math.h: the same operations in the same order on 8 lanes (bit-identical to
// the scalar twin). Include ONLY from *_avx2.cpp files (compiled with -mavx2 -mfma -mf16c).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/kernels/math.h"

namespace ggflow::cpu::m256 {

using namespace ggflow::cpu::math;

static inline __m256 splat(float v) { return _mm256_set1_ps(v); }
static inline __m256d splatd(double v) { return _mm256_set1_pd(v); }
static inline __m256 abs_(__m256 x) {
  return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF)));
}
static inline __m256 neg(__m256 x) {
  return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(x), _mm256_set1_epi32(static_cast<int>(0x80000000u))));
}
// blend(m, a, b): b where the mask lane is set, else a.
static inline __m256 select(__m256 mask, __m256 a, __m256 b) { return _mm256_blendv_ps(a, b, mask); }
static inline __m256 keep_nan(__m256 x, __m256 y) { return select(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), y, x); }

static inline __m256 exp_impl(__m256 x, float lo, int32_t k) {
  const __m256 xc = _mm256_min_ps(splat(kExpHi), _mm256_max_ps(splat(lo), x));
  const __m256 v = _mm256_add_ps(_mm256_mul_ps(xc, splat(kLog2e)), splat(kRoundMagic));
  const __m256i n = _mm256_add_epi32(
      _mm256_sub_epi32(_mm256_castps_si256(v), _mm256_set1_epi32(static_cast<int>(kRoundMagicBits))),
      _mm256_set1_epi32(k));
  const __m256 nf = _mm256_sub_ps(v, splat(kRoundMagic));
  __m256 r = _mm256_fmadd_ps(nf, splat(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(nf, splat(-kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(splat(kExpP0), r, splat(kExpP1));
  p = _mm256_fmadd_ps(p, r, splat(kExpP2));
  p = _mm256_fmadd_ps(p, r, splat(kExpP3));
  p = _mm256_fmadd_ps(p, r, splat(kExpP4));
  p = _mm256_fmadd_ps(p, r, splat(kExpP5));
  p = _mm256_fmadd_ps(p, r, splat(1.0f));
  p = _mm256_fmadd_ps(p, r, splat(1.0f));
  const __m256i n1 = _mm256_srai_epi32(n, 1);
  const __m256i n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
static inline __m256 exp(__m256 x) { return keep_nan(x, exp_impl(x, kExpLo, 0)); }

static inline __m256 tanh(__m256 x) {
  const __m256 a = abs_(x);
  const __m256 z = _mm256_mul_ps(a, a);
  __m256 p = _mm256_fmadd_ps(splat(kTanhP0), z, splat(kTanhP1));
  p = _mm256_fmadd_ps(p, z, splat(kTanhP2));
  p = _mm256_fmadd_ps(p, z, splat(kTanhP3));
  p = _mm256_fmadd_ps(p, z, splat(kTanhP4));
  const __m256 small = _mm256_fmadd_ps(p, _mm256_mul_ps(a, z), a);
  const __m256 e = exp_impl(_mm256_mul_ps(splat(-2.0f), a), kExpLo, 0);
  const __m256 large = _mm256_div_ps(_mm256_sub_ps(splat(1.0f), e), _mm256_add_ps(splat(1.0f), e));
  const __m256 y = select(_mm256_cmp_ps(a, splat(kTanhSmall), _CMP_LT_OQ), large, small);
  const __m256i sign = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return keep_nan(x, _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(y), sign)));
}

static inline __m256 sigmoid_weighted(__m256 x, __m256 xc, __m256 es) {
  const __m256 e = _mm256_mul_ps(es, splat(kTwoM64));
  const __m256 den = _mm256_add_ps(splat(1.0f), e);
  // x >= 0: x / den; else (xc * es) / den * 2^-64. One division for both (each lane divides its
  // own branch's numerator: the same operations as computing both and blending).
  const __m256 ge = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  const __m256 q = _mm256_div_ps(select(ge, _mm256_mul_ps(xc, es), x), den);
  return select(ge, _mm256_mul_ps(q, splat(kTwoM64)), q);
}

static inline __m256 silu(__m256 x) {
  const __m256 xc = _mm256_max_ps(splat(-200.0f), x);
  const __m256 es = exp_impl(neg(abs_(xc)), kExpScaledLo, kExpScaleK);
  return keep_nan(x, sigmoid_weighted(x, xc, es));
}

static inline __m128 phi_r4(__m128 t) {
  const __m256d td = _mm256_cvtps_pd(t);
  const __m256d ud = _mm256_div_pd(splatd(1.0), _mm256_fmadd_pd(td, splatd(kPhiA), splatd(1.0)));
  __m256d f = splatd(kPhiF[0]);
  for (int i = 1; i < kPhiTerms; ++i) f = _mm256_fmadd_pd(f, ud, splatd(kPhiF[i]));
  return _mm256_cvtpd_ps(_mm256_mul_pd(ud, f));
}
static inline __m256 join(__m128 lo, __m128 hi) { return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1); }
static inline __m128 lo4(__m256 v) { return _mm256_castps256_ps128(v); }
static inline __m128 hi4(__m256 v) { return _mm256_extractf128_ps(v, 1); }

static inline __m256 gelu_erf(__m256 x) {
  const __m256 xz = _mm256_min_ps(splat(kGeluClamp), _mm256_max_ps(splat(-kGeluClamp), x));
  const __m256 t = abs_(xz);
  const __m256 h = _mm256_mul_ps(t, t);
  const __m256 l = _mm256_fmsub_ps(t, t, h);
  __m256 e = exp_impl(_mm256_mul_ps(splat(-0.5f), h), kExpLo, 0);
  e = _mm256_fmadd_ps(e, _mm256_mul_ps(splat(-0.5f), l), e);
  const __m256 r = join(phi_r4(lo4(t)), phi_r4(hi4(t)));
  const __m256 pos = _mm256_mul_ps(x, _mm256_sub_ps(splat(1.0f), _mm256_mul_ps(e, r)));
  const __m256 negv = _mm256_mul_ps(_mm256_mul_ps(xz, r), e);
  return keep_nan(x, select(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ), negv, pos));
}

static inline void gelu_z4(__m128 xz, __m128& zh, __m128& zl) {
  const __m256d xd = _mm256_cvtps_pd(xz);
  const __m256d zd = _mm256_mul_pd(xd, _mm256_fmadd_pd(splatd(kGeluC2), _mm256_mul_pd(xd, xd), splatd(kGeluC1)));
  const __m256d az = _mm256_castsi256_pd(
      _mm256_and_si256(_mm256_castpd_si256(zd), _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)));
  zh = _mm256_cvtpd_ps(az);
  zl = _mm256_cvtpd_ps(_mm256_sub_pd(az, _mm256_cvtps_pd(zh)));
}

static inline __m256 gelu_tanh(__m256 x) {
  const __m256 xz = _mm256_min_ps(splat(kGeluTanhClamp), _mm256_max_ps(splat(-kGeluTanhClamp), x));
  __m128 zh0, zl0, zh1, zl1;
  gelu_z4(lo4(xz), zh0, zl0);
  gelu_z4(hi4(xz), zh1, zl1);
  const __m256 zh = join(zh0, zh1), zl = join(zl0, zl1);
  __m256 es = exp_impl(neg(zh), kExpScaledLo, kExpScaleK);
  es = _mm256_fmadd_ps(es, neg(zl), es);
  return keep_nan(x, sigmoid_weighted(x, xz, es));
}

// math::tree16 of 16 partial sums held as lanes 0-7 (lo) and 8-15 (hi).
static inline float tree16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// Integer mask with lanes [0, n) set (n in [0, 8]) for maskload / maskstore.
static inline __m256i tail_mask(int64_t n) {
  static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - (n > 8 ? 8 : n)));
}

template <class F>
static inline void map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));
  }
}
template <class F>
static inline void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
  }
}

}  // namespace ggflow::cpu::m256
