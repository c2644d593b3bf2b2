// AVX-512 activation quantizer: the scalar twin's arithmetic (quant_act.h), bit for bit.
// GCC 12 warns about the undefined-source operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "cpu/kernels/quant_act.h"

namespace ggflow::cpu::detail {
namespace {

inline float bits_to_float(uint32_t m) {
  float a;
  std::memcpy(&a, &m, 4);
  return a;
}

// v = x*id, clamped as MAXPS(v,-127) then MINPS(v,127), rounded to nearest even.
inline __m512i quant16(__m512 x, __m512 vid) {
  __m512 v = _mm512_mul_ps(x, vid);
  v = _mm512_max_ps(v, _mm512_set1_ps(-127.0f));
  v = _mm512_min_ps(v, _mm512_set1_ps(127.0f));
  return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

}  // namespace

void quant_act_qa32_avx512(const float* x, int64_t nb, uint8_t* out) {
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const __m512i a = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(x0), absmask),
                                       _mm512_and_si512(_mm512_castps_si512(x1), absmask));
    const float amax = bits_to_float(_mm512_reduce_max_epu32(a));
    const float dr = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = quant16(x0, vid), q1 = quant16(x1, vid);
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    BlockQA32 o;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.q), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o.q + 16), _mm512_cvtepi32_epi8(q1));
    o.d = f16_round(dr);
    o.s = f16_round(dr * static_cast<float>(sum));
    o.sum = sum;
    o.reserved = 0;
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

void quant_act_qa256_avx512(const float* x, int64_t nb, uint8_t* out) {
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    __m512i a = _mm512_setzero_si512();
    for (int i = 0; i < 16; ++i)
      a = _mm512_max_epu32(a, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + 16 * i)), absmask));
    const uint32_t amax = _mm512_reduce_max_epu32(a);
    BlockQA256 o{};
    if (amax != 0) {
      const __m512i va = _mm512_set1_epi32(static_cast<int32_t>(amax));
      __mmask16 hit = 0;
      for (int i = 0; i < 16; ++i) hit |= _mm512_cmpeq_epi32_mask(_mm512_castps_si512(_mm512_loadu_ps(x + 16 * i)), va);
      const float iscale = -127.0f / qa256_max(amax, hit != 0);
      const __m512 vis = _mm512_set1_ps(iscale);
      alignas(64) int32_t sums[16];
      for (int j = 0; j < 16; ++j) {
        const __m512i q = quant16(_mm512_loadu_ps(x + 16 * j), vis);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o.q + 16 * j), _mm512_cvtepi32_epi8(q));
        sums[j] = _mm512_reduce_add_epi32(q);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.bsums), _mm512_cvtepi32_epi16(_mm512_load_si512(sums)));
      o.d = 1.0f / iscale;
    }
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

}  // namespace ggflow::cpu::detail
