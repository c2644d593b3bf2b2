// GGML's GELU on the CPU (ggml-cpu's GGML_GELU_FP16, which its ggml_vec_gelu_f32 and
// ggml_vec_geglu_f32 use): outside (-10, 10) the identity (x >= 10) or 0 (x <= -10); inside, a table
// of f16 values read at x's f16 rounding. Entry h is the f16 rounding of the tanh form at h's value,
// 0.5 v (1 + tanhf(sqrt(2/pi) v (1 + 0.044715 v^2))), in f32 with the C library's tanhf, as ggml
// fills its table. This is the bit definition of Gelu mode tanh_f16: the reference evaluator calls
// gelu_f16, the CPU kernels read the same table (cpu/kernels/act.h).
#pragma once

#include <cstdint>

namespace ggflow::ir {

// The 65536 entries (indexed by f16 bits) and one zero entry after them, so that a 32-bit gather
// at entry 0xFFFF stays inside the array.
const uint16_t* gelu_f16_table();

float gelu_f16(float x);

}  // namespace ggflow::ir
