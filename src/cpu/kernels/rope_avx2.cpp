// avx2 RoPE rotation (rope.h), bit-identical to rope_apply's scalar twin: lanes over head dims;
// normal mode swaps adjacent pairs in-register, neox reads the two halves.
#include <cstring>

#include "cpu/kernels/math_avx2.h"
#include "cpu/kernels/rope.h"

namespace ggflow::cpu::detail {

namespace {
inline __m256 ld(const float* p, __m256i m) { return _mm256_maskload_ps(p, m); }
inline void st(float* p, __m256i m, __m256 v) { _mm256_maskstore_ps(p, m, v); }
inline __m256 rot(__m256 a, __m256 c, __m256 b, __m256 s) { return _mm256_add_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)); }
}  // namespace

void rope_apply_avx2(const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y,
                      int64_t heads) {
  const int64_t nd = p.n_dims == 0 ? head_size : p.n_dims, half = nd / 2;  // rope_dims, not called from here
  const float* C = cache;
  const float* S = cache + nd;
  for (int64_t h = 0; h < heads; ++h) {
    const float* v = x + h * head_size;
    float* o = y + h * head_size;
    if (p.mode == RopeMode::normal) {
      for (int64_t k = 0; k < nd; k += 8) {
        const __m256i m = m256::tail_mask(nd - k);
        const __m256 a = ld(v + k, m);
        const __m256 sw = _mm256_permute_ps(a, 0xB1);  // (x1, x0) in each pair
        st(o + k, m, rot(a, ld(C + k, m), sw, ld(S + k, m)));
      }
    } else {
      for (int64_t k = 0; k < half; k += 8) {
        const __m256i m = m256::tail_mask(half - k);
        const __m256 a = ld(v + k, m), b = ld(v + k + half, m);
        const __m256 y0 = rot(a, ld(C + k, m), b, ld(S + k, m));
        const __m256 y1 = rot(b, ld(C + k + half, m), a, ld(S + k + half, m));
        st(o + k, m, y0);
        st(o + k + half, m, y1);
      }
    }
    if (o != v) std::memcpy(o + nd, v + nd, static_cast<size_t>(head_size - nd) * sizeof(float));
  }
}

}  // namespace ggflow::cpu::detail
