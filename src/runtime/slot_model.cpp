#include "runtime/slot_model.h"

#include <algorithm>
#include <cstring>

namespace ggflow::runtime {

Status SlotModel::adopt(ir::Model m) {
  model_ = std::make_unique<ir::Model>(std::move(m));
  auto sig = read_signature(*model_);
  if (!sig) return sig.error();
  sig_ = std::move(*sig);
  params_.resize(model_->parameters().size());
  writable_.assign(model_->parameters().size(), 0);
  for (const auto& c : sig_.caches) writable_[c.param] = 1;
  caches_.resize(sig_.caches.size());
  outputs_.resize(sig_.outputs.size());
  return {};
}

Status SlotModel::resize_caches(int64_t rows) {
  if (rows < 0) return make_error("cache rows must be >= 0, got " + std::to_string(rows));
  for (const auto& c : sig_.caches) params_[c.param] = {};  // no slot keeps an old cache alive
  for (size_t i = 0; i < caches_.size(); ++i) {
    auto shape = sig_.caches[i].shape;
    if (sig_.caches[i].dynamic_axis >= 0) shape[sig_.caches[i].dynamic_axis] = rows;
    ir::Tensor grown(sig_.caches[i].type, shape);  // leading rows are contiguous (read_signature)
    if (!caches_[i].empty_handle())
      std::memcpy(grown.mutable_bytes(), caches_[i].bytes(), std::min(grown.nbytes(), caches_[i].nbytes()));
    caches_[i] = std::move(grown);
  }
  cache_rows_ = rows;
  return {};
}

Status SlotModel::run(std::span<const ir::Tensor> inputs, int64_t visible) {
  if (inputs.size() != sig_.inputs.size())
    return make_error("run: got " + std::to_string(inputs.size()) + " inputs, the model has " +
                      std::to_string(sig_.inputs.size()));
  if (visible > cache_rows_)
    return make_error("run: " + std::to_string(visible) + " cache rows visible, " + std::to_string(cache_rows_) +
                          " allocated", "resize_caches() to more rows");
  for (size_t i = 0; i < inputs.size(); ++i) params_[sig_.inputs[i]] = inputs[i];
  for (size_t c = 0; c < caches_.size(); ++c) {
    if (caches_[c].empty_handle()) return make_error("run: the caches are not allocated", "call resize_caches() first");
    const int axis = sig_.caches[c].dynamic_axis;
    // the whole cache (paged) is assigned over last step's, reusing its shape's storage
    if (visible < 0 || axis < 0) params_[sig_.caches[c].param] = caches_[c];
    else params_[sig_.caches[c].param] = caches_[c].leading(size_t(axis), visible);
  }
  auto r = evaluate(params_, &vars_, writable_);
  if (!r) return r.error();
  for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i] = (*r)[sig_.outputs[i]];
  for (size_t c = 0; c < caches_.size(); ++c) {  // the aliasing ops wrote the cache itself
    const ir::Tensor& out = (*r)[sig_.caches[c].result];
    if (out.bytes() == caches_[c].bytes()) continue;
    if (out.nbytes() > caches_[c].nbytes())
      return make_error("run: cache '" + sig_.caches[c].name + "' came back larger than allocated");
    std::memcpy(caches_[c].mutable_bytes(), out.bytes(), out.nbytes());
    ++cache_copies_;
  }
  return {};
}

void SlotModel::reset_state() {
  for (auto& v : vars_) v = {};
}

}  // namespace ggflow::runtime
