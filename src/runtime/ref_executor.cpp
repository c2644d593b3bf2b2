// The `ref` executor: the IR reference evaluator (ir/evaluator.h), prepared once, behind
// CompiledModel.
#include "ir/evaluator.h"
#include "runtime/slot_model.h"

namespace ggflow::runtime {

namespace {

class RefModel final : public SlotModel {
 public:
  Status init(ir::Model m) {
    if (auto s = adopt(std::move(m)); !s) return s;
    auto ev = ir::Evaluator::create(model());
    if (!ev) return ev.error();
    ev_ = std::make_unique<ir::Evaluator>(std::move(*ev));
    set_variables(ev_->variable_ids().size());
    return {};
  }
  Executor executor() const override { return Executor::ref; }
  std::string describe() const override { return "ref (the IR reference evaluator, 1 thread)"; }

 private:
  Result<std::span<const ir::Tensor>> evaluate(std::span<const ir::Tensor> params, std::vector<ir::Tensor>* vars,
                                               std::span<const uint8_t> writable) override {
    auto r = ev_->run(params, vars, writable);
    if (!r) return r.error();
    results_ = std::move(*r);
    return std::span<const ir::Tensor>(results_);
  }
  std::unique_ptr<ir::Evaluator> ev_;
  std::vector<ir::Tensor> results_;
};

}  // namespace

Result<std::unique_ptr<CompiledModel>> compile_ref(ir::Model model) {
  auto m = std::make_unique<RefModel>();
  if (auto s = m->init(std::move(model)); !s) return s.error();
  return std::unique_ptr<CompiledModel>(std::move(m));
}

}  // namespace ggflow::runtime
