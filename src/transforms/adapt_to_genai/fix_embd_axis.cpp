// FixEmbdAxis (the article's fix, DESIGN.md section 3). translate_get_rows restores rank 4 with
// Unsqueeze(axis 0), which the raw consumer needs. Under GenAI the gathered rows are
//   SDPA  [1, T, H]  (input_ids [1,T] -> inp_tokens [1,1,1,T] -> Squeeze(0,1) -> [1,T])
//   PA    [T, 1, H]  (input_ids [T] -> Unsqueeze(1) [T,1] -> [1,1,T,1] -> Squeeze(0,1) -> [T,1])
// and only axis 1 gives the right rank-4 tensor in both: [1,1,T,H] and [T,1,1,H]. Axis 0 would
// give [1,T,1,H] under PA: the token count leaves the leading axis.
//
// Pattern, matched by structure and never by name (a second lookup such as Gemma's per-layer
// `pe_tok_flat` must be fixed too):
//   Unsqueeze(axes {0}) <- optional Convert <- Gather(table, indices) <- optional Squeeze <- Parameter inp_tokens
// The Unsqueeze is replaced by a new Unsqueeze(axis 1) of the same input, with its friendly name,
// rt_info, tensor names and consumers; the Gather is untouched.
#include "transforms/adapt_to_genai/adapt_to_genai.h"

#include "pattern/pattern.h"

namespace ggflow::transforms {

using namespace ggflow::pattern;

MatcherPass fix_embd_axis() {
  P tokens = parameter("inp_tokens");                                     // i32 [1,1,1,T]
  P indices = optional(ir::OpType::Squeeze, tokens);                      // i32 [1,T] (SDPA) | [T,1] (PA)
  P gather = op(ir::OpType::Gather, {any(), indices});                    // [1,T,H] | [T,1,H]
  P unsq = op(ir::OpType::Unsqueeze, {optional(ir::OpType::Convert, gather)});
  return MatcherPass("FixEmbdAxis", unsq, [unsq, gather](const Match& m, Rewriter& rw) {
    ir::NodePtr old = m.node(unsq);
    const auto& axes = old->attrs<ir::AxesAttrs>().axes;
    if (axes != std::vector<int64_t>{0})
      return Outcome::skip("Unsqueeze axes are not {0} (already fixed?)");
    if (m.node(gather)->attrs<ir::GatherAttrs>().axis != 0)
      return Outcome::skip("the Gather is not a row lookup (axis != 0)");
    auto fixed = rw.make(ir::OpType::Unsqueeze, {old->input(0)}, ir::AxesAttrs{{1}}, old);  // [1,1,T,H] | [T,1,1,H]
    if (auto s = rw.replace_node(old, fixed); !s) return Outcome::skip(s.error().what);
    return Outcome::done();
  });
}

}  // namespace ggflow::transforms
