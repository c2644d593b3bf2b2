#include "gguf/value.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

namespace ggflow::gguf {

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[kValueTypeCount] = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < kValueTypeCount ? kNames[i] : "unknown";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    default: return 0;
  }
}

static bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default: return false;
  }
}

// Decode scalar element `i` of a raw little-endian array into a Value.
static Value element(const Array& a, uint64_t i) {
  Value v;
  v.type = a.elem;
  const uint8_t* p = a.raw + i * value_type_size(a.elem);
  switch (a.elem) {
    case ValueType::UINT8: v.u = p[0]; break;
    case ValueType::BOOL: v.u = p[0] != 0; break;
    case ValueType::INT8: { int8_t x; std::memcpy(&x, p, 1); v.i = x; break; }
    case ValueType::UINT16: { uint16_t x; std::memcpy(&x, p, 2); v.u = x; break; }
    case ValueType::INT16: { int16_t x; std::memcpy(&x, p, 2); v.i = x; break; }
    case ValueType::UINT32: { uint32_t x; std::memcpy(&x, p, 4); v.u = x; break; }
    case ValueType::INT32: { int32_t x; std::memcpy(&x, p, 4); v.i = x; break; }
    case ValueType::UINT64: { uint64_t x; std::memcpy(&x, p, 8); v.u = x; break; }
    case ValueType::INT64: { int64_t x; std::memcpy(&x, p, 8); v.i = x; break; }
    case ValueType::FLOAT32: { float x; std::memcpy(&x, p, 4); v.f = x; break; }
    case ValueType::FLOAT64: { double x; std::memcpy(&x, p, 8); v.f = x; break; }
    default: break;
  }
  return v;
}

std::string Value::to_string(size_t max_items) const {
  switch (type) {
    case ValueType::BOOL: return u ? "true" : "false";
    case ValueType::FLOAT32: return fmt::format("{}", static_cast<float>(f));
    case ValueType::FLOAT64: return fmt::format("{}", f);
    case ValueType::STRING: {
      std::string out = "\"";
      for (char c : s.substr(0, 200)) {
        if (c == '\n') out += "\\n";
        else if (c == '"') out += "\\\"";
        else out += c;
      }
      return out + (s.size() > 200 ? "...\"" : "\"");
    }
    case ValueType::ARRAY: {
      std::string out = fmt::format("{}[{}] [", value_type_name(arr->elem), arr->size);
      for (uint64_t k = 0; k < arr->size && k < max_items; ++k) {
        if (k) out += ", ";
        if (arr->elem == ValueType::STRING) { Value e; e.type = ValueType::STRING; e.s = arr->strings[k]; out += e.to_string(); }
        else if (arr->elem == ValueType::ARRAY) out += arr->arrays[k].to_string(max_items);
        else out += element(*arr, k).to_string();
      }
      return out + (arr->size > max_items ? ", ...]" : "]");
    }
    default: return is_signed(type) ? std::to_string(i) : std::to_string(u);
  }
}

namespace {

Error type_error(std::string_view key, const Value& v, std::string_view want) {
  return make_error(fmt::format("metadata key '{}' has type {}, expected {}", key,
                                value_type_name(v.type), want),
                    "the file stores this key with another type than ggflow expects");
}

template <class I>
Result<I> to_int(const Value& v, std::string_view key) {
  if (!v.is_integer() && v.type != ValueType::BOOL) return type_error(key, v, "an integer");
  if (is_signed(v.type)) {
    if constexpr (std::is_signed_v<I>) {
      if (v.i < std::numeric_limits<I>::min() || v.i > std::numeric_limits<I>::max())
        return make_error(fmt::format("metadata key '{}' = {} does not fit the expected integer type", key, v.i));
    } else {
      if (v.i < 0 || static_cast<uint64_t>(v.i) > std::numeric_limits<I>::max())
        return make_error(fmt::format("metadata key '{}' = {} does not fit the expected unsigned type", key, v.i));
    }
    return static_cast<I>(v.i);
  }
  if (v.u > static_cast<uint64_t>(std::numeric_limits<I>::max()))
    return make_error(fmt::format("metadata key '{}' = {} does not fit the expected integer type", key, v.u));
  return static_cast<I>(v.u);
}

template <class E>
Result<std::vector<E>> to_vector(const Value& v, std::string_view key) {
  if (v.type != ValueType::ARRAY) return type_error(key, v, "an array");
  const Array& a = *v.arr;
  std::vector<E> out;
  out.reserve(a.size);
  for (uint64_t k = 0; k < a.size; ++k) {
    Value e;
    if (a.elem == ValueType::STRING) { e.type = ValueType::STRING; e.s = a.strings[k]; }
    else if (a.elem == ValueType::ARRAY) e = a.arrays[k];
    else e = element(a, k);
    auto r = convert<E>(e, key);
    if (!r) return r.error();
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

template <class T>
Result<T> convert(const Value& v, std::string_view key) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v.type != ValueType::BOOL) return type_error(key, v, "bool");
    return v.u != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return to_int<T>(v, key);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_float()) return type_error(key, v, "a float");
    return static_cast<T>(v.f);
  } else if constexpr (std::is_same_v<T, std::string_view>) {
    if (v.type != ValueType::STRING) return type_error(key, v, "string");
    return v.s;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.type != ValueType::STRING) return type_error(key, v, "string");
    return std::string(v.s);
  } else {
    return to_vector<typename T::value_type>(v, key);
  }
}

#define GGFLOW_CONVERT(T) template Result<T> convert<T>(const Value&, std::string_view); \
  template Result<std::vector<T>> convert<std::vector<T>>(const Value&, std::string_view);
GGFLOW_CONVERT(bool)
GGFLOW_CONVERT(uint8_t)
GGFLOW_CONVERT(int8_t)
GGFLOW_CONVERT(uint16_t)
GGFLOW_CONVERT(int16_t)
GGFLOW_CONVERT(uint32_t)
GGFLOW_CONVERT(int32_t)
GGFLOW_CONVERT(uint64_t)
GGFLOW_CONVERT(int64_t)
GGFLOW_CONVERT(float)
GGFLOW_CONVERT(double)
GGFLOW_CONVERT(std::string)
GGFLOW_CONVERT(std::string_view)
#undef GGFLOW_CONVERT

}  // namespace ggflow::gguf
