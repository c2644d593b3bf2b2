// A GGUF writer for test fixtures and synthetic models. It writes what File reads, and can also
// be told to write deliberately damaged files (via raw access to the bytes) for the fuzz corpus.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/types.h"
#include "gguf/value.h"

namespace ggflow::gguf {

class Writer {
 public:
  explicit Writer(uint32_t version = 3, uint64_t alignment = 32);

  void set_u8(const std::string& k, uint8_t v);
  void set_i8(const std::string& k, int8_t v);
  void set_u16(const std::string& k, uint16_t v);
  void set_i16(const std::string& k, int16_t v);
  void set_u32(const std::string& k, uint32_t v);
  void set_i32(const std::string& k, int32_t v);
  void set_u64(const std::string& k, uint64_t v);
  void set_i64(const std::string& k, int64_t v);
  void set_f32(const std::string& k, float v);
  void set_f64(const std::string& k, double v);
  void set_bool(const std::string& k, bool v);
  void set_str(const std::string& k, const std::string& v);
  void set_arr_str(const std::string& k, const std::vector<std::string>& v);
  void set_arr_i32(const std::string& k, const std::vector<int32_t>& v);
  void set_arr_f32(const std::string& k, const std::vector<float>& v);
  void set_arr_u8(const std::string& k, const std::vector<uint8_t>& v);
  void set_arr_bool(const std::string& k, const std::vector<uint8_t>& v);  // 0 or 1 each

  // `ne` in GGML order (innermost first); `data` must be exactly the tensor's byte size.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> ne,
                    std::span<const uint8_t> data);
  Status add_tensor_f32(const std::string& name, std::vector<uint64_t> ne,
                        std::span<const float> data);

  std::vector<uint8_t> to_bytes() const;
  Status write(const std::string& path) const;

 private:
  struct Kv { std::string key; ValueType type; std::vector<uint8_t> payload; };
  struct Tensor { std::string name; GgmlType type; std::vector<uint64_t> ne; std::vector<uint8_t> data; };
  void set_scalar(const std::string& k, ValueType t, const void* p, size_t n);
  uint32_t version_;
  uint64_t alignment_;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace ggflow::gguf
