// The transcendental functions of the CPU executor: exp, tanh, SiLU, GELU (erf and tanh forms).
// ONE definition each, shared by every ISA: this header is the scalar twin (the specification of
// the bits); math_avx2.h and math_avx512.h repeat the same operations, in the same order, on 8 and
// 16 lanes, and tests/cpu/test_kernels_math.cpp asserts equality by memcmp.
//
// Every function is built from IEEE-exact primitives only (+ - * /, fma, sqrt, compares and
// selects, integer bit operations, float<->double conversions), so any ISA gets the same bits;
// no libm call is involved. The scalar functions are `static inline` on purpose: a SIMD
// translation unit that includes this header must never share (through the linker) a copy of
// them compiled with wider -m flags.
//
// Accuracy (measured by test_kernels_math against double-precision references over dense
// sweeps, in ulps of the exact result; the test prints its numbers and asserts these bounds):
//   exp        <= 1 ulp   (0.89 measured over [-104, 89]); exp(x > 88.72) = +inf; results round
//                          once into the subnormals; exp(x < -103.98) = 0
//   tanh       <= 2 ulp   (1.50)
//   silu       <= 3.5 ulp (3.24)  x * sigmoid(x) from e = exp(-|x|) <= 1: never overflows and no
//                          early underflow (exp is pre-scaled by 2^64, see exp_scaled)
//   gelu_erf   <= 4 ulp   (3.61)  x * Phi(x), Phi the normal CDF through exp(-x^2/2) and a
//                          polynomial in 1/(1+|x|/4) evaluated in double: no cancellation for
//                          negative x (unlike 0.5 x (1 + erf(x/sqrt2)))
//   gelu_tanh  <= 4 ulp   (3.86)  x * sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3) formed in
//                          double: 0.5 x (1 + tanh(z/2)) without the cancellation
// Subnormal results are within 2 * 2^-149 absolute.
// NaN policy: a NaN input returns that same NaN (same bits) from every function. -inf: exp gives
// 0, tanh -1, silu/gelu -0. +inf: exp/silu/gelu +inf, tanh 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/isa.h"

namespace ggflow::cpu {

// Array forms (dispatch on the ISA): y[i] = math::exp(x[i]) / math::tanh(x[i]) for i < n; x == y
// is allowed. (Named apart from std::exp / std::tanh so unqualified calls never resolve here.)
void exp_array(Isa isa, const float* x, float* y, int64_t n);
void tanh_array(Isa isa, const float* x, float* y, int64_t n);

namespace detail {
void exp_avx2(const float* x, float* y, int64_t n);
void exp_avx512(const float* x, float* y, int64_t n);
void tanh_avx2(const float* x, float* y, int64_t n);
void tanh_avx512(const float* x, float* y, int64_t n);
}  // namespace detail

namespace math {

// ---- constants (shared with the SIMD headers)
inline constexpr float kExpLo = -104.0f;          // inputs are clamped to [kExpLo, kExpHi]
inline constexpr float kExpHi = 89.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: v + magic rounds v to an integer
inline constexpr uint32_t kRoundMagicBits = 0x4B400000u;
inline constexpr float kLn2Hi = 0.693359375f;      // Cephes' split of ln 2: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;
// exp(r) = 1 + r (1 + r P(r)) on |r| <= ln2/2 (Cephes expf's minimax coefficients), Horner + FMA.
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

// tanh(a) = a + a^3 P(a^2) for |a| < 0.625 (Cephes tanhf's coefficients), else (1-e)/(1+e), e = exp(-2a).
inline constexpr float kTanhSmall = 0.625f;
inline constexpr float kTanhP0 = -5.70498872745e-3f;
inline constexpr float kTanhP1 = 2.06390887954e-2f;
inline constexpr float kTanhP2 = -5.37397155531e-2f;
inline constexpr float kTanhP3 = 1.33314422036e-1f;
inline constexpr float kTanhP4 = -3.33332819422e-1f;

// Phi(-t) = exp(-t^2/2) * R(t), R(t) = u F(u), u = 1 / (1 + t/4), t in [0, 16]: R in double (so the
// rounding of u costs nothing), F of degree 11 (a Chebyshev fit of the exact function on u in
// [1/5, 1], relative error 4e-10; tool: mpmath.chebyfit).
inline constexpr float kGeluClamp = 16.0f;         // |x| beyond: Phi(-|x|) = 0 in f32
inline constexpr double kPhiA = 0.25;
inline constexpr int kPhiTerms = 12;
inline constexpr double kPhiF[kPhiTerms] = {
    -0.0080153902121306119, 0.040553660724554735, -0.064750454586202378, 0.0097523726113101595,
    0.048690898319931196,   -0.031089999758520615, 0.078105180034878741, 0.049776792862179226,
    0.084506309298104625,   0.092951572185535576,  0.09978545842502277,  0.099733600025657308};

// gelu_tanh: z = x (C1 + C2 x^2) in double, C1 = 2 sqrt(2/pi), C2 = 2 sqrt(2/pi) 0.044715.
inline constexpr float kGeluTanhClamp = 20.0f;     // |x| beyond: sigmoid(-|z|) = 0 in f32
inline constexpr double kGeluC1 = 1.5957691216057308;
inline constexpr double kGeluC2 = 0.07135481627159562;

// ---- scalar primitives with the semantics of the SIMD instructions
// max/min as MAXPS/MINPS: the second operand when either is NaN (or when they are equal).
static inline float vmax(float a, float b) { return a > b ? a : b; }
static inline float vmin(float a, float b) { return a < b ? a : b; }
static inline uint32_t bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline float fabs_(float x) { return from_bits(bits(x) & 0x7FFFFFFFu); }
static inline bool is_nan(float x) { return x != x; }
// Correctly rounded fused multiply-add (libm's fma in a baseline build, one instruction where FMA is enabled).
static inline float fma_(float a, float b, float c) { return std::fma(a, b, c); }
static inline double fma_(double a, double b, double c) { return std::fma(a, b, c); }

// exp(x) * 2^k for x clamped to [lo, kExpHi]. Range reduction x = n ln2 + r with
// n = round(x log2e) (round-half-even through the 1.5*2^23 trick), r = fma(n, -ln2_lo,
// fma(n, -ln2_hi, x)); exp(r) by the polynomial above; then p * 2^(n+k) as two multiplies by
// 2^m1 and 2^m2 (m1 = (n+k) >> 1, m2 = n+k - m1; the first is exact), so the result rounds once
// into the subnormals and overflows to +inf naturally.
//   exp:        (lo, k) = (-104, 0)
//   exp_scaled: (lo, k) = (-150, 64), for x <= 0: exp(x) * 2^64, never subnormal for x >= -148;
//               the activations use it so x * exp(-|x|) does not underflow early.
inline constexpr float kExpScaledLo = -150.0f;
inline constexpr int32_t kExpScaleK = 64;
inline constexpr float kTwoM64 = 5.42101086242752217e-20f;  // 2^-64
static inline float exp_impl(float x, float lo, int32_t k) {
  const float xc = vmin(kExpHi, vmax(lo, x));  // NaN passes (second operand)
  const float v = xc * kLog2e + kRoundMagic;
  const int32_t n = static_cast<int32_t>(bits(v) - kRoundMagicBits) + k;
  const float nf = v - kRoundMagic;
  float r = fma_(nf, -kLn2Hi, xc);
  r = fma_(nf, -kLn2Lo, r);
  float p = fma_(kExpP0, r, kExpP1);
  p = fma_(p, r, kExpP2);
  p = fma_(p, r, kExpP3);
  p = fma_(p, r, kExpP4);
  p = fma_(p, r, kExpP5);
  p = fma_(p, r, 1.0f);
  p = fma_(p, r, 1.0f);
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = from_bits(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = from_bits(static_cast<uint32_t>(n2 + 127) << 23);
  return (p * s1) * s2;
}
static inline float exp(float x) {
  const float y = exp_impl(x, kExpLo, 0);
  return is_nan(x) ? x : y;
}

// tanh(x) = sign(x) * (|x| < 0.625 ? fma(P(a^2), a*a^2, a) : (1 - e) / (1 + e), e = exp(-2|x|)).
static inline float tanh(float x) {
  const float a = fabs_(x);
  const float z = a * a;
  float p = fma_(kTanhP0, z, kTanhP1);
  p = fma_(p, z, kTanhP2);
  p = fma_(p, z, kTanhP3);
  p = fma_(p, z, kTanhP4);
  const float small = fma_(p, a * z, a);
  const float e = exp_impl(-2.0f * a, kExpLo, 0);
  const float large = (1.0f - e) / (1.0f + e);
  const float y = from_bits(bits(a < kTanhSmall ? small : large) | (bits(x) & 0x80000000u));
  return is_nan(x) ? x : y;
}

// sigmoid-weighted x from es = exp(-|z|) * 2^64 (z has the sign of x): x >= 0: x / (1 + e);
// x < 0: ((xc * es) / (1 + e)) * 2^-64, with e = es * 2^-64. xc is x clamped (finite).
static inline float sigmoid_weighted(float x, float xc, float es) {
  const float e = es * kTwoM64;
  const float den = 1.0f + e;
  return x >= 0.0f ? x / den : ((xc * es) / den) * kTwoM64;
}

// silu(x) = x * sigmoid(x), xc = max(x, -200): es = exp_scaled(-|xc|), then sigmoid_weighted.
static inline float silu(float x) {
  const float xc = vmax(-200.0f, x);
  const float es = exp_impl(-fabs_(xc), kExpScaledLo, kExpScaleK);
  const float y = sigmoid_weighted(x, xc, es);
  return is_nan(x) ? x : y;
}

// gelu_erf(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)). xz = clamp(x, -16, 16), t = |xz|;
// e = exp(-t^2/2) from the exact square t^2 = h + l (l = fma(t, t, -h)): e = fma(exp(-h/2), -l/2,
// exp(-h/2)); R = float(ud * F(ud)) with ud = 1 / fma(double(t), 1/4, 1) and F by double Horner+FMA;
// x >= 0: x * (1 - e * R); x < 0: (xz * R) * e.
static inline float gelu_erf(float x) {
  const float xz = vmin(kGeluClamp, vmax(-kGeluClamp, x));
  const float t = fabs_(xz);
  const float h = t * t;
  const float l = fma_(t, t, -h);
  float e = exp_impl(-0.5f * h, kExpLo, 0);
  e = fma_(e, -0.5f * l, e);
  const double ud = 1.0 / fma_(static_cast<double>(t), kPhiA, 1.0);
  double f = kPhiF[0];
  for (int i = 1; i < kPhiTerms; ++i) f = fma_(f, ud, kPhiF[i]);
  const float r = static_cast<float>(ud * f);
  const float y = x >= 0.0f ? x * (1.0f - e * r) : (xz * r) * e;
  return is_nan(x) ? x : y;
}

// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = x sigmoid(z) with
// z = x (C1 + C2 x^2). xz = clamp(x, -20, 20); z is formed in double (zd = xd * fma(C2, xd*xd, C1),
// xd = double(xz)); |z| is split into zh = float(|zd|), zl = float(|zd| - zh);
// es = fma(exp_scaled(-zh), -zl, exp_scaled(-zh)) = exp(-|z|) 2^64; then sigmoid_weighted.
static inline float gelu_tanh(float x) {
  const float xz = vmin(kGeluTanhClamp, vmax(-kGeluTanhClamp, x));
  const double xd = static_cast<double>(xz);
  const double zd = xd * fma_(kGeluC2, xd * xd, kGeluC1);
  const double az = std::fabs(zd);
  const float zh = static_cast<float>(az);
  const float zl = static_cast<float>(az - static_cast<double>(zh));
  float es = exp_impl(-zh, kExpScaledLo, kExpScaleK);
  es = fma_(es, -zl, es);
  const float y = sigmoid_weighted(x, xz, es);
  return is_nan(x) ? x : y;
}

// The 16-lane sum used by every reduction along one vector (RMSNorm's sum of squares, softmax's
// sum, attention's q.k and sum of weights): partial sums acc[0..15] (lane i takes elements
// i, i+16, i+32, ... in order), then the fixed pairwise tree acc[i] += acc[i+w] for w = 8, 4, 2, 1.
static inline float tree16(float* acc) {
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) acc[i] = acc[i] + acc[i + w];
  return acc[0];
}

}  // namespace math
}  // namespace ggflow::cpu
