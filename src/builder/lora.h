// LoRA adapters in llama.cpp's GGUF format (convert_lora_to_gguf.py): metadata general.type
// "adapter", adapter.type "lora", adapter.lora.alpha, general.architecture the base model's; for
// a matrix W of the base model, GGML shape [n_in, n_out], the tensors `W.lora_a` [n_in, r] and
// `W.lora_b` [r, n_out]. The builder adds each adapter to the products with W unmerged (llama.cpp's
// build_lora_mm):
//   y = W·x + Σ_i (B_i·(A_i·x)) ⊙ lora_scale_i           lora_scale_i f32 [1, T], an input
// where lora_scale_i holds, per token, adapter i's factor s = user · alpha / r (alpha 0: s = user;
// LoraAdapter::factor, llama.cpp's get_scale) for the tokens of sequences that use adapter i and
// 0 elsewhere: one graph serves sequences with different adapters (or none) in one batch, and a
// token with factor 0 gets W·x + 0, its base model's bits.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/result.h"
#include "gguf/file.h"

namespace ggflow::builder {

struct LoraAdapter {
  gguf::File file;
  float alpha = 0.0f;   // adapter.lora.alpha; 0: none
  int64_t rank = 0;     // r, the same for every tensor pair
  // base tensor name -> (A, B) tensors of `file`
  std::map<std::string, std::pair<const gguf::TensorInfo*, const gguf::TensorInfo*>> pairs;
  // The factor of the delta at user scale `user`, in f32 as llama.cpp computes it.
  float factor(float user) const { return alpha != 0.0f ? user * alpha / static_cast<float>(rank) : user; }
  const std::string& path() const { return file.path(); }
};

// Opens and checks an adapter against its base model: the metadata above, every tensor one half
// of a pair named after a 2-D matrix of `base` with the shapes above, one rank, types ggflow
// computes with. The token embedding (a row lookup, not a product) and the LM head (whose rows the
// layouts select in front of it) are refused. Errors name the
// key or tensor and say how to fix the adapter.
Result<std::shared_ptr<const LoraAdapter>> open_lora(const std::string& path, const gguf::File& base);

// The graph input of adapter i's per-token factors.
std::string lora_scale_name(size_t i);

}  // namespace ggflow::builder
