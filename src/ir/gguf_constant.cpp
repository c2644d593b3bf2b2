#include "ir/gguf_constant.h"

#include "ir/ops.h"

namespace ggflow::ir {

Result<Tensor> gguf_tensor(const gguf::File& file, const gguf::TensorInfo& info) {
  auto et = from_ggml(info.type);
  if (!et)
    return make_error("tensor '" + std::string(info.name) + "' has GGML type " +
                          std::string(gguf::traits(info.type).name) + ", which the IR cannot hold",
                      "convert the model to a supported type (Q4_0, Q4_K, Q8_0, F16, ...)");
  std::vector<int64_t> shape(info.ne.rbegin(), info.ne.rend());
  std::shared_ptr<const void> owner = file.bytes();
  auto t = Tensor::view(*et, std::move(shape), std::move(owner), file.tensor_data(info));
  if (!t) return make_error("tensor '" + std::string(info.name) + "': " + t.error().what, t.error().hint);
  return t;
}

Result<NodePtr> gguf_constant(const gguf::File& file, const gguf::TensorInfo& info) {
  auto t = gguf_tensor(file, info);
  if (!t) return t.error();
  return ops::constant(std::move(*t), std::string(info.name));
}

}  // namespace ggflow::ir
