#include "runtime/lora_inputs.h"

#include <string>

#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::runtime {

Status LoraInputs::bind(const CompiledModel& c, std::vector<float> factors) {
  at_.clear();
  if (factors.size() > kMaxAdapters)
    return make_error(std::to_string(factors.size()) + " LoRA adapters are more than " + std::to_string(kMaxAdapters), "load fewer adapters");
  for (size_t i = 0; i < factors.size(); ++i) {
    auto in = c.input(transforms::lora_scale_name(i));
    if (!in) return make_error("the model was compiled without LoRA adapter " + std::to_string(i) + ": " + in.error().what, in.error().hint);
    at_.push_back(*in);
  }
  factors_ = std::move(factors);
  return {};
}

Status LoraInputs::check(uint64_t mask) const {
  if (factors_.size() < kMaxAdapters && (mask >> factors_.size()) != 0)
    return make_error("LoRA adapter mask " + std::to_string(mask) + " names an adapter the model does not have (it has " +
                          std::to_string(factors_.size()) + ")",
                      factors_.empty() ? "load adapters with --lora" : "pick among the loaded adapters");
  return {};
}

void LoraInputs::fill(std::vector<ir::Tensor>& inputs, const std::vector<int64_t>& shape, std::span<const uint64_t> masks) const {
  for (size_t i = 0; i < at_.size(); ++i) {
    std::vector<float> v(masks.size());
    for (size_t t = 0; t < masks.size(); ++t) v[t] = (masks[t] >> i) & 1 ? factors_[i] : 0.0f;
    inputs[at_[i]] = ir::Tensor::f32(shape, std::move(v));
  }
}

}  // namespace ggflow::runtime
