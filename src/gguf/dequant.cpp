// Scalar reference dequantization. Each function decodes one block; the element order and the
// order of the f32 operations follow GGML's reference (dequantize_row_*), which is also what the
// `gguf` Python package computes, so both give the same bits (-ffp-contract=off keeps a*b+c from
// becoming one fused operation).
#include "gguf/dequant.h"

#include <cstring>

#include <fmt/format.h>

namespace ggflow::gguf {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {        // subnormal: normalise
    int e = -1;
    do { ++e; mant <<= 1; } while ((mant & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t n;
  std::memcpy(&n, &f, 4);
  if ((n & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((n >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((static_cast<uint64_t>(n) + (0x7FFF + ((n >> 16) & 1))) >> 16);
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return sign | 0x7E00;  // NaN
  if (ax >= 0x477FF000u) return sign | 0x7C00;  // rounds to inf (>= 65520)
  if (ax < 0x38800000u) {                       // below the smallest normal half: subnormal
    if (ax < 0x33000000u) return sign;          // rounds to zero (< 2^-25)
    // value = m * 2^(e-150) with the implicit bit in m; in units of the half subnormal step
    // 2^-24 that is m * 2^(e-126), so shift m right by 126 - e (14..24) and round to even.
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7FFFFF) | 0x800000;
    const uint32_t rshift = 126 - e;
    uint32_t q = m >> rshift;
    const uint32_t rem = m & ((1u << rshift) - 1);
    const uint32_t half = 1u << (rshift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t v = ax - 0x38000000u;  // rebias exponent 127 -> 15
  uint32_t q = v >> 13;
  const uint32_t rem = v & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;
  return sign | static_cast<uint16_t>(q);
}

namespace {

constexpr int QK_K = 256;

float h(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// Q4_0: d f16, qs[16]; element l (l < 16) is the low nibble of qs[l], element l+16 the high one.
void q4_0(const uint8_t* b, float* y) {
  const float d = h(b);
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>((b[2 + l] & 0xF) - 8);
    y[l + 16] = d * static_cast<float>((b[2 + l] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = h(b), m = h(b + 2);
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>(b[4 + l] & 0xF) + m;
    y[l + 16] = d * static_cast<float>(b[4 + l] >> 4) + m;
  }
}

// Q5_0: d f16, qh u32 (bit l = 5th bit of element l), qs[16] as in Q4_0.
void q5_0(const uint8_t* b, float* y) {
  const float d = h(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int l = 0; l < 16; ++l) {
    const int lo = (b[6 + l] & 0xF) | (((qh >> l) & 1) << 4);
    const int hi = (b[6 + l] >> 4) | (((qh >> (l + 16)) & 1) << 4);
    y[l] = d * static_cast<float>(lo - 16);
    y[l + 16] = d * static_cast<float>(hi - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = h(b), m = h(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int l = 0; l < 16; ++l) {
    const int lo = (b[8 + l] & 0xF) | (((qh >> l) & 1) << 4);
    const int hi = (b[8 + l] >> 4) | (((qh >> (l + 16)) & 1) << 4);
    y[l] = d * static_cast<float>(lo) + m;
    y[l + 16] = d * static_cast<float>(hi) + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = h(b);
  for (int l = 0; l < 32; ++l) y[l] = static_cast<float>(static_cast<int8_t>(b[2 + l])) * d;
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin. Element
// e = g*128 + j*32 + l takes bits 2j..2j+1 of qs[g*32 + l]; sub-block e/16.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = h(b + 80), dmin = h(b + 82);
  for (int e = 0; e < QK_K; ++e) {
    const int g = e / 128, j = (e % 128) / 32, l = e % 32;
    const float q = static_cast<float>((qs[g * 32 + l] >> (2 * j)) & 3);
    const float dl = d * static_cast<float>(sc[e / 16] & 0xF);
    const float ml = dmin * static_cast<float>(sc[e / 16] >> 4);
    y[e] = dl * q - ml;
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (16 signed 6-bit scales), d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* s = b + 96;
  const float d = h(b + 108);
  float dl[16];
  for (int k = 0; k < 16; ++k) {
    const int lo = (k < 8 ? s[k] : s[k - 8] >> 4) & 0xF;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    dl[k] = d * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
  }
  for (int e = 0; e < QK_K; ++e) {
    const int g = e / 128, j = (e % 128) / 32, l = e % 32;
    const int ql = (qs[g * 32 + l] >> (2 * j)) & 3;
    const int qh = ((hm[l] >> (e / 32)) & 1) ^ 1;  // the offset 4 applies when the bit is 0
    y[e] = dl[e / 16] * static_cast<float>(ql - (qh << 2));
  }
}

// The 8 (scale, min) pairs of Q4_K/Q5_K, 6 bits each, packed into 12 bytes.
void scale_min_k4(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; element e = g*64 + s*32 + l is nibble s of qs[g*32 + l].
void q4_k(const uint8_t* b, float* y) {
  const float d = h(b), dmin = h(b + 2);
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int e = j * 32 + l;
      const int q = (qs[(e / 64) * 32 + l] >> (4 * ((e / 32) % 2))) & 0xF;
      y[e] = dj * static_cast<float>(q) - mj;
    }
  }
}

// Q5_K: as Q4_K plus qh[32]: bit e/32 of qh[l] is the 5th bit of element e.
void q5_k(const uint8_t* b, float* y) {
  const float d = h(b), dmin = h(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int e = j * 32 + l;
      const int q = ((qs[(e / 64) * 32 + l] >> (4 * ((e / 32) % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4);
      y[e] = dj * static_cast<float>(q) - mj;
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (i8), d. Element e = g*128 + s*64 + l (l < 64) takes nibble
// s of ql[g*64 + l]; its high 2 bits are bits 2*((e%128)/32) of qh[g*32 + e%32].
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h(b + 208);
  for (int e = 0; e < QK_K; ++e) {
    const int g = e / 128, r = e % 128;
    const int lo = (ql[g * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
    const int hi = (qh[g * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const float ds = d * static_cast<float>(sc[e / 16]);
    y[e] = ds * static_cast<float>(static_cast<int8_t>(lo | (hi << 4)) - 32);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return q4_0;
    case GgmlType::Q4_1: return q4_1;
    case GgmlType::Q5_0: return q5_0;
    case GgmlType::Q5_1: return q5_1;
    case GgmlType::Q8_0: return q8_0;
    case GgmlType::Q2_K: return q2_k;
    case GgmlType::Q3_K: return q3_k;
    case GgmlType::Q4_K: return q4_k;
    case GgmlType::Q5_K: return q5_k;
    case GgmlType::Q6_K: return q6_k;
    default: return nullptr;
  }
}

}  // namespace

bool can_dequantize(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || block_fn(t) != nullptr;
}

Status dequantize(GgmlType t, std::span<const uint8_t> src, uint64_t n, float* dst) {
  const TypeTraits& tr = traits(t);
  if (!can_dequantize(t))
    return make_error(fmt::format("dequantization of {} tensors is not implemented", tr.name),
                      "supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K");
  if (n % tr.block_size != 0)
    return make_error(fmt::format("{} elements is not a multiple of the {} block size {}", n, tr.name, tr.block_size));
  const uint64_t blocks = n / tr.block_size;
  if (src.size() < blocks * tr.type_size)
    return make_error(fmt::format("{} elements of {} need {} bytes, got {}", n, tr.name, blocks * tr.type_size, src.size()));
  const uint8_t* p = src.data();
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, p, n * 4); return {};
    case GgmlType::F16:
      for (uint64_t k = 0; k < n; ++k) dst[k] = h(p + 2 * k);
      return {};
    case GgmlType::BF16:
      for (uint64_t k = 0; k < n; ++k) { uint16_t v; std::memcpy(&v, p + 2 * k, 2); dst[k] = bf16_to_f32(v); }
      return {};
    default: break;
  }
  const BlockFn fn = block_fn(t);
  for (uint64_t k = 0; k < blocks; ++k) fn(p + k * tr.type_size, dst + k * tr.block_size);
  return {};
}

}  // namespace ggflow::gguf
