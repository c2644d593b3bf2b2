// The GGUF container (v2 and v3, little-endian), memory-mapped and validated before use.
//
// Layout: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv key/values, n_tensors tensor
// infos (name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to `general.alignment`
// (default 32), then the data section. Every count, length, dimension, offset and byte size is
// checked against the bytes that remain, with overflow-safe arithmetic, before it is used; a bad
// file gives an Error naming the field, its byte offset and the limit it broke.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/types.h"
#include "gguf/value.h"

namespace ggflow::gguf {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kDefaultAlignment = 32;

struct KeyValue {
  std::string_view key;
  Value value;
  uint64_t offset;  // byte offset of the key in the file
};

struct TensorInfo {
  std::string_view name;
  GgmlType type;
  std::vector<uint64_t> ne;  // GGML order: ne[0] is the innermost (contiguous) dimension
  uint64_t offset;           // relative to the data section
  uint64_t n_elements;
  uint64_t n_bytes;
  uint64_t info_offset;      // byte offset of the tensor info in the file
};

// Owner of the file's bytes: an mmap'd file, or a copied buffer. Shared so that zero-copy
// weight constants can keep the mapping alive after the File object is gone.
class Bytes {
 public:
  virtual ~Bytes() = default;
  virtual std::span<const uint8_t> span() const = 0;
};

struct ParseLimits {
  uint64_t max_string = 1ull << 30;       // one string (bytes)
  uint64_t max_array = 1ull << 31;        // elements of one array
  uint32_t max_array_depth = 4;           // nested arrays
};

class File {
 public:
  // mmap `path` and parse it. Errors: missing/unreadable file, not GGUF, damaged GGUF.
  static Result<File> open(const std::string& path, const ParseLimits& limits = {});
  // Parse a copy of `bytes` (tests, fuzzing, files written in memory).
  static Result<File> parse(std::span<const uint8_t> bytes, const ParseLimits& limits = {});

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_->span().size(); }
  const std::string& path() const { return path_; }

  const std::vector<KeyValue>& metadata() const { return kvs_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed accessor: `get<uint32_t>("llama.block_count")`. T is an integer type, float, double,
  // bool, std::string, std::string_view, or std::vector of those (for arrays). Errors name the key
  // and say whether it is absent or of another type.
  template <class T>
  Result<T> get(std::string_view key) const {
    const Value* v = find(key);
    if (!v) return make_error("metadata key '" + std::string(key) + "' is missing",
                              "this file does not carry it; check the model's architecture");
    return convert<T>(*v, key);
  }
  // `general.architecture`, or "" when absent.
  std::string_view architecture() const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes inside the data section (validated at parse time).
  std::span<const uint8_t> tensor_data(const TensorInfo& t) const;
  std::shared_ptr<const Bytes> bytes() const { return bytes_; }

 private:
  friend class Parser;
  std::shared_ptr<const Bytes> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::map<std::string_view, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string_view, size_t, std::less<>> tensor_index_;
};

}  // namespace ggflow::gguf
