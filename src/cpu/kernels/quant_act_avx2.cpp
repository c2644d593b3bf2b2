// AVX2 activation quantizer: the scalar twin's arithmetic (quant_act.h), bit for bit.
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

inline uint32_t hmax_epu32(__m256i v) {
  __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i m = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  return _mm_cvtsi128_si32(m);
}

// v = x*id, clamped as MAXPS(v,-127) then MINPS(v,127), rounded to nearest even (MXCSR default).
inline __m256i quant8(__m256 x, __m256 vid) {
  __m256 v = _mm256_mul_ps(x, vid);
  v = _mm256_max_ps(v, _mm256_set1_ps(-127.0f));
  v = _mm256_min_ps(v, _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 32 int32 in [-127,127] (q0..q3, 8 each, in order) -> 32 int8 in order.
inline __m256i pack32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i p01 = _mm256_packs_epi32(q0, q1), p23 = _mm256_packs_epi32(q2, q3);
  const __m256i b = _mm256_packs_epi16(p01, p23);
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline __m256i absbits(const float* p) {
  return _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(p)), _mm256_set1_epi32(0x7FFFFFFF));
}

}  // namespace

void quant_act_qa32_avx2(const float* x, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    const __m256i a = _mm256_max_epu32(_mm256_max_epu32(absbits(x), absbits(x + 8)),
                                       _mm256_max_epu32(absbits(x + 16), absbits(x + 24)));
    const float amax = bits_to_float(hmax_epu32(a));
    const float dr = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i q0 = quant8(_mm256_loadu_ps(x), vid), q1 = quant8(_mm256_loadu_ps(x + 8), vid);
    const __m256i q2 = quant8(_mm256_loadu_ps(x + 16), vid), q3 = quant8(_mm256_loadu_ps(x + 24), vid);
    const int32_t sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    BlockQA32 o;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q), pack32(q0, q1, q2, q3));
    o.d = f16_round(dr);
    o.s = f16_round(dr * static_cast<float>(sum));
    o.sum = sum;
    o.reserved = 0;
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

void quant_act_qa256_avx2(const float* x, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    __m256i a = _mm256_setzero_si256();
    for (int i = 0; i < 32; ++i) a = _mm256_max_epu32(a, absbits(x + 8 * i));
    const uint32_t amax = hmax_epu32(a);
    BlockQA256 o{};
    if (amax != 0) {
      const __m256i va = _mm256_set1_epi32(static_cast<int32_t>(amax));
      __m256i hit = _mm256_setzero_si256();
      for (int i = 0; i < 32; ++i)
        hit = _mm256_or_si256(hit, _mm256_cmpeq_epi32(_mm256_castps_si256(_mm256_loadu_ps(x + 8 * i)), va));
      const float iscale = -127.0f / qa256_max(amax, !_mm256_testz_si256(hit, hit));
      const __m256 vis = _mm256_set1_ps(iscale);
      for (int j = 0; j < 8; ++j) {  // 32 values: groups 2j and 2j+1
        const float* p = x + 32 * j;
        const __m256i q0 = quant8(_mm256_loadu_ps(p), vis), q1 = quant8(_mm256_loadu_ps(p + 8), vis);
        const __m256i q2 = quant8(_mm256_loadu_ps(p + 16), vis), q3 = quant8(_mm256_loadu_ps(p + 24), vis);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.q + 32 * j), pack32(q0, q1, q2, q3));
        o.bsums[2 * j] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q0, q1)));
        o.bsums[2 * j + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q2, q3)));
      }
      o.d = 1.0f / iscale;
    }
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

}  // namespace ggflow::cpu::detail
