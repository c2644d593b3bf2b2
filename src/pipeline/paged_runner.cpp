#include "pipeline/paged_runner.h"

namespace ggflow::pipeline {

Result<std::unique_ptr<PagedModelRunner>> PagedModelRunner::open(const std::string& path, int32_t num_blocks) {
  if (num_blocks <= 0) return make_error("the KV cache needs at least one block", "raise the number of blocks");
  auto e = transforms::PagedEngine::open(path);
  if (!e) return e.error();
  std::unique_ptr<PagedModelRunner> r(new PagedModelRunner());
  r->engine_ = std::move(*e);
  r->num_blocks_ = num_blocks;
  return r;
}

Result<genai::LogitsRows> PagedModelRunner::forward(const genai::ScheduledBatch& b) {
  auto wide = [](const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
  transforms::PagedEngine::Inputs in;
  in.input_ids = b.input_ids;                            // i64 [T]
  in.position_ids = b.position_ids;                      // i64 [T]
  in.past_lens = wide(b.past_lens);                      // [B]
  in.subsequence_begins = wide(b.subsequence_begins);    // [B+1]
  in.block_indices = wide(b.block_indices);              // [Σ blocks]
  in.block_indices_begins = wide(b.block_indices_begins);  // [B+1]
  in.max_context_len = b.max_context_len;
  in.sampled_tokens_indices = b.sampled_tokens_indices;  // [R]
  auto rows = engine_->forward(in, num_blocks_);
  if (!rows) return rows.error();
  return genai::LogitsRows{engine_->n_vocab(), std::move(*rows)};
}

}  // namespace ggflow::pipeline
