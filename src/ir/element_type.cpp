#include "ir/element_type.h"

namespace ggflow::ir {

std::string_view to_string(ElementType t) {
  switch (t) {
    case ElementType::undefined: return "undefined";
#define X(n, b) \
  case ElementType::n: return #n;
    GGFLOW_IR_PLAIN_TYPES(X) GGFLOW_IR_BLOCK_TYPES(X)
#undef X
  }
  return "?";
}

std::optional<ElementType> element_type_from_name(std::string_view name) {
#define X(n, b) \
  if (name == #n) return ElementType::n;
  GGFLOW_IR_PLAIN_TYPES(X) GGFLOW_IR_BLOCK_TYPES(X)
#undef X
  if (name == "bool") return ElementType::boolean;
  return std::nullopt;
}

bool is_block(ElementType t) { return t >= ElementType::q4_0; }
bool is_float(ElementType t) {
  return t == ElementType::f32 || t == ElementType::f16 || t == ElementType::bf16;
}
bool is_integer(ElementType t) {
  return t == ElementType::i64 || t == ElementType::i32 || t == ElementType::u8;
}

std::optional<gguf::GgmlType> to_ggml(ElementType t) {
  switch (t) {
    case ElementType::f32: return gguf::GgmlType::F32;
    case ElementType::f16: return gguf::GgmlType::F16;
    case ElementType::bf16: return gguf::GgmlType::BF16;
    case ElementType::i32: return gguf::GgmlType::I32;
    case ElementType::i64: return gguf::GgmlType::I64;
#define X(n, b) \
  case ElementType::n: return gguf::GgmlType::b;
      GGFLOW_IR_BLOCK_TYPES(X)
#undef X
    default: return std::nullopt;
  }
}

std::optional<ElementType> from_ggml(gguf::GgmlType t) {
  switch (t) {
    case gguf::GgmlType::F32: return ElementType::f32;
    case gguf::GgmlType::F16: return ElementType::f16;
    case gguf::GgmlType::BF16: return ElementType::bf16;
    case gguf::GgmlType::I32: return ElementType::i32;
    case gguf::GgmlType::I64: return ElementType::i64;
#define X(n, b) \
  case gguf::GgmlType::b: return ElementType::n;
      GGFLOW_IR_BLOCK_TYPES(X)
#undef X
    default: return std::nullopt;
  }
}

size_t scalar_size(ElementType t) {
  switch (t) {
#define X(n, b) \
  case ElementType::n: return b;
    GGFLOW_IR_PLAIN_TYPES(X)
#undef X
    default: return 0;
  }
}

int64_t block_size(ElementType t) {
  if (!is_block(t)) return 1;
  return gguf::traits(*to_ggml(t)).block_size;
}

size_t byte_size(ElementType t, int64_t n) {
  if (!is_block(t)) return scalar_size(t) * static_cast<size_t>(n);
  const auto& tr = gguf::traits(*to_ggml(t));
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

}  // namespace ggflow::ir
