// AVX-512 f32 <-> f16 and q8_0 -> f32 (convert.h): vcvtps2ph rounding to nearest even, NaN lanes as the twin;
// tails masked.
#include <immintrin.h>

#include <cstring>

#include "cpu/kernels/convert.h"
#include "gguf/dequant.h"

namespace ggflow::cpu::detail {

namespace {
__mmask16 tail(int64_t left) { return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1); }
}  // namespace

void to_f16_avx512(const float* f, int64_t n, uint16_t* h) {
  const __m256i qnan = _mm256_set1_epi16(0x7E00), sign = _mm256_set1_epi16(static_cast<short>(0x8000));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, f + i);
    __m256i r = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm256_mask_blend_epi16(nan, r, _mm256_or_si256(_mm256_and_si256(r, sign), qnan));
    _mm256_mask_storeu_epi16(h + i, m, r);
  }
}

void from_f16_avx512(const uint16_t* h, int64_t n, float* f) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    const __m256i x = _mm256_maskz_loadu_epi16(m, h + i);
    __m512 y = _mm512_cvtph_ps(x);
    // NaN halves as the twin: sign | 0x7F800000 | mantissa << 13 (a signaling NaN stays signaling)
    const __m512i w = _mm512_cvtepu16_epi32(x);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(w, _mm512_set1_epi32(0x7FFF)), _mm512_set1_epi32(0x7C00));
    const __m512i twin = _mm512_or_si512(_mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16),
                                                         _mm512_set1_epi32(0x7F800000)),
                                         _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3FF)), 13));
    y = _mm512_mask_blend_ps(nan, y, _mm512_castsi512_ps(twin));
    _mm512_mask_storeu_ps(f + i, m, y);
  }
}

void from_f16_quiet_avx512(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  if (i < n) _mm512_mask_storeu_ps(f + i, tail(n - i), _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail(n - i), h + i)));
}

void from_q8_0_avx512(const uint8_t* in, int64_t n, float* f) {
  for (int64_t b = 0; b < n / 32; ++b, in += 34, f += 32) {
    uint16_t h;
    std::memcpy(&h, in, 2);
    // vcvtph2ps: gguf::f16_to_f32's value for every d to_q8_0 writes (its NaN is quiet)
    const __m512 d = _mm512_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 18));
    _mm512_storeu_ps(f, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
    _mm512_storeu_ps(f + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
  }
}

}  // namespace ggflow::cpu::detail
