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

// Drops the resident pages of [p, p + n) when that range lies inside a live MappedBytes (read-only,
// private, never written): a later read faults them in again from the file, so this only lowers
// RSS once a copy replaces them (the executor's packed weights). Returns false, touching nothing,
// for any other memory (heap copies, foreign buffers) or when madvise fails.
bool release_file_pages(const void* p, size_t n);

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
