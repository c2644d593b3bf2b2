// get_rows (get_rows.h): the row gather over the reader's dequantizer.
#include "cpu/kernels/get_rows.h"

#include <cstring>
#include <string>

#include "gguf/dequant.h"

namespace ggflow::cpu {

Result<size_t> row_bytes(gguf::GgmlType type, int64_t row_elems) {
  const gguf::TypeTraits* tr = gguf::type_traits(static_cast<uint32_t>(type));
  if (!tr || !gguf::can_dequantize(type))
    return make_error("get_rows: tables of type " + std::string(tr ? tr->name : "?") + " are not supported",
                      "supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K");
  if (row_elems < 0 || row_elems % tr->block_size != 0)
    return make_error("get_rows: a row of " + std::to_string(row_elems) + " elements is not a multiple of the " +
                      std::string(tr->name) + " block size " + std::to_string(tr->block_size));
  return static_cast<size_t>(row_elems / tr->block_size) * tr->type_size;
}

Status get_rows(Isa, const RowTable& t, const int32_t* idx, float* y, int64_t ys, int64_t r0, int64_t r1) {
  auto rb = row_bytes(t.type, t.row_elems);
  if (!rb) return rb.error();
  if (t.n_rows < 0 || static_cast<uint64_t>(t.n_rows) * *rb > t.bytes)
    return make_error("get_rows: a table of " + std::to_string(t.n_rows) + " rows needs " +
                      std::to_string(static_cast<uint64_t>(t.n_rows) * *rb) + " bytes, got " + std::to_string(t.bytes));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i = idx[r];
    if (i < 0 || i >= t.n_rows)
      return make_error("get_rows: index " + std::to_string(i) + " (row " + std::to_string(r) + ") is outside [0, " +
                        std::to_string(t.n_rows) + ")");
    const uint8_t* src = t.data + static_cast<size_t>(i) * *rb;
    float* dst = y + r * ys;
    if (t.type == gguf::GgmlType::F32) {
      std::memcpy(dst, src, static_cast<size_t>(t.row_elems) * sizeof(float));
      continue;
    }
    if (auto st = gguf::dequantize(t.type, {src, *rb}, static_cast<uint64_t>(t.row_elems), dst); !st) return st;
  }
  return {};
}

}  // namespace ggflow::cpu
