// MakeStateful: the raw layout's stateless KV cache becomes state (DESIGN.md section 3, the SDPA
// layout). Each layer's cache write
//   cache_k_lN [1,1,KV,E] --ScatterUpdate(axis 2, self_kv_idxs, k_new [1,1,T,E])--> [1,1,KV,E]
// becomes
//   past = ReadValue('cache_k_lN', init zeros [B,1,0,E])      [B,1,P,E]
//   past = Gather(past, beam_idx, axis 0)                        [B,1,P,E]   (beam reordering)
//   kv   = Concat(past, k_new, axis 2)                           [B,1,P+T,E]
//   Assign('cache_k_lN', kv)
// and the Parameter cache_k_lN and the Result cache_k_lN_out disappear. Attention is already one
// ScaledDotProductAttention per layer (the FLASH_ATTN_EXT translation; GQA reads kv head
// h / group without repeating heads). Precondition: AdaptToGenAI ran (input_ids, beam_idx).
#pragma once

#include "pattern/pass.h"

namespace ggflow::transforms {

class MakeStateful : public pattern::Pass {
 public:
  std::string name() const override { return "MakeStateful"; }
  Result<bool> run(ir::Model& model) override;
};

}  // namespace ggflow::transforms
