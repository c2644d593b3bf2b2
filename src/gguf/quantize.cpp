// Q8_0 and Q4_0 quantization (quantize.h): the specification; scalar, in the order the header gives.
#include "gguf/quantize.h"

#include <algorithm>
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

void quantize_q4_0(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b, x += kQ8_0Block, out += kQ4_0Bytes) {
    float amax = 0.0f, m = 0.0f;
    for (int i = 0; i < kQ8_0Block; ++i)
      if (amax < std::fabs(x[i])) amax = std::fabs(x[i]), m = x[i];
    const float d = m / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, 2);
    uint8_t q[kQ8_0Block];
    for (int i = 0; i < kQ8_0Block; ++i) {
      const float v = x[i] * id, t = v + 8.5f;  // in [0, 16.5] for finite x; NaN -> 0, not UB
      q[i] = static_cast<uint8_t>(t >= 15.0f ? 15 : t > 0.0f ? static_cast<int>(t) : 0);
    }
    for (int j = 0; j < kQ8_0Block / 2; ++j) out[2 + j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
  }
}

Status quantize(GgmlType t, const float* src, uint64_t n, std::span<uint8_t> dst) {
  if (t != GgmlType::Q8_0 && t != GgmlType::Q4_0)
    return make_error("quantizing to " + std::string(traits(t).name) + " is not supported",
                      "ggflow quantizes to q8_0 and q4_0 only");
  const std::string name(traits(t).name);
  if (n % kQ8_0Block != 0)
    return make_error(name + ": " + std::to_string(n) + " values are not a whole number of 32-value blocks");
  const uint64_t bytes = n / kQ8_0Block * (t == GgmlType::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes);
  if (dst.size() < bytes)
    return make_error(name + ": " + std::to_string(dst.size()) + " bytes cannot hold " + std::to_string(n) + " values");
  if (t == GgmlType::Q8_0)
    quantize_q8_0(src, static_cast<int64_t>(n), dst.data());
  else
    quantize_q4_0(src, static_cast<int64_t>(n), dst.data());
  return {};
}

Result<std::vector<uint8_t>> requantize(GgmlType from, std::span<const uint8_t> src, uint64_t n, GgmlType to) {
  if (to != GgmlType::Q4_0)
    return make_error("requantizing to " + std::string(traits(to).name) + " is not supported", "ggflow requantizes to q4_0 only");
  std::vector<uint8_t> out(n / kQ8_0Block * kQ4_0Bytes);
  // A chunk at a time (a whole number of `from` blocks and of 32-value blocks), not one f32 copy of it all.
  const uint64_t block = traits(from).block_size, chunk = 256 * 64;
  if (n % block != 0 || chunk % block != 0)
    return make_error(std::string(traits(from).name) + ": " + std::to_string(n) + " values are not whole blocks");
  std::vector<float> f(chunk);
  for (uint64_t i = 0; i < n; i += chunk) {
    const uint64_t m = std::min(chunk, n - i);
    const uint64_t b0 = i / block * traits(from).type_size, nbytes = m / block * traits(from).type_size;
    if (b0 + nbytes > src.size()) return make_error("requantize: the source is shorter than its values");
    if (auto s = dequantize(from, src.subspan(b0, nbytes), m, f.data()); !s) return s.error();
    const uint64_t o0 = i / kQ8_0Block * kQ4_0Bytes;
    if (auto s = quantize(to, f.data(), m, std::span(out).subspan(o0)); !s) return s.error();
  }
  return out;
}

}  // namespace ggflow::gguf
