// Finding NaN and Inf in a tensor's stored bytes, without dequantizing it.
//
// Plain float tensors (F32, F16, BF16) are checked element by element (an exponent field of all
// ones is NaN or Inf). A block-quantized tensor can only hold a non-finite value through the f16
// (or f32) scales of its blocks: the quantized values are small integers and the K-quant sub-scales
// are 4- or 6-bit integers, so checking every block's scales (`d`, and `dmin`/`m` where the type
// has one) checks the whole tensor, reading a few bytes per block.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "gguf/types.h"

namespace ggflow::gguf {

struct NonFinite {
  bool is_nan = false;     // NaN, else +Inf or -Inf
  bool negative = false;   // -Inf
  bool in_scale = false;   // a block's scale (quantized types); otherwise an element
  uint64_t index = 0;      // the element (plain types) or the block (quantized types)
};

// Whether find_non_finite knows where the type keeps its non-finite-capable values (F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K). Integer types hold none.
bool can_check_finite(GgmlType t);

// The first NaN/Inf in `data` (whole blocks of type `t`); nullopt if there is none or the type
// is not one can_check_finite knows. A trailing partial block is ignored.
std::optional<NonFinite> find_non_finite(GgmlType t, std::span<const uint8_t> data);

}  // namespace ggflow::gguf
