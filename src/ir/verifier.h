// The verifier: checks a Model is well formed before anyone runs or rewrites it.
//  - no cycles; parameters are Parameters, results are Results, sinks are Assigns;
//  - every node's shape rule succeeds and its recorded outputs equal what its inputs give now
//    (a rewrite that forgot Model::infer() is caught);
//  - every reachable Parameter is listed, every Result reached is listed in the results;
//  - every Assign writes a variable some ReadValue reads, with the same type and shape;
//  - the broadcast guard (DESIGN.md section 3, rule 4), see check_broadcast().
#pragma once

#include "base/result.h"
#include "ir/model.h"

namespace ggflow::ir {

// rt_info key that marks an intended outer-product broadcast (e.g. a mask built from
// positions [T,1] and key positions [1,KV]); the guard lets such a node pass.
inline constexpr const char* kAllowOuterBroadcast = "allow_outer_broadcast";

struct VerifyOptions {
  bool broadcast_guard = true;
};

Status verify(const Model& model, const VerifyOptions& options = {});

// The broadcast guard for one elementwise node (Add, Multiply, Select, Less, ...); ok for other ops.
Status check_broadcast(const Node& node);
bool is_elementwise(OpType t);

}  // namespace ggflow::ir
