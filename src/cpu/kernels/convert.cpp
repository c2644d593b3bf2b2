// Scalar twin of convert.h: gguf's conversions, and the dispatch.
#include "cpu/kernels/convert.h"

#include <cstring>

#include "gguf/dequant.h"

namespace ggflow::cpu {

void to_f16(Isa isa, const float* f, int64_t n, uint16_t* h) {
  if (isa == Isa::avx512) return detail::to_f16_avx512(f, n, h);
  if (isa == Isa::avx2) return detail::to_f16_avx2(f, n, h);
  for (int64_t i = 0; i < n; ++i) h[i] = gguf::f32_to_f16(f[i]);
}

void from_f16(Isa isa, const uint16_t* h, int64_t n, float* f) {
  if (isa == Isa::avx512) return detail::from_f16_avx512(h, n, f);
  if (isa == Isa::avx2) return detail::from_f16_avx2(h, n, f);
  for (int64_t i = 0; i < n; ++i) f[i] = gguf::f16_to_f32(h[i]);
}

void from_f16_quiet(Isa isa, const uint16_t* h, int64_t n, float* f) {
  if (isa == Isa::avx512) return detail::from_f16_quiet_avx512(h, n, f);
  if (isa == Isa::avx2) return detail::from_f16_quiet_avx2(h, n, f);
  for (int64_t i = 0; i < n; ++i) {
    float x = gguf::f16_to_f32(h[i]);
    if (x != x) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u |= 0x400000u;
      std::memcpy(&x, &u, 4);
    }
    f[i] = x;
  }
}

}  // namespace ggflow::cpu
