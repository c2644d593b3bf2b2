// The LM head: the MatMul whose output the Result 'logits' reads, directly or through
// elementwise ops with a scalar and Tanh (gemma2's final soft-cap, cap·tanh(logits / cap)). The
// layout passes put the row selection (inp_out_ids, sampled_tokens_indices) in front of it.
#pragma once

#include "ir/model.h"

namespace ggflow::transforms {

// nullptr when the model has no Result 'logits' or it does not come from a MatMul that way.
ir::NodePtr lm_head(const ir::Model& m);

}  // namespace ggflow::transforms
