// The raw runner: runs a model's translated raw-layout graph (builder -> frontend::translate) the
// way llama.cpp runs its GGML graph. It is the numeric reference of ggflow's other layouts and
// what `ggflow run --engine raw` uses.
//
// Model of one step: T new tokens at positions n_past .. n_past+T-1. The compiled model owns the
// caches cache_k_lN / cache_v_lN, f32 [1, 1, rows, n_embd_kv], grown by doubling up to the
// context; a step sees their first KV = n_past + T rows, SET_ROWS writes the new rows at
// self_kv_idxs in place. The runner fills inp_pos, the causal mask (0 where key j <= query
// position, -inf elsewhere; the sliding-window mask also hides keys n_swa or more positions back,
// llama.cpp's LLAMA_SWA_TYPE_STANDARD), and inp_out_ids (the rows that need logits: the last one,
// or all).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/compiled_model.h"
#include "runtime/model_file.h"
#include "runtime/sequence_runner.h"

namespace ggflow::runtime {

class RawRunner final : public SequenceRunner {
 public:
  static Result<std::unique_ptr<RawRunner>> create(const ModelFile& file, const RunnerOptions& options = {});

  Result<std::span<const float>> step(std::span<const int32_t> tokens) override { return step(tokens, false); }
  // `all_logits`: every position's row, [T, n_vocab] row-major; otherwise only the last one.
  Result<std::span<const float>> step(std::span<const int32_t> tokens, bool all_logits);
  void reset() override { n_past_ = 0; }
  int64_t n_past() const override { return n_past_; }
  const builder::HParams& hparams() const { return hp_; }
  const CompiledModel& compiled() const override { return *cm_; }

 private:
  RawRunner() = default;
  builder::HParams hp_;
  std::unique_ptr<CompiledModel> cm_;
  size_t in_tokens_ = 0, in_pos_ = 0, in_out_ids_ = 0, in_kv_idxs_ = 0, out_logits_ = 0;
  int in_mask_ = -1, in_mask_swa_ = -1;  // -1: the graph has no such input
  std::vector<ir::Tensor> inputs_;
  std::vector<float> logits_;
  int64_t n_past_ = 0;
};

}  // namespace ggflow::runtime
