// Element types of IR tensors: the plain scalar types activations use, plus the GGUF block types
// a weight Constant may hold (memory-mapped from the file, never converted at load time).
// A block type describes `block_size` logical elements stored in `type_size` bytes; only
// Constant, Convert (to f32), Gather (rows, to f32), MatMul (weights) and PagedAttention (a q8_0
// KV cache) accept block inputs; Convert makes one block type, q8_0 from f32 (the KV cache's rounding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "gguf/types.h"

namespace ggflow::ir {

// X(name, scalar bytes) for plain types; X(name, GgmlType) for block types.
#define GGFLOW_IR_PLAIN_TYPES(X) \
  X(f32, 4) X(f16, 2) X(bf16, 2) X(i64, 8) X(i32, 4) X(u8, 1) X(boolean, 1)
#define GGFLOW_IR_BLOCK_TYPES(X)                                                              \
  X(q4_0, Q4_0) X(q4_1, Q4_1) X(q5_0, Q5_0) X(q5_1, Q5_1) X(q8_0, Q8_0) X(q2_k, Q2_K)        \
  X(q3_k, Q3_K) X(q4_k, Q4_K) X(q5_k, Q5_K) X(q6_k, Q6_K) X(q8_k, Q8_K) X(iq4_nl, IQ4_NL)     \
  X(iq4_xs, IQ4_XS)

enum class ElementType : uint8_t {
  undefined,
#define X(n, b) n,
  GGFLOW_IR_PLAIN_TYPES(X) GGFLOW_IR_BLOCK_TYPES(X)
#undef X
};

std::string_view to_string(ElementType t);                   // "f32", "q4_k", "undefined"
std::optional<ElementType> element_type_from_name(std::string_view name);
bool is_block(ElementType t);                                // a GGUF block type
bool is_float(ElementType t);                                // f32, f16, bf16
bool is_integer(ElementType t);                              // i64, i32, u8
// The GGML type of a block type or plain f32/f16/bf16/i32/i64; nullopt for the others.
std::optional<gguf::GgmlType> to_ggml(ElementType t);
std::optional<ElementType> from_ggml(gguf::GgmlType t);
// Bytes of one element (plain types) or 0 for block types (use byte_size).
size_t scalar_size(ElementType t);
int64_t block_size(ElementType t);                           // 1 for plain types
// Bytes to store `n` elements (n must be a multiple of block_size for block types).
size_t byte_size(ElementType t, int64_t n);

}  // namespace ggflow::ir
