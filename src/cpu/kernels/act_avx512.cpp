// avx512 activations (act.h), bit-identical to the scalar twin in act.cpp.
#include "cpu/kernels/act.h"
#include "cpu/kernels/math_avx512.h"
#include "ir/gelu_f16.h"

namespace ggflow::cpu::detail {

namespace {
// ir::gelu_f16: the table entry at x's f16 rounding (vcvtps2ph rounds to nearest even, as
// gguf::f32_to_f16), 0 for x <= -10, x for x >= 10.
inline __m512 gelu_f16(__m512 x, const uint16_t* table) {
  const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m512i e = _mm512_i32gather_epi32(h, table, 2);  // the entry in the low half of each dword
  __m512 y = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(e));
  y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ), x);
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_LE_OQ), _mm512_setzero_ps());
}

template <class F>
void rows1(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r) m512::map(x + r * xs, y + r * ys, n, f);
}
template <class F>
void rows2(const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n, int64_t r0,
           int64_t r1, F f) {
  for (int64_t r = r0; r < r1; ++r)
    m512::map2(g + r * gs, u + r * us, y + r * ys, n, [&](__m512 a, __m512 b) { return _mm512_mul_ps(f(a), b); });
}
}  // namespace

void activation_avx512(Act act, const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::silu(v); });
    case Act::gelu_erf: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_erf(v); });
    case Act::gelu_tanh: return rows1(x, xs, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_tanh(v); });
    case Act::gelu_f16: {
      const uint16_t* t = ir::gelu_f16_table();
      return rows1(x, xs, y, ys, n, r0, r1, [t](__m512 v) { return gelu_f16(v, t); });
    }
  }
}

void glu_avx512(Act act, const float* g, int64_t gs, const float* u, int64_t us, float* y, int64_t ys, int64_t n,
              int64_t r0, int64_t r1) {
  switch (act) {
    case Act::silu: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::silu(v); });
    case Act::gelu_erf: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_erf(v); });
    case Act::gelu_tanh: return rows2(g, gs, u, us, y, ys, n, r0, r1, [](__m512 v) { return m512::gelu_tanh(v); });
    case Act::gelu_f16: {
      const uint16_t* t = ir::gelu_f16_table();
      return rows2(g, gs, u, us, y, ys, n, r0, r1, [t](__m512 v) { return gelu_f16(v, t); });
    }
  }
}

}  // namespace ggflow::cpu::detail
