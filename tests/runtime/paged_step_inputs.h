// The paged model's step inputs, built by hand for tests that drive a CompiledModel directly:
// `seqs` sequences of `tokens` tokens each, at positions pos .. pos+tokens-1 (pos + tokens <= 32:
// one KV block each, block s for sequence s), every sequence's last row sampled. The tensors keep
// their buffers from one step of a shape to the next.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/compiled_model.h"

namespace ggflow::runtime {

struct PagedStepInputs {
  const CompiledModel& cm;
  std::vector<ir::Tensor> in;
  explicit PagedStepInputs(const CompiledModel& c) : cm(c), in(c.n_inputs()) {}
  Status set(std::string_view name, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
    auto i = cm.input(name);
    if (!i) return i.error();
    const ir::ElementType t = cm.model().parameters()[cm.signature().inputs[*i]]->out_type();
    in[*i] = t == ir::ElementType::i64 ? ir::Tensor::i64(std::move(shape), v) : ir::Tensor::i32(std::move(shape), v);
    return {};
  }
  Status step(int64_t seqs, int64_t pos, int64_t tokens = 1) {
    std::vector<int64_t> ids, positions, past, begins{0}, blocks, block_begins{0}, sampled;
    for (int64_t s = 0; s < seqs; ++s) {
      for (int64_t t = 0; t < tokens; ++t) ids.push_back(1 + (pos + t + 7 * s) % 50), positions.push_back(pos + t);
      past.push_back(pos);
      begins.push_back((s + 1) * tokens);
      blocks.push_back(s);
      block_begins.push_back(s + 1);
      sampled.push_back((s + 1) * tokens - 1);
    }
    const int64_t rows = seqs * tokens;
    for (auto st : {set("input_ids", {rows}, ids), set("position_ids", {rows}, positions), set("past_lens", {seqs}, past),
                    set("subsequence_begins", {seqs + 1}, begins), set("block_indices", {seqs}, blocks),
                    set("block_indices_begins", {seqs + 1}, block_begins), set("max_context_len", {}, {pos + tokens}),
                    set("sampled_tokens_indices", {seqs}, sampled)})
      if (!st) return st;
    return {};
  }
};

}  // namespace ggflow::runtime
