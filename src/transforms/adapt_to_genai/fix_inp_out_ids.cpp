// FixInpOutIdsRowSelect (the article's part 2, DESIGN.md section 3). The raw graph selects the
// rows that need logits with GET_ROWS on an activation:
//   x [1,1,T,E] -> Squeeze(0,1) [T,E] -> Gather(axis 0, Squeeze(inp_out_ids) [1,N]) [1,N,E]
//     -> optional Convert -> Unsqueeze(0) [1,1,N,E]
// which assumes the leading axes are 1. Under GenAI the activation is [B,1,S,E] with
//   SDPA  B = 1, S = T (one request, tokens on axis 2)
//   PA    B = T, S = 1 (every token a row on axis 0)
// and the rows wanted are the last of each batch row: global row b·S + (S-1). So:
//   flat  = Reshape(x, [-1, E])                          [B·S, E]
//   rows  = Range(0, B) · S + (S - 1)                    i64 [B]      SDPA {T-1}; PA {0..T-1}
//   g     = Gather(flat, rows, axis 0)                   [B, E]
//   out   = Unsqueeze(g, {1, 2})                         [B,1,1,E]    SDPA [1,1,1,E]; PA [T,1,1,E]
// B and S are read from x's live shape, so one graph serves both layouts. The new Unsqueeze
// takes the old one's name, rt_info, tensor names and consumers.
#include "ir/ops.h"
#include "pattern/pattern.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::transforms {

using namespace ggflow::pattern;

MatcherPass fix_inp_out_ids_row_select() {
  P ids = parameter("inp_out_ids");                                        // i32 [1,1,1,N]
  P x = any({rank(4)});                                                    // f32 [B,1,S,E]
  P data = op(ir::OpType::Squeeze, {x});                                   // [S,E] (raw)
  P gather = op(ir::OpType::Gather, {data, optional(ir::OpType::Squeeze, ids)});
  P conv = optional(ir::OpType::Convert, gather);
  P unsq = op(ir::OpType::Unsqueeze, {conv});
  return MatcherPass("FixInpOutIdsRowSelect", unsq, [=](const Match& m, Rewriter& rw) {
    ir::NodePtr old = m.node(unsq), g = m.node(gather);
    ir::Value xv = m.value(x);
    if (g->attrs<ir::GatherAttrs>().axis != 0 || g->attrs<ir::GatherAttrs>().batch_dims != 0)
      return Outcome::skip("the Gather is not a plain row gather on axis 0");
    if (m.node(data)->attrs<ir::AxesAttrs>().axes != std::vector<int64_t>{0, 1})
      return Outcome::skip("the activation is not squeezed on axes {0, 1}");
    if (old->attrs<ir::AxesAttrs>().axes != std::vector<int64_t>{0})
      return Outcome::skip("Unsqueeze axes are not {0} (already fixed?)");
    const ir::Dim& E = xv.shape()[3];
    if (!E.is_static()) return Outcome::skip("the hidden size " + E.str() + " is not static");
    namespace o = ir::ops;
    auto shp = o::shape_of(xv);                                                   // i64 [4]
    auto B = o::gather(shp, o::scalar_i64(0), 0);                                 // i64 []
    auto S = o::gather(shp, o::scalar_i64(2), 0);                                 // i64 []
    auto flat = o::reshape(xv, {-1, E.value()});                                  // [B·S, E]
    auto rows = o::add(o::multiply(o::range(o::scalar_i64(0), B, o::scalar_i64(1)), S),
                       o::subtract(S, o::scalar_i64(1)));                          // i64 [B]
    ir::NodePtr sel = o::gather(flat, rows, 0);                                   // [B, E]
    if (m.has(conv)) sel = o::convert(sel, m.node(conv)->attrs<ir::TypeAttrs>().type);
    auto fixed = rw.make(ir::OpType::Unsqueeze, {sel}, ir::AxesAttrs{{1, 2}}, old);  // [B,1,1,E]
    if (auto s = rw.replace_node(old, fixed); !s) return Outcome::skip(s.error().what);
    return Outcome::done();
  });
}

}  // namespace ggflow::transforms
