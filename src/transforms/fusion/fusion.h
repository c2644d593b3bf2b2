// Fusions for execution (DESIGN.md section 8): small MatcherPasses that merge ops into one the IR
// already has, computing the same bits with fewer steps, run on every layout's model after the
// layout passes (runtime::ModelFile::layout_model), so the raw, SDPA and paged graphs stay
// identical in what they compute. Each pass logs where it applied and why it did not.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ir/model.h"
#include "pattern/pass.h"

namespace ggflow::transforms {

// FuseRMSNormScale: Multiply(RMSNorm(x), w), w a constant f32 [H] (the norm weight), becomes
// RMSNorm(x, w): the op's gamma input computes (x * scale) * w, the two ops' exact bits
// (ir/ops/reduce.cpp, cpu/kernels/norm.h), in one step and one pass over the row.
pattern::MatcherPass fuse_rmsnorm_scale();

// Every fusion above, in order. `applied` (optional) receives one line per pass that changed the
// graph: "FuseRMSNormScale x61".
Status fuse_for_execution(ir::Model& model, std::vector<std::string>* log, std::vector<std::string>* applied = nullptr);

}  // namespace ggflow::transforms
