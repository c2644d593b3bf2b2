// AdaptToGenAI: the layout-dependent adaptation of the builder's raw graph (DESIGN.md section 3).
//
// The raw graph (frontend::translate of builder::build) has the inputs inp_tokens, inp_pos,
// inp_out_ids i32 [1,1,1,T|N], self_kv_idxs i64 [1,1,1,T], self_kq_mask(_swa) f32 [1,1,T,KV]
// and the caches. AdaptToGenAI gives it the GenAI interface, in this order:
//   1. FixEmbdAxis (fix_embd_axis.cpp): every token-table lookup restores rank 4 with
//      Unsqueeze(axis 1) instead of 0, found by structure from inp_tokens.
//   2. FixInpOutIdsRowSelect (fix_inp_out_ids.cpp): the inp_out_ids row gathers become global-row
//      gathers: the last row of each batch row (SDPA: the prompt's last token; PA: every token).
//   3. GenAIInterface (genai_interface.cpp): input_ids, attention_mask, position_ids (i64 [?,?]),
//      beam_idx (i32 [?]) replace the raw inputs; the masks are built from attention_mask and the
//      positions (the sliding-window mask ANDs the window in and carries rt_info
//      "sliding_window"); the LM head becomes Result 'logits' <- MatMul of a rank-3 input.
//      (The tokenizer does not travel in rt_info: runtime::ModelFile opens the file once and
//      hands the same mapping to the tokenizer and to the model.)
// The caches stay Parameters: MakeStateful turns them into state.
// A graph without an `inp_tokens` Parameter is not the builder's: the pass changes nothing and
// logs why.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "ir/model.h"
#include "pattern/pass.h"

namespace ggflow::transforms {

inline constexpr const char* kSlidingWindow = "sliding_window";  // rt_info of the SWA mask (int64)
// The per-token LoRA factor inputs (builder/lora.h: lora_scale_0, lora_scale_1, ...), under the same
// names in every layout: raw f32 [1,1,T,1], SDPA [B,S], paged [T].
std::string lora_scale_name(size_t i);

// What the adaptation needs from the model file (runtime/model_file.h reads it).
struct GenAIOptions {
  int64_t sliding_window = 0;  // the model's window (self_kq_mask_swa), 0: none
};

// The three steps, usable on their own (tests run each).
pattern::MatcherPass fix_embd_axis();
pattern::MatcherPass fix_inp_out_ids_row_select();
std::unique_ptr<pattern::Pass> genai_interface(GenAIOptions options);

class AdaptToGenAI : public pattern::Pass {
 public:
  explicit AdaptToGenAI(GenAIOptions options = {}) : options_(std::move(options)) {}
  std::string name() const override { return "AdaptToGenAI"; }
  Result<bool> run(ir::Model& model) override;

 private:
  GenAIOptions options_;
};

}  // namespace ggflow::transforms
