// SDPAToPagedAttention: the stateful SDPA model becomes the paged model (DESIGN.md section 4).
//
//   input_ids, position_ids   i64 [T]  -> Unsqueeze(1) [T,1] in front of their old consumers, so
//                             the whole graph sees batch = T, seq = 1 (tokens on axis 0)
//   past_lens i32 [B], subsequence_begins i32 [B+1], block_indices i32 [Σ],
//   block_indices_begins i32 [B+1], max_context_len i32 []       (new Parameters, in this order)
//   key_cache.N, value_cache.N  f32 [?blocks, Hkv, 32, S]          (per layer N, in graph order)
//   sampled_tokens_indices i64 [R] (optional): LM head input rows [T,1,E] -> Gather -> [R,1,E]
// Every ScaledDotProductAttention(q [B,H,S,D], k, v [B,Hkv,KV,D], mask) whose k and v come from
// a MakeStateful Concat(Gather(ReadValue, beam_idx), new) becomes
//   q'  = Reshape(Transpose(q, 0,2,1,3), {0,-1})                   [T, H·D]
//   k'  = Reshape(k_new, {0,-1}), v' likewise                      [T, Hkv·D]
//   pa  = PagedAttention(q', k', v', key_cache.N, value_cache.N, past_lens, ..., scale,
//                        sliding_window (the mask's rt_info "sliding_window", else 0), alibi [0]
//                        [, logit_softcap: SDPA's, as input 13 only when it is not 0])
//   out = Transpose(Reshape(pa, {0,1,H,D}), 0,2,1,3)               [T, H, 1, D] = SDPA's [B,H,S,D]
// and Results key_cache.N_out / value_cache.N_out carry the caches the kernel wrote (the caches
// are in/out values, see ir/ops/paged_attention.cpp). An SDPA reading the same cache Concat as an
// earlier one (gemma4's shared KV layers) gets no cache of its own: its PagedAttention takes the
// caches the earlier one wrote and writes the same new rows again (leaving them unchanged), and
// key_cache.N_out / value_cache.N_out read the last writer of each chain. beam_idx, attention_mask, the Assigns and
// the ReadValues disappear. A model that cannot be converted gets an error that names the
// precondition that failed.
#pragma once

#include "pattern/pass.h"

namespace ggflow::transforms {

inline constexpr int64_t kPagedBlockSize = 32;

struct PagedOptions {
  bool sampled_tokens_indices = true;   // add the optional row gather before the LM head
  int64_t block_size = kPagedBlockSize;
};

class SDPAToPagedAttention : public pattern::Pass {
 public:
  explicit SDPAToPagedAttention(PagedOptions options = {}) : options_(options) {}
  std::string name() const override { return "SDPAToPagedAttention"; }
  Result<bool> run(ir::Model& model) override;

 private:
  PagedOptions options_;
};

}  // namespace ggflow::transforms
