// PagedModelRunner: the PagedAttention layout of a model (AdaptToGenAI + MakeStateful +
// SDPAToPagedAttention, run by transforms::PagedEngine on the IR reference evaluator) behind
// genai::ModelRunner, so that ContinuousBatchingEngine drives it with its own block tables.
// The caches `key_cache.N` / `value_cache.N` are f32 [num_blocks, kv_heads, 32, head_size].
#pragma once

#include <memory>
#include <string>

#include "genai/model_runner.h"
#include "transforms/engines/engines.h"

namespace ggflow::pipeline {

class PagedModelRunner final : public genai::ModelRunner {
 public:
  static Result<std::unique_ptr<PagedModelRunner>> open(const std::string& path, int32_t num_blocks);
  Result<genai::LogitsRows> forward(const genai::ScheduledBatch& batch) override;
  int64_t n_vocab() const { return engine_->n_vocab(); }
  int32_t num_blocks() const { return num_blocks_; }

 private:
  PagedModelRunner() = default;
  std::unique_ptr<transforms::PagedEngine> engine_;
  int32_t num_blocks_ = 0;
};

}  // namespace ggflow::pipeline
