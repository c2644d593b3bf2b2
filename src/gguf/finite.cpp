#include "gguf/finite.h"

#include <cstring>

namespace ggflow::gguf {

namespace {

// A float format's exponent field: all ones means NaN (mantissa != 0) or Inf (mantissa == 0).
template <class Bits>
struct Format {
  Bits exp_mask, man_mask, sign;
};
constexpr Format<uint32_t> kF32{0x7f800000u, 0x007fffffu, 0x80000000u};
constexpr Format<uint16_t> kF16{0x7c00u, 0x03ffu, 0x8000u};
constexpr Format<uint16_t> kBF16{0x7f80u, 0x007fu, 0x8000u};

template <class Bits>
Bits load(const uint8_t* p) {
  Bits b;
  std::memcpy(&b, p, sizeof b);
  return b;
}

template <class Bits>
NonFinite describe(Bits b, const Format<Bits>& f, bool in_scale, uint64_t index) {
  return NonFinite{(b & f.man_mask) != 0, (b & f.sign) != 0, in_scale, index};
}

// Plain tensors: one pass in blocks of a fixed number of elements, each an OR of "exponent all
// ones" (a fixed trip count, so the compiler vectorizes it at -O2); only a block that has one is
// walked again to find it.
constexpr uint64_t kBlock = 256;

template <class Bits>
bool block_has_non_finite(const uint8_t* p, Bits exp) {
  Bits any = 0;
  for (uint64_t i = 0; i < kBlock; ++i) any |= static_cast<Bits>((load<Bits>(p + i * sizeof(Bits)) & exp) == exp);
  return any != 0;
}

template <class Bits>
std::optional<NonFinite> scan_plain(std::span<const uint8_t> data, const Format<Bits>& f) {
  const uint64_t n = data.size() / sizeof(Bits);
  const uint8_t* p = data.data();
  auto walk = [&](uint64_t from, uint64_t to) -> std::optional<NonFinite> {
    for (uint64_t i = from; i < to; ++i) {
      Bits b = load<Bits>(p + i * sizeof(Bits));
      if ((b & f.exp_mask) == f.exp_mask) return describe(b, f, false, i);
    }
    return std::nullopt;
  };
  uint64_t i = 0;
  for (; i + kBlock <= n; i += kBlock)
    if (block_has_non_finite<Bits>(p + i * sizeof(Bits), f.exp_mask)) return walk(i, i + kBlock);
  return walk(i, n);
}

// Quantized tensors: the f16 scales at byte offsets `off0` (and `off1`, if >= 0) of each block.
std::optional<NonFinite> scan_scales(std::span<const uint8_t> data, uint32_t block_bytes, int off0, int off1) {
  const uint64_t nb = data.size() / block_bytes;
  const uint8_t* p = data.data();
  for (uint64_t b = 0; b < nb; ++b, p += block_bytes) {
    uint16_t d = load<uint16_t>(p + off0);
    if ((d & kF16.exp_mask) == kF16.exp_mask) return describe(d, kF16, true, b);
    if (off1 >= 0) {
      uint16_t m = load<uint16_t>(p + off1);
      if ((m & kF16.exp_mask) == kF16.exp_mask) return describe(m, kF16, true, b);
    }
  }
  return std::nullopt;
}

std::optional<NonFinite> scan_q8_k(std::span<const uint8_t> data, uint32_t block_bytes) {  // f32 d first
  const uint64_t nb = data.size() / block_bytes;
  for (uint64_t b = 0; b < nb; ++b) {
    uint32_t d = load<uint32_t>(data.data() + b * block_bytes);
    if ((d & kF32.exp_mask) == kF32.exp_mask) return describe(d, kF32, true, b);
  }
  return std::nullopt;
}

}  // namespace

bool can_check_finite(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::Q8_K:
      return true;
    default:
      return false;
  }
}

std::optional<NonFinite> find_non_finite(GgmlType t, std::span<const uint8_t> data) {
  const uint32_t bb = traits(t).type_size;
  switch (t) {  // scale offsets: GGML's block structs (ggml-common.h), as dequant.cpp reads them
    case GgmlType::F32: return scan_plain(data, kF32);
    case GgmlType::F16: return scan_plain(data, kF16);
    case GgmlType::BF16: return scan_plain(data, kBF16);
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: return scan_scales(data, bb, 0, -1);  // d
    case GgmlType::Q4_1: case GgmlType::Q5_1: return scan_scales(data, bb, 0, 2);                        // d, m
    case GgmlType::Q4_K: case GgmlType::Q5_K: return scan_scales(data, bb, 0, 2);                        // d, dmin
    case GgmlType::Q2_K: return scan_scales(data, bb, 80, 82);                                           // d, dmin last
    case GgmlType::Q3_K: return scan_scales(data, bb, 108, -1);                                          // d last
    case GgmlType::Q6_K: return scan_scales(data, bb, 208, -1);                                          // d last
    case GgmlType::Q8_K: return scan_q8_k(data, bb);
    default: return std::nullopt;
  }
}

}  // namespace ggflow::gguf
