// The boundary between the scheduler (serving/) and a paged model (DESIGN.md section 4).
//
// Each engine step hands the model one ScheduledBatch: B subsequences (decode rows first, one token
// each, then prefill chunks), their T new tokens concatenated on axis 0, and the block tables
// that say where every sequence's K/V lives in `key_cache.N` / `value_cache.N`
// ([num_blocks, kv_heads, 32, head_size], num_blocks = the engine's pool size). The model writes
// the K/V of the new tokens (position p of subsequence s goes to slot p % 32 of block
// block_indices[block_indices_begins[s] + p / 32]), attends over positions [0, past_lens[s] + n_s),
// and returns one logits row per entry of sampled_tokens_indices, in that order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace ggflow::runtime {

struct ScheduledBatch {
  static constexpr int32_t kBlockSize = 32;

  // Model inputs, named as in the PA model, all int32 (the runner makes them tensors once; the
  // model's i64 inputs are widened there).
  std::vector<int32_t> input_ids;              // [T]
  std::vector<int32_t> position_ids;           // [T]: past_lens[s] + 0, 1, ... within subsequence s
  std::vector<int32_t> past_lens;              // i32 [B]: tokens of s already in cache
  std::vector<int32_t> subsequence_begins;     // i32 [B+1]: prefix sums of new tokens, from 0, last = T
  std::vector<int32_t> block_indices;          // i32 [Σ blocks]: block tables concatenated
  std::vector<int32_t> block_indices_begins;   // i32 [B+1]: prefix sums of table lengths, from 0
  int32_t max_context_len = 0;                 // max over s of past_lens[s] + n_s
  std::vector<int32_t> sampled_tokens_indices; // [R]: rows (into T) that need logits, ascending
  std::vector<uint64_t> lora;                  // [B] or empty: LoRA adapters of each subsequence,
                                               // a mask, 0 none (runtime/lora_inputs.h)

  // Bookkeeping for the engine and for tests (not model inputs).
  std::vector<uint64_t> seq_ids;               // [B]: request of each subsequence
  std::vector<int32_t> sampled_seq;            // [R]: subsequence of each sampled row
  int32_t num_decode_seqs = 0;                 // subsequences [0, num_decode_seqs) are decode rows
  std::vector<int32_t> fresh_blocks;           // handed out by the block manager for this step: their
                                               // slots are written before they are read (a runner
                                               // may poison them: kv_poison_enabled)

  int64_t num_tokens() const { return int64_t(input_ids.size()); }
  int32_t num_seqs() const { return int32_t(past_lens.size()); }
  bool empty() const { return input_ids.empty(); }
};

// f32 [rows, vocab], row r belongs to batch.sampled_tokens_indices[r]: a view of the runner's
// own rows (PagedRunner: the model's logits output), valid until its next forward. No copy per
// step (8 sequences of a 49152-token vocabulary are 1.5 MB).
struct LogitsRows {
  int64_t vocab = 0;
  std::span<const float> data;
  int64_t rows() const { return vocab > 0 ? int64_t(data.size()) / vocab : 0; }
  std::span<const float> row(int64_t r) const {
    return std::span<const float>(data).subspan(size_t(r * vocab), size_t(vocab));
  }
};

class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  // Runs one step. An Error fails every request of the batch (their K/V may be partly written);
  // the engine goes on with the others.
  virtual Result<LogitsRows> forward(const ScheduledBatch& batch) = 0;
};

}  // namespace ggflow::runtime
