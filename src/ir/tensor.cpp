#include "ir/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "gguf/dequant.h"
#include "base/check.h"

namespace ggflow::ir {

Tensor::Tensor(ElementType type, std::vector<int64_t> shape) : type_(type), shape_(std::move(shape)) {
  nbytes_ = byte_size(type_, numel());
  auto buf = std::make_shared<std::vector<uint8_t>>(nbytes_ ? nbytes_ : 1, 0);
  data_ = buf->data();
  owner_ = buf;
  writable_ = true;
}

Result<Tensor> Tensor::reserve(ElementType type, std::vector<int64_t> shape) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.nbytes_ = byte_size(type, t.numel());
  const size_t len = std::max<size_t>(t.nbytes_, 1);
  // MAP_NORESERVE: no swap is set aside up front; pages are committed as they are first written.
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return make_error("could not reserve " + std::to_string(len) + " bytes of address space for a " +
                          std::string(to_string(type)) + " tensor: " + std::strerror(errno),
                      "ask for a smaller KV cache (--kv-cache / --kv-blocks)");
  t.owner_ = std::shared_ptr<void>(p, [len](void* q) { munmap(q, len); });
  t.data_ = static_cast<const uint8_t*>(p);
  t.writable_ = true;
  return t;
}

Result<Tensor> Tensor::view(ElementType type, std::vector<int64_t> shape,
                            std::shared_ptr<const void> owner, std::span<const uint8_t> bytes) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  int64_t n = t.numel();
  if (is_block(type) && (t.shape_.empty() || t.shape_.back() % block_size(type) != 0))
    return make_error("tensor view of type " + std::string(to_string(type)) +
                          ": innermost dimension is not a multiple of the block size " +
                          std::to_string(block_size(type)),
                      "block types are quantized along the innermost (contiguous) dimension");
  size_t need = byte_size(type, n);
  if (need != bytes.size())
    return make_error("tensor view of type " + std::string(to_string(type)) + ": needs " +
                          std::to_string(need) + " bytes, got " + std::to_string(bytes.size()),
                      "check the shape against the tensor info");
  t.owner_ = std::move(owner);
  t.data_ = bytes.data();
  t.nbytes_ = bytes.size();
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

uint8_t* Tensor::mutable_bytes() {
  GGFLOW_CHECK(writable_, "writing into a tensor view");
  return const_cast<uint8_t*>(data_);
}

float load_f32(ElementType t, const uint8_t* p) {
  switch (t) {
    case ElementType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case ElementType::f16: { uint16_t h; std::memcpy(&h, p, 2); return gguf::f16_to_f32(h); }
    case ElementType::bf16: { uint16_t h; std::memcpy(&h, p, 2); return gguf::bf16_to_f32(h); }
    default: return static_cast<float>(load_i64(t, p));
  }
}

int64_t load_i64(ElementType t, const uint8_t* p) {
  switch (t) {
    case ElementType::i64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case ElementType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case ElementType::u8: return *p;
    case ElementType::boolean: return *p != 0;
    case ElementType::f32: case ElementType::f16: case ElementType::bf16:
      return static_cast<int64_t>(load_f32(t, p));
    default: GGFLOW_CHECK(false, "load_i64 of a block type"); return 0;
  }
}

void store_f32(ElementType t, uint8_t* p, float v) {
  switch (t) {
    case ElementType::f32: std::memcpy(p, &v, 4); return;
    case ElementType::f16: { uint16_t h = gguf::f32_to_f16(v); std::memcpy(p, &h, 2); return; }
    case ElementType::bf16: { uint16_t h = gguf::f32_to_bf16(v); std::memcpy(p, &h, 2); return; }
    case ElementType::boolean: *p = v != 0.0f; return;
    default: store_i64(t, p, static_cast<int64_t>(v)); return;
  }
}

void store_i64(ElementType t, uint8_t* p, int64_t v) {
  switch (t) {
    case ElementType::i64: std::memcpy(p, &v, 8); return;
    case ElementType::i32: { int32_t w = static_cast<int32_t>(v); std::memcpy(p, &w, 4); return; }
    case ElementType::u8: *p = static_cast<uint8_t>(v); return;
    case ElementType::boolean: *p = v != 0; return;
    case ElementType::f32: case ElementType::f16: case ElementType::bf16:
      store_f32(t, p, static_cast<float>(v)); return;
    default: GGFLOW_CHECK(false, "store_i64 into a block type");
  }
}

Tensor Tensor::from_f32(ElementType type, std::vector<int64_t> shape, std::span<const float> v) {
  Tensor t(type, std::move(shape));
  GGFLOW_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "from_f32: value count != numel");
  size_t es = scalar_size(type);
  for (size_t i = 0; i < v.size(); ++i) store_f32(type, t.mutable_bytes() + i * es, v[i]);
  return t;
}

Tensor Tensor::from_i64(ElementType type, std::vector<int64_t> shape, std::span<const int64_t> v) {
  Tensor t(type, std::move(shape));
  GGFLOW_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "from_i64: value count != numel");
  size_t es = scalar_size(type);
  for (size_t i = 0; i < v.size(); ++i) store_i64(type, t.mutable_bytes() + i * es, v[i]);
  return t;
}

std::vector<float> Tensor::to_f32() const {
  int64_t n = numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (is_block(type_)) {
    Status st = gguf::dequantize(*to_ggml(type_), {data_, nbytes_}, static_cast<uint64_t>(n), out.data());
    GGFLOW_CHECK(st.ok(), st.ok() ? "" : st.error().str().c_str());
    return out;
  }
  size_t es = scalar_size(type_);
  for (int64_t i = 0; i < n; ++i) out[i] = load_f32(type_, data_ + i * es);
  return out;
}

std::vector<int64_t> Tensor::to_i64() const {
  GGFLOW_CHECK(!is_block(type_), "to_i64 of a block type");
  int64_t n = numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  size_t es = scalar_size(type_);
  for (int64_t i = 0; i < n; ++i) out[i] = load_i64(type_, data_ + i * es);
  return out;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  GGFLOW_CHECK(t.numel() == numel(), "reshaped: element count changes");
  return t;
}

Tensor Tensor::leading(size_t axis, int64_t n) const {
  GGFLOW_CHECK(axis < shape_.size() && n >= 0 && n <= shape_[axis], "leading: axis or length out of range");
  for (size_t a = 0; a < axis; ++a) GGFLOW_CHECK(shape_[a] == 1, "leading: an outer axis is not 1");
  Tensor t = *this;
  t.shape_[axis] = n;
  t.nbytes_ = byte_size(type_, t.numel());
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(type_, shape_);
  if (nbytes_) std::memcpy(t.mutable_bytes(), data_, nbytes_);
  return t;
}

std::string Tensor::summary(size_t max_items) const {
  std::ostringstream os;
  os << to_string(type_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i) os << (i ? "," : "") << shape_[i];
  os << "]";
  if (is_block(type_)) return os.str() + "{" + std::to_string(nbytes_) + " bytes}";
  os << "{";
  int64_t n = numel();
  size_t es = scalar_size(type_);
  for (int64_t i = 0; i < n && i < static_cast<int64_t>(max_items); ++i) {
    if (i) os << ", ";
    if (is_float(type_)) os << load_f32(type_, data_ + i * es);
    else os << load_i64(type_, data_ + i * es);
  }
  if (n > static_cast<int64_t>(max_items)) os << ", ...";
  os << "}";
  return os.str();
}

}  // namespace ggflow::ir
