// AVX-512 mirror of math.h: the same operations in the same order on 16 lanes (bit-identical to
// the scalar twin). Include ONLY from *_avx512.cpp files (compiled with the AVX-512 flags).
#pragma once

#include <immintrin.h>

// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (the `__Y = __Y` idiom of
// _mm512_undefined_*) wherever they are inlined: a known false positive, silenced for the
// translation units that include this header (only *_avx512.cpp files).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdint>

#include "cpu/kernels/math.h"

namespace ggflow::cpu::m512 {

using namespace ggflow::cpu::math;

static inline __m512 splat(float v) { return _mm512_set1_ps(v); }
static inline __m512d splatd(double v) { return _mm512_set1_pd(v); }
static inline __m512 abs_(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
}
static inline __m512 neg(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}
// NaN lanes of x pass through unchanged (math.h's NaN policy).
static inline __m512 keep_nan(__m512 x, __m512 y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

static inline __m512 exp_impl(__m512 x, float lo, int32_t k) {
  const __m512 xc = _mm512_min_ps(splat(kExpHi), _mm512_max_ps(splat(lo), x));
  const __m512 v = _mm512_add_ps(_mm512_mul_ps(xc, splat(kLog2e)), splat(kRoundMagic));
  const __m512i n = _mm512_add_epi32(
      _mm512_sub_epi32(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(kRoundMagicBits))),
      _mm512_set1_epi32(k));
  const __m512 nf = _mm512_sub_ps(v, splat(kRoundMagic));
  __m512 r = _mm512_fmadd_ps(nf, splat(-kLn2Hi), xc);
  r = _mm512_fmadd_ps(nf, splat(-kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(splat(kExpP0), r, splat(kExpP1));
  p = _mm512_fmadd_ps(p, r, splat(kExpP2));
  p = _mm512_fmadd_ps(p, r, splat(kExpP3));
  p = _mm512_fmadd_ps(p, r, splat(kExpP4));
  p = _mm512_fmadd_ps(p, r, splat(kExpP5));
  p = _mm512_fmadd_ps(p, r, splat(1.0f));
  p = _mm512_fmadd_ps(p, r, splat(1.0f));
  const __m512i n1 = _mm512_srai_epi32(n, 1);
  const __m512i n2 = _mm512_sub_epi32(n, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}
static inline __m512 exp(__m512 x) { return keep_nan(x, exp_impl(x, kExpLo, 0)); }

static inline __m512 tanh(__m512 x) {
  const __m512 a = abs_(x);
  const __m512 z = _mm512_mul_ps(a, a);
  __m512 p = _mm512_fmadd_ps(splat(kTanhP0), z, splat(kTanhP1));
  p = _mm512_fmadd_ps(p, z, splat(kTanhP2));
  p = _mm512_fmadd_ps(p, z, splat(kTanhP3));
  p = _mm512_fmadd_ps(p, z, splat(kTanhP4));
  const __m512 small = _mm512_fmadd_ps(p, _mm512_mul_ps(a, z), a);
  const __m512 e = exp_impl(_mm512_mul_ps(splat(-2.0f), a), kExpLo, 0);
  const __m512 large = _mm512_div_ps(_mm512_sub_ps(splat(1.0f), e), _mm512_add_ps(splat(1.0f), e));
  const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, splat(kTanhSmall), _CMP_LT_OQ), large, small);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return keep_nan(x, _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign)));
}

static inline __m512 sigmoid_weighted(__m512 x, __m512 xc, __m512 es) {
  const __m512 e = _mm512_mul_ps(es, splat(kTwoM64));
  const __m512 den = _mm512_add_ps(splat(1.0f), e);
  // x >= 0: x / den; else (xc * es) / den * 2^-64. One division for both (each lane divides its
  // own branch's numerator: the same operations as computing both and blending).
  const __mmask16 ge = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
  const __m512 q = _mm512_div_ps(_mm512_mask_blend_ps(ge, _mm512_mul_ps(xc, es), x), den);
  return _mm512_mask_blend_ps(ge, _mm512_mul_ps(q, splat(kTwoM64)), q);
}

static inline __m512 silu(__m512 x) {
  const __m512 xc = _mm512_max_ps(splat(-200.0f), x);
  const __m512 es = exp_impl(neg(abs_(xc)), kExpScaledLo, kExpScaleK);
  return keep_nan(x, sigmoid_weighted(x, xc, es));
}

// R(t) = float(ud * F(ud)), ud = 1 / fma(double(t), 1/4, 1), on 8 lanes of doubles.
static inline __m256 phi_r8(__m256 t) {
  const __m512d td = _mm512_cvtps_pd(t);
  const __m512d ud = _mm512_div_pd(splatd(1.0), _mm512_fmadd_pd(td, splatd(kPhiA), splatd(1.0)));
  __m512d f = splatd(kPhiF[0]);
  for (int i = 1; i < kPhiTerms; ++i) f = _mm512_fmadd_pd(f, ud, splatd(kPhiF[i]));
  return _mm512_cvtpd_ps(_mm512_mul_pd(ud, f));
}
static inline __m512 join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
static inline __m256 lo8(__m512 v) { return _mm512_castps512_ps256(v); }
static inline __m256 hi8(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }

static inline __m512 gelu_erf(__m512 x) {
  const __m512 xz = _mm512_min_ps(splat(kGeluClamp), _mm512_max_ps(splat(-kGeluClamp), x));
  const __m512 t = abs_(xz);
  const __m512 h = _mm512_mul_ps(t, t);
  const __m512 l = _mm512_fmsub_ps(t, t, h);
  __m512 e = exp_impl(_mm512_mul_ps(splat(-0.5f), h), kExpLo, 0);
  e = _mm512_fmadd_ps(e, _mm512_mul_ps(splat(-0.5f), l), e);
  const __m512 r = join(phi_r8(lo8(t)), phi_r8(hi8(t)));
  const __m512 pos = _mm512_mul_ps(x, _mm512_sub_ps(splat(1.0f), _mm512_mul_ps(e, r)));
  const __m512 negv = _mm512_mul_ps(_mm512_mul_ps(xz, r), e);
  const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), negv, pos);
  return keep_nan(x, y);
}

// |z| split into (zh, zl) from 8 lanes of xz.
static inline void gelu_z8(__m256 xz, __m256& zh, __m256& zl) {
  const __m512d xd = _mm512_cvtps_pd(xz);
  const __m512d zd = _mm512_mul_pd(xd, _mm512_fmadd_pd(splatd(kGeluC2), _mm512_mul_pd(xd, xd), splatd(kGeluC1)));
  const __m512d az = _mm512_castsi512_pd(
      _mm512_and_si512(_mm512_castpd_si512(zd), _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll)));
  zh = _mm512_cvtpd_ps(az);
  zl = _mm512_cvtpd_ps(_mm512_sub_pd(az, _mm512_cvtps_pd(zh)));
}

static inline __m512 gelu_tanh(__m512 x) {
  const __m512 xz = _mm512_min_ps(splat(kGeluTanhClamp), _mm512_max_ps(splat(-kGeluTanhClamp), x));
  __m256 zh0, zl0, zh1, zl1;
  gelu_z8(lo8(xz), zh0, zl0);
  gelu_z8(hi8(xz), zh1, zl1);
  const __m512 zh = join(zh0, zh1), zl = join(zl0, zl1);
  __m512 es = exp_impl(neg(zh), kExpScaledLo, kExpScaleK);
  es = _mm512_fmadd_ps(es, neg(zl), es);
  return keep_nan(x, sigmoid_weighted(x, xz, es));
}

// math::tree16 of the 16 lanes: w = 8, 4, 2, 1.
static inline float tree16(__m512 v) {
  const __m256 s8 = _mm256_add_ps(lo8(v), hi8(v));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// Lanes [0, n) set, n in [0, 16].
static inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// y[i] = f(x[i]) over n elements, 16 at a time, the tail with masked loads and stores.
template <class F>
static inline void map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}
template <class F>
static inline void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

}  // namespace ggflow::cpu::m512
