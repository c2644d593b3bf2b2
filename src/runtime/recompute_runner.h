// RecomputeRunner: the naive reference twin of the paged model runner. Its "KV cache" blocks hold
// token ids instead of keys and values: forward() writes each new token into its slot through the
// block table exactly as the paged model writes K/V, then, for every row that needs logits, reads
// the sequence's whole history back through the block table and runs it from scratch through the
// raw runner (the raw GGML layout). Quadratic and slow, obviously correct; paged runners are
// tested against it, and it lets the continuous-batching pipeline run before (or without) them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/paged_batch.h"
#include "runtime/raw_runner.h"

namespace ggflow::runtime {

class RecomputeRunner final : public BatchRunner {
 public:
  static Result<std::unique_ptr<RecomputeRunner>> create(const ModelFile& file, int32_t num_blocks);
  Result<LogitsRows> forward(const ScheduledBatch& batch) override;
  const builder::HParams& hparams() const { return raw_->hparams(); }

 private:
  RecomputeRunner() = default;
  std::unique_ptr<RawRunner> raw_;
  std::vector<int32_t> slots_;  // i32 [num_blocks * 32]: the token in each cache slot, -1 empty
  std::vector<float> logits_;   // the last forward's rows (LogitsRows views them)
};

}  // namespace ggflow::runtime
