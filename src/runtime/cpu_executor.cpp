// The `cpu` executor (cpu/executor.h: a compiled plan, SIMD kernels, a thread pool) behind
// CompiledModel.
#include "cpu/executor.h"
#include "runtime/slot_model.h"

namespace ggflow::runtime {

namespace {

class CpuModel final : public SlotModel {
 public:
  Status init(ir::Model m, const CompileOptions& options) {
    if (auto s = adopt(std::move(m)); !s) return s;
    auto ex = cpu::Executor::create(model(), cpu::ExecutorOptions{.threads = options.threads, .pool = options.pool});
    if (!ex) return ex.error();
    ex_ = std::move(*ex);
    set_variables(ex_->variable_ids().size());
    return {};
  }
  Executor executor() const override { return Executor::cpu; }
  std::string describe() const override {
    return "cpu (" + std::string(cpu::to_string(ex_->isa())) + ", " + std::to_string(ex_->threads()) + " threads)";
  }
  std::string plan_summary() const override { return ex_->plan_summary(); }
  int64_t fallbacks() const override { return ex_->fallbacks(); }
  std::string fallback_summary() const override { return ex_->fallback_summary(); }

 private:
  Result<std::span<const ir::Tensor>> evaluate(std::span<const ir::Tensor> params, std::vector<ir::Tensor>* vars,
                                               std::span<const uint8_t> writable) override {
    return ex_->run(params, vars, writable);
  }
  std::unique_ptr<cpu::Executor> ex_;
};

}  // namespace

std::shared_ptr<cpu::ThreadPool> make_thread_pool(int threads) { return cpu::make_thread_pool(threads); }

Result<std::unique_ptr<CompiledModel>> compile_cpu(ir::Model model, const CompileOptions& options) {
  auto m = std::make_unique<CpuModel>();
  if (auto s = m->init(std::move(model), options); !s) return s.error();
  return std::unique_ptr<CompiledModel>(std::move(m));
}

}  // namespace ggflow::runtime
