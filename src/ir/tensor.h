// Host tensors: the values the reference evaluator computes with and Constants hold.
//
// A Tensor is an element type, a static shape (outermost first) and a byte buffer, dense and
// row-major. The buffer is shared (copying a Tensor is cheap) and is either owned (allocated
// here, zero-filled) or a view into someone else's bytes kept alive by `owner` (a memory-mapped
// GGUF file: weight constants are zero-copy). Kernels never write into a tensor they did not
// just allocate, so sharing is safe; the one exception is an input that the op declares as
// aliased by an output (op_list.h, GGFLOW_IR_ALIASES), which the evaluator hands over exclusively.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/element_type.h"

namespace ggflow::ir {

class Tensor {
 public:
  Tensor() = default;
  // Owned, zero-filled. For block types the innermost dimension must be a multiple of the block.
  Tensor(ElementType type, std::vector<int64_t> shape);
  // Owned, zero-filled on first touch: an anonymous private mapping (address space only), whose
  // pages the kernel fills with zeros when they are first written, so pages never written cost no
  // memory (a large KV pool is free until it is used). Errors when the mapping cannot be made.
  static Result<Tensor> reserve(ElementType type, std::vector<int64_t> shape);
  // A zero-copy view. Errors when `bytes` is not exactly the size the type and shape need.
  static Result<Tensor> view(ElementType type, std::vector<int64_t> shape,
                             std::shared_ptr<const void> owner, std::span<const uint8_t> bytes);

  // Convenience constructors, converting each value to `type`.
  static Tensor from_f32(ElementType type, std::vector<int64_t> shape, std::span<const float> v);
  static Tensor from_i64(ElementType type, std::vector<int64_t> shape, std::span<const int64_t> v);
  static Tensor f32(std::vector<int64_t> shape, std::vector<float> v) {
    return from_f32(ElementType::f32, std::move(shape), v);
  }
  static Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
    return from_i64(ElementType::i64, std::move(shape), v);
  }
  static Tensor i32(std::vector<int64_t> shape, std::vector<int64_t> v) {
    return from_i64(ElementType::i32, std::move(shape), v);
  }
  static Tensor boolean(std::vector<int64_t> shape, std::vector<int64_t> v) {
    return from_i64(ElementType::boolean, std::move(shape), v);
  }

  bool empty_handle() const { return data_ == nullptr && type_ == ElementType::undefined; }
  ElementType type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const;
  size_t nbytes() const { return nbytes_; }
  const uint8_t* bytes() const { return data_; }
  uint8_t* mutable_bytes();                      // owned tensors only
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(data_); }
  template <class T>
  T* data() { return reinterpret_cast<T*>(mutable_bytes()); }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Every element as f32 (block types are dequantized, integers converted).
  std::vector<float> to_f32() const;
  // Every element as i64 (floats truncate toward zero). Not for block types.
  std::vector<int64_t> to_i64() const;
  // A copy with another shape of the same element count (shares the buffer).
  Tensor reshaped(std::vector<int64_t> shape) const;
  // The first `n` entries along `axis`, sharing the buffer (writable if this is): every axis
  // before `axis` must be 1, so they are contiguous. A cache allocated once for the longest
  // context is run as its live prefix this way (runtime/).
  Tensor leading(size_t axis, int64_t n) const;
  // A private, writable deep copy.
  Tensor clone() const;
  bool writable() const { return writable_; }
  bool same_bytes(const Tensor& o) const {
    return type_ == o.type_ && shape_ == o.shape_ && nbytes_ == o.nbytes_ &&
           (nbytes_ == 0 || std::memcmp(data_, o.data_, nbytes_) == 0);
  }
  std::string summary(size_t max_items = 6) const;  // "f32[2,3]{0.5, 1, ...}"

 private:
  ElementType type_ = ElementType::undefined;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  size_t nbytes_ = 0;
  bool writable_ = false;
};

// Scalar conversions shared by the kernels.
float load_f32(ElementType t, const uint8_t* p);      // one plain element as f32
int64_t load_i64(ElementType t, const uint8_t* p);    // one plain element as i64
void store_f32(ElementType t, uint8_t* p, float v);   // rounds for f16/bf16, truncates for ints
void store_i64(ElementType t, uint8_t* p, int64_t v);

}  // namespace ggflow::ir
