// avx2 activations (act.h), bit-identical to the scalar twin in act.cpp.
#include "cpu/kernels/act.h"
#include "cpu/kernels/math_avx2.h"
#include "ir/gelu_f16.h"

namespace ggflow::cpu::detail {

namespace {
// ir::gelu_f16: the table entry at x's f16 rounding (vcvtps2ph rounds to nearest even, as
// gguf::f32_to_f16), 0 for x <= -10, x for x >= 10.
inline __m256 gelu_f16(__m256 x, const uint16_t* table) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i e = _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), h, 2),
                                     _mm256_set1_epi32(0xFFFF));  // the entry in the low half of each dword
  __m256 y = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1)));
  y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
  return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ));
}

template <class F>
void rows1(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r) m256::map(x + r * xs, y + r * ys, n, f);
}
template <class F>
void rows2(const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n, int64_t r0,
           int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r)
    m256::map2(g + r * gs, u + r * us, y + r * ys, n, [&](__m256 a, __m256 b) { return _mm256_mul_ps(f(a), b); });
}
}  // namespace

void activation_avx2(Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows1(x, xs, y, ys, n, r0, r1, [](__m256 v) { return m256::silu(v); });
    case Act::gelu_erf: return rows1(x, xs, y, ys, n, r0, r1, [](__m256 v) { return m256::gelu_erf(v); });
    case Act::gelu_tanh: return rows1(x, xs, y, ys, n, r0, r1, [](__m256 v) { return m256::gelu_tanh(v); });
    case Act::gelu_f16: {
      const uint16_t* t = ir::gelu_f16_table();
      return rows1(x, xs, y, ys, n, r0, r1, [t](__m256 v) { return gelu_f16(v, t); });
    }
  }
}

void glu_avx2(Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
              int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m256 v) { return m256::silu(v); });
    case Act::gelu_erf: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m256 v) { return m256::gelu_erf(v); });
    case Act::gelu_tanh: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m256 v) { return m256::gelu_tanh(v); });
    case Act::gelu_f16: {
      const uint16_t* t = ir::gelu_f16_table();
      return rows2(g, gs, u, us, y, ys, n, r0, r1, [t](__m256 v) { return gelu_f16(v, t); });
    }
  }
}

}  // namespace ggflow::cpu::detail
