// The GGML type table: every tensor type a GGUF file can carry, with its block geometry.
// Every type is described (so any file can be read and inspected) even where later layers
// cannot compute with it; `has_dequant` says whether ggflow's reference dequantizer handles it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ggflow::gguf {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;   // as llama.cpp and the gguf package print it ("Q4_K")
  uint32_t block_size;     // elements per block (1 for plain types)
  uint32_t type_size;      // bytes per block
  bool quantized;          // block-quantized (not a plain scalar type)
  bool has_dequant;        // ggflow's reference dequantizer handles it
};

// nullptr for an id that is not a known GGML type (ids 4 and 5 were removed from GGML).
const TypeTraits* type_traits(uint32_t id);
inline const TypeTraits& traits(GgmlType t) { return *type_traits(static_cast<uint32_t>(t)); }
// Bytes of n elements of type t, n a multiple of its block size (a row of a weight, a tensor).
inline uint64_t row_bytes(GgmlType t, uint64_t n) { return n / traits(t).block_size * traits(t).type_size; }
std::optional<GgmlType> type_from_name(std::string_view name);  // "q4_k" or "Q4_K"

}  // namespace ggflow::gguf
