// Scalar twin of convert.h: gguf's conversions, and the dispatch.
#include "cpu/kernels/convert.h"

#include <algorithm>
#include <cstring>

#include "cpu/kernels/quant_act.h"
#include "gguf/dequant.h"
#include "gguf/quantize.h"

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

void to_q8_0(Isa isa, const float* f, int64_t n, uint8_t* out) {
  constexpr int64_t kChunk = 16;  // blocks per pass through the stack
  BlockQA32 b[kChunk];
  for (int64_t i = 0; i < n / gguf::kQ8_0Block; i += kChunk) {
    const int64_t nb = std::min(kChunk, n / gguf::kQ8_0Block - i);
    const float* x = f + i * gguf::kQ8_0Block;
    uint8_t* bytes = reinterpret_cast<uint8_t*>(b);
    if (isa == Isa::avx512) detail::quant_act_qa32_avx512(x, nb, bytes);
    else if (isa == Isa::avx2) detail::quant_act_qa32_avx2(x, nb, bytes);
    else detail::quant_act_qa32_scalar(x, nb, bytes);
    for (int64_t j = 0; j < nb; ++j) {
      uint8_t* o = out + (i + j) * gguf::kQ8_0Bytes;
      const uint16_t d = gguf::f32_to_f16(b[j].d);  // d is an f16 value: exact
      std::memcpy(o, &d, 2);
      std::memcpy(o + 2, b[j].q, gguf::kQ8_0Block);
    }
  }
}

void from_q8_0(Isa isa, const uint8_t* in, int64_t n, float* f) {
  if (isa == Isa::avx512) return detail::from_q8_0_avx512(in, n, f);
  if (isa == Isa::avx2) return detail::from_q8_0_avx2(in, n, f);
  for (int64_t b = 0; b < n / gguf::kQ8_0Block; ++b, in += gguf::kQ8_0Bytes) {
    uint16_t h;
    std::memcpy(&h, in, 2);
    float d;
    from_f16_quiet(Isa::scalar, &h, 1, &d);
    for (int64_t i = 0; i < gguf::kQ8_0Block; ++i) f[b * gguf::kQ8_0Block + i] = d * static_cast<float>(static_cast<int8_t>(in[2 + i]));
  }
}

}  // namespace ggflow::cpu
