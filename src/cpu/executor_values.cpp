#include "cpu/executor_values.h"

#include <cstring>

namespace ggflow::cpu::exec {

void copy_strided(const Val& v, uint8_t* dst, size_t es) {
  if (v.contiguous()) {
    std::memcpy(dst, v.data, static_cast<size_t>(v.numel()) * es);
    return;
  }
  int64_t idx[kMaxRank] = {};
  const int64_t n = v.numel(), inner = v.rank ? v.shape[v.rank - 1] : 1, istride = v.rank ? v.stride[v.rank - 1] : 1;
  for (int64_t done = 0; done < n; done += inner) {
    int64_t off = 0;
    for (int i = 0; i + 1 < v.rank; ++i) off += idx[i] * v.stride[i];
    const uint8_t* src = v.data + off * static_cast<int64_t>(es);
    if (istride == 1) {
      std::memcpy(dst, src, static_cast<size_t>(inner) * es);
    } else {
      for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * es, src + j * istride * static_cast<int64_t>(es), es);
    }
    dst += inner * static_cast<int64_t>(es);
    for (int i = v.rank - 2; i >= 0; --i) {  // next outer index
      if (++idx[i] < v.shape[i]) break;
      idx[i] = 0;
    }
  }
}

Result<ir::Tensor> to_tensor(const Val& v, const std::vector<Buffer>& pool) {
  const auto shape = v.shape_vec();
  if (v.hold && !v.hold->empty_handle() && v.data == v.hold->bytes() && v.contiguous()) {
    if (v.hold->shape() == shape) return *v.hold;
    if (v.hold->numel() == v.numel()) return v.hold->reshaped(shape);
  }
  if (ir::is_block(v.type)) {
    if (!v.contiguous()) return make_error("a strided view of a block-quantized tensor", "views of weights must be dense");
    return ir::Tensor::view(v.type, shape, v.hold ? v.hold->owner() : nullptr, {v.data, ir::byte_size(v.type, v.numel())});
  }
  const size_t es = ir::scalar_size(v.type);
  if (v.contiguous() && v.buf >= 0)
    return ir::Tensor::view(v.type, shape, pool[v.buf].owner, {v.data, static_cast<size_t>(v.numel()) * es});
  ir::Tensor t(v.type, shape);
  copy_strided(v, t.mutable_bytes(), es);
  return t;
}

Val view_of(const ir::Tensor& t) {
  Val v;
  v.type = t.type();
  v.rank = static_cast<int>(t.rank());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = t.shape()[i];
  v.set_contiguous();
  v.data = const_cast<uint8_t*>(t.bytes());
  v.hold = &t;
  return v;
}

}  // namespace ggflow::cpu::exec
