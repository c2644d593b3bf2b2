// Q8_0 quantization (quantize.h): the specification; scalar, in the order the header gives.
#include "gguf/quantize.h"

#include <cmath>
#include <cstring>
#include <string>

#include "gguf/dequant.h"

namespace ggflow::gguf {

uint32_t amax_bits(const float* x, int n) {
  uint32_t m = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    b &= 0x7FFFFFFFu;
    m = b > m ? b : m;
  }
  return m;
}

float q8_0_codes(const float* x, int8_t* q) {
  const uint32_t m = amax_bits(x, kQ8_0Block);
  float amax;
  std::memcpy(&amax, &m, 4);
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < kQ8_0Block; ++i) {
    float v = x[i] * id;
    v = v > -127.0f ? v : -127.0f;
    v = v < 127.0f ? v : 127.0f;
    q[i] = static_cast<int8_t>(static_cast<int>(std::nearbyint(v)));
  }
  return amax / 127.0f;
}

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b, x += kQ8_0Block, out += kQ8_0Bytes) {
    int8_t q[kQ8_0Block];
    const uint16_t d = f32_to_f16(q8_0_codes(x, q));
    std::memcpy(out, &d, 2);
    std::memcpy(out + 2, q, kQ8_0Block);
  }
}

Status quantize(GgmlType t, const float* src, uint64_t n, std::span<uint8_t> dst) {
  if (t != GgmlType::Q8_0)
    return make_error("quantizing to " + std::string(traits(t).name) + " is not supported", "ggflow quantizes to q8_0 only");
  if (n % kQ8_0Block != 0)
    return make_error("q8_0: " + std::to_string(n) + " values are not a whole number of 32-value blocks");
  if (dst.size() < n / kQ8_0Block * kQ8_0Bytes)
    return make_error("q8_0: " + std::to_string(dst.size()) + " bytes cannot hold " + std::to_string(n) + " values");
  quantize_q8_0(src, static_cast<int64_t>(n), dst.data());
  return {};
}

}  // namespace ggflow::gguf
