// The raw runner: runs a model's translated raw-layout graph (builder -> frontend::translate)
// with the IR reference evaluator, the way llama.cpp runs its GGML graph. It is the numeric
// reference of ggflow's other runtimes and what `ggflow run --engine raw` uses.
//
// Model of one step: T new tokens at positions n_past .. n_past+T-1. The runner owns the KV
// cache as one f32 tensor [1, 1, n_past, n_embd_kv] per layer and K/V; a step passes it grown by
// T zero rows (KV = n_past + T), SET_ROWS in the graph writes the new rows at self_kv_idxs, and
// the runner keeps the graph's cache_*_out outputs as the new cache. It fills inp_pos, the causal
// mask (0 where key j <= query position, -inf elsewhere; the sliding-window mask also hides keys
// n_swa or more positions back, llama.cpp's LLAMA_SWA_TYPE_STANDARD), and inp_out_ids (the rows
// that need logits: the last one, or all).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "builder/build.h"
#include "gguf/file.h"
#include "ir/model.h"
#include "ir/tensor.h"

namespace ggflow::builder {

class RawRunner {
 public:
  // Open, build and translate. Errors: file, architecture, missing keys/tensors, translation.
  static Result<std::unique_ptr<RawRunner>> open(const std::string& path, const BuildOptions& opt = {});

  const HParams& hparams() const { return hp_; }
  const ir::Model& model() const { return model_; }
  int64_t n_past() const { return n_past_; }
  void reset();

  // Feed `tokens`; return the logits, row-major [rows, n_vocab]: every position's row when
  // `all_logits`, otherwise only the last one.
  Result<std::vector<float>> step(std::span<const int32_t> tokens, bool all_logits = false);
  // Prompt, then `n` greedy tokens (argmax, lowest id on ties). `logits` (optional) receives the
  // row each token was chosen from, [n, n_vocab].
  Result<std::vector<int32_t>> generate_greedy(std::span<const int32_t> prompt, int n,
                                               std::vector<float>* logits = nullptr);

 private:
  RawRunner() = default;
  HParams hp_;
  ir::Model model_;
  std::vector<ir::Tensor> cache_k_, cache_v_;
  int64_t n_past_ = 0;
};

int32_t argmax(std::span<const float> row);

}  // namespace ggflow::builder
