// Two small example passes for the pass test helper (real passes live in src/transforms/).
#pragma once

#include "pattern/pass.h"

namespace ggflow::pattern::testing {

// EliminateNopConvert: Convert(x, to = type of x) is x.
inline MatcherPass eliminate_nop_convert() {
  P convert = op(ir::OpType::Convert, {any()});  // Convert(x)
  return MatcherPass("EliminateNopConvert", convert, [convert](const Match& m, Rewriter& rw) {
    ir::NodePtr c = m.node(convert);
    const ir::Value& x = c->input(0);
    if (c->attrs<ir::TypeAttrs>().type != x.type())
      return Outcome::skip("converts " + std::string(ir::to_string(x.type())) + " to " +
                           std::string(ir::to_string(c->attrs<ir::TypeAttrs>().type)));
    (void)rw.replace_value(ir::Value(c, 0), x);  // consumers read x; tensor names move to x
    return Outcome::done();
  });
}

// A miniature FixEmbdAxis (DESIGN.md section 3): Unsqueeze(axis 0) <- Convert? <- Gather <- (indices)
// Squeeze? <- Parameter inp_tokens becomes Unsqueeze(axis 1), keeping name and rt_info.
inline MatcherPass mini_fix_embd_axis() {
  P tokens = parameter("inp_tokens");
  P gather = op(ir::OpType::Gather, {any(), optional(ir::OpType::Squeeze, tokens)});
  P unsq = op(ir::OpType::Unsqueeze, {optional(ir::OpType::Convert, gather)});
  return MatcherPass("MiniFixEmbdAxis", unsq, [unsq](const Match& m, Rewriter& rw) {
    ir::NodePtr old = m.node(unsq);
    if (old->attrs<ir::AxesAttrs>().axes != std::vector<int64_t>{0}) return Outcome::skip("axis is already not 0");
    auto fixed = rw.make(ir::OpType::Unsqueeze, {old->input(0)}, ir::AxesAttrs{{1}}, old);  // [T,1,H]
    (void)rw.replace_node(old, fixed);
    return Outcome::done();
  });
}

}  // namespace ggflow::pattern::testing
