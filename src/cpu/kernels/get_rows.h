// get_rows: gather rows of a GGUF table (an embedding matrix) by index into f32, bit-identical to
// gguf::dequantize by construction: F32 rows are copied, F16/BF16 converted by the reader's exact
// conversions, and block-quantized rows (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K) decoded by
// gguf::dequantize itself, one row at a time. This runs once per token per lookup, so there are no
// SIMD versions; the ISA argument keeps the kernel interface uniform.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"
#include "gguf/types.h"

namespace ggflow::cpu {

struct RowTable {
  gguf::GgmlType type = gguf::GgmlType::F32;
  const uint8_t* data = nullptr;  // n_rows rows of row_elems elements in `type`, row after row
  size_t bytes = 0;               // size of `data`, checked
  int64_t n_rows = 0;
  int64_t row_elems = 0;          // a multiple of the type's block size
};

// Bytes of one row of the table.
Result<size_t> row_bytes(gguf::GgmlType type, int64_t row_elems);
// y row r (at y + r*ys) = table row idx[r], for r in [r0, r1). Errors: an unsupported type, a row
// length that is not a multiple of the block size, a table shorter than n_rows rows, an index
// outside [0, n_rows). Rows before a bad index are written.
Status get_rows(Isa isa, const RowTable& table, const int32_t* idx, float* y, int64_t ys, int64_t r0, int64_t r1);

}  // namespace ggflow::cpu
