// find_non_finite against the reference dequantizer: for every quantized type and every even byte
// offset of a block, a NaN written there is reported (block and all) exactly when dequantization
// turns it into a non-finite value, so the scale offsets are the dequantizer's, and data bytes are
// never mistaken for scales. Plain types: the first NaN/Inf found, its kind and sign.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gguf/dequant.h"
#include "gguf/finite.h"

namespace ggflow::gguf {
namespace {

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

TEST(Finite, QuantizedScalesMatchTheDequantizer) {
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                            GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  std::mt19937 rng(7);
  for (GgmlType t : types) {
    SCOPED_TRACE(std::string(traits(t).name));
    ASSERT_TRUE(can_check_finite(t));
    const uint32_t bb = traits(t).type_size, bs = traits(t).block_size;
    const uint64_t n_blocks = 3, n = n_blocks * bs;
    std::vector<uint8_t> base(n_blocks * bb);
    for (size_t i = 0; i < base.size(); ++i) {
      base[i] = uint8_t(rng());
      if (i % 2) base[i] &= 0xbf;  // every little-endian f16 at an even offset has a finite exponent
    }
    std::vector<float> out(n);
    ASSERT_TRUE(dequantize(t, base, n, out.data()));
    ASSERT_TRUE(all_finite(out));
    EXPECT_FALSE(find_non_finite(t, base).has_value());
    int scales = 0;
    for (uint32_t off = 0; off + 2 <= bb; off += 2) {
      std::vector<uint8_t> b = base;
      b[bb + off] = 0x00, b[bb + off + 1] = 0x7e;  // f16 NaN at `off` of block 1
      ASSERT_TRUE(dequantize(t, b, n, out.data()));
      const bool dequant_bad = !all_finite(out);
      auto found = find_non_finite(t, b);
      EXPECT_EQ(found.has_value(), dequant_bad) << "byte offset " << off;
      if (found) {
        EXPECT_TRUE(found->in_scale);
        EXPECT_TRUE(found->is_nan);
        EXPECT_EQ(found->index, 1u);
        ++scales;
      }
    }
    EXPECT_GE(scales, 1);
    EXPECT_LE(scales, 2);
  }
}

TEST(Finite, InfScaleHasItsSign) {
  std::vector<uint8_t> b(2 * 34, 0);
  b[34] = 0x00, b[35] = 0xfc;  // block 1's d = -Inf
  auto f = find_non_finite(GgmlType::Q8_0, b);
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->is_nan);
  EXPECT_TRUE(f->negative);
  EXPECT_EQ(f->index, 1u);
}

TEST(Finite, PlainTypesFindTheFirst) {
  std::vector<float> v(10000, 0.25f);
  EXPECT_FALSE(find_non_finite(GgmlType::F32, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}));
  v[5000] = -std::numeric_limits<float>::infinity();
  v[9000] = std::numeric_limits<float>::quiet_NaN();
  auto f = find_non_finite(GgmlType::F32, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->index, 5000u);
  EXPECT_FALSE(f->is_nan);
  EXPECT_TRUE(f->negative);
  EXPECT_FALSE(f->in_scale);
  v[4095] = std::numeric_limits<float>::quiet_NaN();  // the last element of the first chunk
  f = find_non_finite(GgmlType::F32, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->index, 4095u);
  EXPECT_TRUE(f->is_nan);
  // f16 and bf16: 1.0 is finite, then +Inf
  std::vector<uint16_t> h(300, 0x3c00);
  EXPECT_FALSE(find_non_finite(GgmlType::F16, {reinterpret_cast<const uint8_t*>(h.data()), h.size() * 2}));
  h[299] = 0x7c00;
  f = find_non_finite(GgmlType::F16, {reinterpret_cast<const uint8_t*>(h.data()), h.size() * 2});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->index, 299u);
  EXPECT_FALSE(f->is_nan || f->negative);
  std::vector<uint16_t> bf(300, 0x3f80);
  EXPECT_FALSE(find_non_finite(GgmlType::BF16, {reinterpret_cast<const uint8_t*>(bf.data()), bf.size() * 2}));
  bf[1] = 0x7fc0;
  f = find_non_finite(GgmlType::BF16, {reinterpret_cast<const uint8_t*>(bf.data()), bf.size() * 2});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->index, 1u);
  EXPECT_TRUE(f->is_nan);
  // integer types hold no NaN
  EXPECT_FALSE(can_check_finite(GgmlType::I32));
  EXPECT_FALSE(find_non_finite(GgmlType::I32, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}));
}

}  // namespace
}  // namespace ggflow::gguf
