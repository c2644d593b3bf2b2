// The executor's run-time values: strided views over pool buffers, parameters, constants or the
// tensors a reference kernel returned, and the growable, aligned buffers of the memory pool.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/result.h"
#include "ir/tensor.h"

namespace ggflow::cpu::exec {

inline constexpr int kMaxRank = 8;

// A tensor value: element type, shape and strides (in elements, outermost first) over `data`.
struct Val {
  ir::ElementType type = ir::ElementType::undefined;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
  uint8_t* data = nullptr;
  // The tensor whose bytes these are when not a pool buffer's: a parameter of the run in progress,
  // a constant of the model, a state tensor or the executor's copy of a fallback's output, each
  // alive while the value is used. A pointer, so that copying a value (every view step) costs no
  // allocation and no reference count.
  const ir::Tensor* hold = nullptr;
  int buf = -1;           // the pool buffer holding the bytes (-1: `hold` does)
  bool writable = false;  // a parameter the caller lets the model update in place (a cache)

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  bool contiguous() const {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (shape[i] != 1 && stride[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  // Dense row-major strides for the current shape.
  void set_contiguous() {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) stride[i] = s, s *= shape[i];
  }
  std::vector<int64_t> shape_vec() const { return std::vector<int64_t>(shape, shape + rank); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(data); }
};

// A growable buffer, 64-byte aligned, shared so that returned tensors can view it. From 2 MiB on
// it is 2 MiB-aligned and advised for transparent huge pages (a prefill's activations).
struct Buffer {
  static constexpr size_t kHugePage = size_t{2} << 20;
  std::shared_ptr<uint8_t> owner;
  size_t capacity = 0;
  uint8_t* ensure(size_t bytes) {
    if (bytes > capacity) {
      const size_t align = bytes >= kHugePage ? kHugePage : 64;
      const size_t cap = (bytes + align - 1) / align * align;
      owner = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(align, cap)), std::free);
      if (align == kHugePage && owner) (void)::madvise(owner.get(), cap, MADV_HUGEPAGE);
      capacity = cap;
    }
    return owner.get();
  }
};

// A dense copy of `v` into `dst` (element size `es`; any strides).
void copy_strided(const Val& v, uint8_t* dst, size_t es);
// `v` as an ir::Tensor: its own tensor when it is one, a view of its pool buffer when dense,
// otherwise a dense copy.
Result<ir::Tensor> to_tensor(const Val& v, const std::vector<Buffer>& pool);
// A value viewing the tensor `t` (dense); `t` must outlive every use of the value.
Val view_of(const ir::Tensor& t);

}  // namespace ggflow::cpu::exec
