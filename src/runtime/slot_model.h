// SlotModel: what every executor behind CompiledModel shares. It owns the model, its signature,
// the caches (reserved by reserve_caches, sized by resize_caches, handed to the engine as writable parameters
// so the aliasing ops update them in place) and the variables; a step puts its inputs and the
// caches' live prefixes into the parameter slots and calls the executor's engine.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/compiled_model.h"

namespace ggflow::runtime {

class SlotModel : public CompiledModel {
 public:
  Status resize_caches(int64_t rows) override;
  Status reserve_caches(int64_t max_rows) override;
  void poison_cache_rows(int64_t first, int64_t n) override;
  CacheMemory cache_memory() const override;
  Status run(std::span<const ir::Tensor> inputs, int64_t visible_rows) override;
  const ir::Tensor& output(size_t i) const override { return outputs_.at(i); }
  void reset_state() override;

 protected:
  // Takes the model and reads its signature; then the subclass prepares its engine and calls
  // set_variables(n).
  Status adopt(ir::Model m);
  void set_variables(size_t n) { vars_.resize(n); }
  // One run of the engine: parameters in model order, variables by index, writable flags; the
  // results, valid until the next run.
  virtual Result<std::span<const ir::Tensor>> evaluate(std::span<const ir::Tensor> params,
                                                       std::vector<ir::Tensor>* vars,
                                                       std::span<const uint8_t> writable) = 0;

 private:
  // storage_[i]: cache i's reservation (reserved_rows_ along its dynamic axis); caches_[i]: its
  // leading cache_rows_, the tensor a step sees.
  std::vector<ir::Tensor> params_, caches_, storage_, outputs_, vars_;
  int64_t reserved_rows_ = 0;
  bool reserved() const;                // storage_ holds the reservations
  void view_caches(int64_t rows);       // caches_ = the leading `rows` of storage_
  std::vector<uint8_t> writable_;
};

}  // namespace ggflow::runtime
