// AVX2 + F16C f32 <-> f16 and q8_0 -> f32 (convert.h): vcvtps2ph rounding to nearest even, NaN lanes as the twin.
#include <immintrin.h>

#include <cstring>

#include "cpu/kernels/convert.h"
#include "gguf/dequant.h"

namespace ggflow::cpu::detail {

void to_f16_avx2(const float* f, int64_t n, uint16_t* h) {
  const __m128i qnan = _mm_set1_epi16(0x7E00), sign = _mm_set1_epi16(static_cast<short>(0x8000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(f + i);
    __m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // 32-bit lanes -> 16
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    r = _mm_blendv_epi8(r, _mm_or_si128(_mm_and_si128(r, sign), qnan), nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), r);
  }
  for (; i < n; ++i) h[i] = gguf::f32_to_f16(f[i]);
}

void from_f16_avx2(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    const __m256 y = _mm256_cvtph_ps(x);
    // NaN halves as the twin: sign | 0x7F800000 | mantissa << 13 (a signaling NaN stays signaling)
    const __m256i w = _mm256_cvtepu16_epi32(x);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFF)), _mm256_set1_epi32(0x7C00));
    const __m256i twin = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                                                         _mm256_set1_epi32(0x7F800000)),
                                         _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3FF)), 13));
    _mm256_storeu_ps(f + i, _mm256_blendv_ps(y, _mm256_castsi256_ps(twin), _mm256_castsi256_ps(nan)));
  }
  for (; i < n; ++i) f[i] = gguf::f16_to_f32(h[i]);
}

void from_f16_quiet_avx2(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h[i])));
}

void from_q8_0_avx2(const uint8_t* in, int64_t n, float* f) {
  for (int64_t b = 0; b < n / 32; ++b, in += 34, f += 32) {
    uint16_t h;
    std::memcpy(&h, in, 2);
    const __m256 d = _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));  // as the AVX-512 path
    for (int i = 0; i < 4; ++i) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + 8 * i));
      _mm256_storeu_ps(f + 8 * i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
}

}  // namespace ggflow::cpu::detail
