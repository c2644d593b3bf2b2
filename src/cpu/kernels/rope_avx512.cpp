// avx512 RoPE rotation (rope.h), bit-identical to rope_apply's scalar twin: lanes over head dims;
// normal mode swaps adjacent pairs in-register, neox reads the two halves.
#include <cstring>

#include "cpu/kernels/math_avx512.h"
#include "cpu/kernels/rope.h"

namespace ggflow::cpu::detail {

namespace {
inline __m512 ld(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline void st(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
inline __m512 rot(__m512 a, __m512 c, __m512 b, __m512 s) { return _mm512_add_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)); }
}  // namespace

void rope_apply_avx512(const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y,
                      int64_t heads) {
  const int64_t nd = p.n_dims == 0 ? head_size : p.n_dims, half = nd / 2;  // rope_dims, not called from here
  const float* C = cache;
  const float* S = cache + nd;
  for (int64_t h = 0; h < heads; ++h) {
    const float* v = x + h * head_size;
    float* o = y + h * head_size;
    if (p.mode == RopeMode::normal) {
      for (int64_t k = 0; k < nd; k += 16) {
        const __mmask16 m = m512::tail_mask(nd - k);
        const __m512 a = ld(v + k, m);
        const __m512 sw = _mm512_permute_ps(a, 0xB1);  // (x1, x0) in each pair
        st(o + k, m, rot(a, ld(C + k, m), sw, ld(S + k, m)));
      }
    } else {
      for (int64_t k = 0; k < half; k += 16) {
        const __mmask16 m = m512::tail_mask(half - k);
        const __m512 a = ld(v + k, m), b = ld(v + k + half, m);
        const __m512 y0 = rot(a, ld(C + k, m), b, ld(S + k, m));
        const __m512 y1 = rot(b, ld(C + k + half, m), a, ld(S + k + half, m));
        st(o + k, m, y0);
        st(o + k + half, m, y1);
      }
    }
    if (o != v) std::memcpy(o + nd, v + nd, static_cast<size_t>(head_size - nd) * sizeof(float));
  }
}

}  // namespace ggflow::cpu::detail
