// Helpers shared by the AVX-512 packed matmul kernels (matmul_packed_avx512.cpp: 32-blocks,
// matmul_packed_k_avx512.cpp: super-blocks). Included only by files compiled with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu::detail::packed_avx512 {

constexpr int kSideLines = 2;  // queued lines (side_prefetch.h) issued per weight block (1-8 measured: 2)

// isum + w . (the activation dword at p, broadcast): vpdpbusd with the broadcast as its memory
// operand ({1to16}), one fused uop where set1 + vpdpbusd are two (GCC does not fold it): fewer
// uops per block leave the out-of-order window room for more weight loads in flight.
inline __m512i dpbusd_bcast(__m512i isum, __m512i w, const uint8_t* p) {
#if defined(__GNUC__)
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(isum) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return isum;
#else
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_dpbusd_epi32(isum, w, _mm512_set1_epi32(v));
#endif
}

inline float ldf(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m512 half16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

struct Prefetch {
  const uint8_t* p;
  const uint8_t* end;
  int per;  // cache lines per block
  SidePrefetch* side;  // another step's queue, a few lines per block
  void step() {
    for (int i = 0; i < per && p < end; ++i, p += 64) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
    if (!side->empty()) side_prefetch_step(*side, kSideLines);
  }
};

}  // namespace ggflow::cpu::detail::packed_avx512
