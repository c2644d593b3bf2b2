// Reference dequantization to f32: scalar, obviously correct, the oracle for every later kernel.
// The formulas are GGML's, written in the order that gives the same f32 bits as the `gguf`
// Python package (tests/gguf compare the two bit for bit).
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "gguf/types.h"

namespace ggflow::gguf {

float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);   // round to nearest even, as numpy's astype(float16)
uint16_t f32_to_bf16(float f);  // round to nearest even, NaN kept quiet

bool can_dequantize(GgmlType t);
// Dequantize `n` elements (a multiple of the type's block size) from `src` into `dst`.
// Errors: unsupported type, `n` not a multiple of the block size, `src` too short.
Status dequantize(GgmlType t, std::span<const uint8_t> src, uint64_t n, float* dst);

}  // namespace ggflow::gguf
