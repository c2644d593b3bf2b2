#include "runtime/slot_model.h"

#include <sys/mman.h>
#include <unistd.h>

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
  storage_.resize(sig_.caches.size());
  outputs_.resize(sig_.outputs.size());
  return {};
}

bool SlotModel::reserved() const { return caches_.empty() || !storage_[0].empty_handle(); }

void SlotModel::view_caches(int64_t rows) {
  for (const auto& c : sig_.caches) params_[c.param] = {};  // no slot keeps an old view alive
  for (size_t i = 0; i < caches_.size(); ++i) {
    const int axis = sig_.caches[i].dynamic_axis;
    caches_[i] = axis >= 0 ? storage_[i].leading(size_t(axis), rows) : storage_[i];
  }
}

Status SlotModel::reserve_caches(int64_t max_rows) {
  if (max_rows < 0) return make_error("cache rows must be >= 0, got " + std::to_string(max_rows));
  if (reserved() && max_rows <= reserved_rows_) return {};
  for (size_t i = 0; i < caches_.size(); ++i) {
    auto shape = sig_.caches[i].shape;
    if (sig_.caches[i].dynamic_axis >= 0) shape[sig_.caches[i].dynamic_axis] = max_rows;
    auto r = ir::Tensor::reserve(sig_.caches[i].type, shape);  // leading rows are contiguous (read_signature)
    if (!r) return r.error();
    // Growth past the reservation copies what was written (the rows in use); inside it, nothing.
    if (!caches_[i].empty_handle())
      std::memcpy(r->mutable_bytes(), caches_[i].bytes(), std::min(r->nbytes(), caches_[i].nbytes()));
    storage_[i] = std::move(*r);
  }
  reserved_rows_ = max_rows;
  view_caches(cache_rows_);
  return {};
}

Status SlotModel::resize_caches(int64_t rows) {
  if (rows < 0) return make_error("cache rows must be >= 0, got " + std::to_string(rows));
  if (!reserved() || rows > reserved_rows_)
    if (auto s = reserve_caches(std::max(rows, reserved_rows_)); !s) return s;
  const int64_t before = cache_rows_;
  view_caches(rows);
  cache_rows_ = rows;
  if (kv_poison_enabled() && rows > before) poison_cache_rows(before, rows - before);  // rows new to the steps
  return {};
}

void SlotModel::poison_cache_rows(int64_t first, int64_t n) {
  for (size_t i = 0; i < caches_.size(); ++i) {
    if (sig_.caches[i].dynamic_axis < 0 || cache_rows_ == 0) continue;
    const size_t row = caches_[i].nbytes() / size_t(cache_rows_);
    const int64_t b = std::clamp<int64_t>(first, 0, cache_rows_), e = std::clamp<int64_t>(first + n, b, cache_rows_);
    std::memset(caches_[i].mutable_bytes() + size_t(b) * row, 0xff, size_t(e - b) * row);
  }
}

CompiledModel::CacheMemory SlotModel::cache_memory() const {
  CacheMemory m;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core;
  for (const auto& t : storage_) {
    if (t.empty_handle() || t.nbytes() == 0) continue;
    m.reserved_bytes += int64_t(t.nbytes());
    // The mapping starts on a page (mmap); its resident pages, as the kernel counts them.
    const size_t pages = (t.nbytes() + page - 1) / page;
    in_core.assign(pages, 0);
    if (mincore(const_cast<uint8_t*>(t.bytes()), t.nbytes(), in_core.data()) != 0) continue;
    for (unsigned char c : in_core) m.resident_bytes += (c & 1) ? int64_t(page) : 0;
  }
  return m;
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
