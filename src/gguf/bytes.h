// Owners of a GGUF file's bytes: a read-only memory map, or a heap copy.
#pragma once

#include <string>
#include <vector>

#include "gguf/file.h"

namespace ggflow::gguf {

class HeapBytes final : public Bytes {
 public:
  explicit HeapBytes(std::vector<uint8_t> v) : v_(std::move(v)) {}
  std::span<const uint8_t> span() const override { return {v_.data(), v_.size()}; }

 private:
  std::vector<uint8_t> v_;
};

class MappedBytes final : public Bytes {
 public:
  static Result<std::shared_ptr<const Bytes>> map(const std::string& path);
  ~MappedBytes() override;
  std::span<const uint8_t> span() const override { return {data_, size_}; }

 private:
  MappedBytes(const uint8_t* d, size_t n) : data_(d), size_(n) {}
  const uint8_t* data_;
  size_t size_;
};

}  // namespace ggflow::gguf
