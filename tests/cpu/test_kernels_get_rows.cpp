// Kernel sweep, part 5: get_rows (cpu/kernels/get_rows.h) for every table type the reader
// dequantizes: the gathered rows equal gguf::dequantize of the whole table, row by row, by memcmp;
// every ISA, strided outputs, repeated indices, row-range splits; bad tables and indices are errors.
// Prints "N passed, N failed".
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/get_rows.h"
#include "gguf/dequant.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::same_bits;

sweep::Tally tally("test_kernels_get_rows");

using gguf::GgmlType;

// Random table bytes with every f16 in a sane range (scales and plain values finite), so the rows
// are ordinary numbers: each 2-byte word gets a random f16 of magnitude < 4 where the type stores
// f16 data; other bytes are random.
std::vector<uint8_t> random_table(GgmlType t, size_t bytes, std::mt19937& rng) {
  std::vector<uint8_t> b(bytes);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  if (t == GgmlType::F32) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
      float f = d(rng);
      std::memcpy(&b[i], &f, 4);
    }
  } else if (t == GgmlType::F16 || t == GgmlType::BF16) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (size_t i = 0; i + 2 <= bytes; i += 2) {
      const uint16_t h = t == GgmlType::F16 ? gguf::f32_to_f16(d(rng)) : gguf::f32_to_bf16(d(rng));
      std::memcpy(&b[i], &h, 2);
    }
  } else {
    // clear the top exponent bit of every f16-aligned word's high byte: |value| < 2 or subnormal,
    // never inf/NaN (the block scales sit at even offsets in every block layout)
    for (size_t i = 1; i < bytes; i += 2) b[i] &= 0xBF;
  }
  return b;
}

TEST(KernelsGetRows, AllTypes) {
  std::mt19937 rng(17);
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                            GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  for (GgmlType t : types) {
    const gguf::TypeTraits& tr = gguf::traits(t);
    for (int64_t blocks_per_row : {1, 2, 3}) {
      const int64_t row_elems = tr.block_size == 1 ? 96 * blocks_per_row - 1 : tr.block_size * blocks_per_row;
      for (int64_t n_rows : {1, 7}) {
        auto rb = row_bytes(t, row_elems);
        tally.check(rb.ok(), std::string(tr.name) + ": row_bytes");
        if (!rb) continue;
        const std::vector<uint8_t> table = random_table(t, *rb * n_rows, rng);
        std::vector<float> all(n_rows * row_elems);
        tally.check(gguf::dequantize(t, table, n_rows * row_elems, all.data()).ok(), std::string(tr.name) + ": dequantize");
        const std::vector<int32_t> idx = {static_cast<int32_t>(n_rows - 1), 0, static_cast<int32_t>(n_rows / 2),
                                          static_cast<int32_t>(n_rows - 1), 0};
        const int64_t R = static_cast<int64_t>(idx.size()), ys = row_elems + 3;
        RowTable rt{t, table.data(), table.size(), n_rows, row_elems};
        const std::string tag = std::string(tr.name) + " row_elems=" + std::to_string(row_elems) + " n_rows=" + std::to_string(n_rows);
        for (Isa isa : supported_isas()) {
          std::vector<float> y(R * ys, -3.0f), split(R * ys, -3.0f);
          tally.check(get_rows(isa, rt, idx.data(), y.data(), ys, 0, R).ok(), tag + ": get_rows failed");
          bool same = true;
          for (int64_t r = 0; r < R; ++r)
            same = same && same_bits(y.data() + r * ys, all.data() + idx[r] * row_elems, row_elems);
          tally.check(same, tag + " " + isa_name(isa) + ": rows != gguf::dequantize");
          bool ok = get_rows(isa, rt, idx.data(), split.data(), ys, 0, 2).ok() &&
                    get_rows(isa, rt, idx.data(), split.data(), ys, 2, R).ok();
          tally.check(ok && same_bits(split, y),
                      tag + " " + isa_name(isa) + ": row split differs");
        }
      }
    }
  }
}

TEST(KernelsGetRows, Errors) {
  std::vector<uint8_t> table(18 * 4);  // 4 rows of one Q4_0 block
  std::vector<float> y(64);
  const int32_t good[1] = {3}, neg[1] = {-1}, past[1] = {4};
  RowTable rt{GgmlType::Q4_0, table.data(), table.size(), 4, 32};
  tally.check(get_rows(Isa::scalar, rt, good, y.data(), 32, 0, 1).ok(), "valid get_rows rejected");
  tally.check(!get_rows(Isa::scalar, rt, neg, y.data(), 32, 0, 1).ok(), "negative index accepted");
  tally.check(!get_rows(Isa::scalar, rt, past, y.data(), 32, 0, 1).ok(), "index past the table accepted");
  RowTable shortt = rt;
  shortt.bytes = 18 * 3;
  tally.check(!get_rows(Isa::scalar, shortt, good, y.data(), 32, 0, 1).ok(), "short table accepted");
  RowTable odd = rt;
  odd.row_elems = 40;
  tally.check(!get_rows(Isa::scalar, odd, good, y.data(), 32, 0, 1).ok(), "row not a multiple of the block accepted");
  RowTable unsupported = rt;
  unsupported.type = GgmlType::IQ2_XXS;
  tally.check(!get_rows(Isa::scalar, unsupported, good, y.data(), 32, 0, 1).ok(), "unsupported type accepted");
}

}  // namespace
}  // namespace ggflow::cpu
