// PagedRunner: the PagedAttention layout of a model (AdaptToGenAI + MakeStateful +
// SDPAToPagedAttention), compiled once, behind BatchRunner (paged_batch.h), so that the
// continuous-batching engine drives it with the block tables its block manager chose. The caches
// key_cache.N / value_cache.N, f32 [num_blocks, kv_heads, 32, head_size], live in the compiled
// model, allocated once for the pool and written in place: a step costs its tokens, not the pool.
//
// A ScheduledBatch becomes the step's tensors here, once: its int32 vectors are the i32 inputs,
// widened for the model's i64 inputs (input_ids, position_ids, sampled_tokens_indices).
//
// For tests and the single-sequence runner it can also manage its own block tables (add_sequence
// and step): blocks are handed out in order and never freed; the pool grows by doubling.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/compiled_model.h"
#include "runtime/lora_inputs.h"
#include "runtime/model_file.h"
#include "runtime/paged_batch.h"

namespace ggflow::runtime {

class PagedRunner final : public BatchRunner {
 public:
  // `num_blocks`: the pool (the scheduler's block manager must use the same number).
  static Result<std::unique_ptr<PagedRunner>> create(const ModelFile& file, int32_t num_blocks,
                                                     const CompileOptions& options = {});
  // A paged model already converted (tests).
  // `lora_factors`: the model's LoRA adapters (ModelFile::lora_factors()).
  static Result<std::unique_ptr<PagedRunner>> from_model(ir::Model model, int64_t n_vocab, int32_t num_blocks,
                                                         const CompileOptions& options = {}, std::vector<float> lora_factors = {});

  Result<LogitsRows> forward(const ScheduledBatch& batch) override;
  int64_t n_vocab() const { return n_vocab_; }
  int32_t num_blocks() const { return static_cast<int32_t>(cm_->cache_rows()); }
  const CompiledModel& compiled() const { return *cm_; }
  const LoraInputs& lora_inputs() const { return lora_in_; }

  // Self-managed block tables.
  int add_sequence();                            // a new empty sequence, its id
  int64_t past(int seq) const { return seqs_.at(seq).past; }
  struct Chunk {
    int seq;
    std::vector<int32_t> tokens;                 // a prefill chunk or one decode token
    uint64_t lora = 0;                           // its LoRA adapters (a mask, lora_inputs.h)
  };
  // One step over all chunks (one per sequence); the logits row of each chunk's last token, in order.
  Result<LogitsRows> step(const std::vector<Chunk>& chunks);

 private:
  PagedRunner() = default;
  std::unique_ptr<CompiledModel> cm_;
  int64_t n_vocab_ = 0;
  size_t in_ids_ = 0, in_pos_ = 0, in_past_ = 0, in_sb_ = 0, in_bi_ = 0, in_bib_ = 0, in_max_ = 0, in_sampled_ = 0;
  size_t out_logits_ = 0;
  std::vector<ir::Tensor> inputs_;
  LoraInputs lora_in_;
  std::vector<uint64_t> token_lora_;  // per token of the step: its sequence's adapters
  struct Seq {
    int64_t past = 0;
    std::vector<int32_t> blocks;
  };
  std::vector<Seq> seqs_;
  int32_t next_block_ = 0;
};

}  // namespace ggflow::runtime
