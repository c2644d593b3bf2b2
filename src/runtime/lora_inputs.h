// The per-token LoRA factor inputs of a compiled model (builder/lora.h: lora_scale_I, f32, one
// value per token in every layout). A runner binds them once and, each step, gives every token
// the adapters of its sequence as a mask (bit I: adapter I; 0: none): adapter I's input holds I's
// factor on the tokens whose mask has bit I and 0 on the others, so a token without an adapter
// computes the base model's bits. Several bits: the adapters' deltas add (llama.cpp with several
// --lora).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "ir/tensor.h"
#include "runtime/compiled_model.h"

namespace ggflow::runtime {

class LoraInputs {
 public:
  // `factors`: one per adapter the model was built with (ModelFile::lora_factors()). Errors: the
  // compiled model lacks an adapter's input.
  Status bind(const CompiledModel& c, std::vector<float> factors);
  size_t size() const { return factors_.size(); }
  static constexpr size_t kMaxAdapters = 64;  // bits of a mask
  // Errors: a bit for an adapter the model does not have.
  Status check(uint64_t mask) const;
  // Writes each adapter's input, shaped `shape` (its element count = masks.size()), from the mask
  // of each token.
  void fill(std::vector<ir::Tensor>& inputs, const std::vector<int64_t>& shape, std::span<const uint64_t> masks) const;

 private:
  std::vector<size_t> at_;
  std::vector<float> factors_;
};

}  // namespace ggflow::runtime
