// GGUF metadata values: the 13 value types, arrays (of any type, nested), typed conversion.
// Strings and arrays point into the file's bytes (zero-copy); a Value is valid while the File
// (or the byte buffer it was parsed from) lives.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ggflow::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
constexpr uint32_t kValueTypeCount = 13;

std::string_view value_type_name(ValueType t);  // "u32", "string", "array", ...
size_t value_type_size(ValueType t);            // bytes of one scalar; 0 for STRING and ARRAY

struct Value;

struct Array {
  ValueType elem = ValueType::UINT8;
  uint64_t size = 0;
  const uint8_t* raw = nullptr;            // scalar elements: size * value_type_size(elem) bytes
  std::vector<std::string_view> strings;   // elem == STRING
  std::vector<Value> arrays;               // elem == ARRAY (nested)
};

struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;          // unsigned integers and bool
  int64_t i = 0;           // signed integers
  double f = 0;            // FLOAT32 (exactly widened) and FLOAT64
  std::string_view s;      // STRING
  std::shared_ptr<Array> arr;  // ARRAY

  bool is_integer() const;
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
  // Human-readable, arrays abbreviated to their first `max_items` elements.
  std::string to_string(size_t max_items = 8) const;
};

// Typed conversion used by File::get<T>. Integers convert between widths when the value fits;
// f32/f64 convert to each other; nothing else converts. The error names `key` and both types.
template <class T>
Result<T> convert(const Value& v, std::string_view key);

}  // namespace ggflow::gguf
