// GET_ROWS(table a [E, R, B], indices b [N, B]) -> [E, N, B]: the shared embedding lookup.
//
// The contract (DESIGN.md section 3; the raw consumer depends on it, a layout adaptation pass
// rewrites it, this translator never does):
//   indices [1, B, 1?, N] --Squeeze(0, 1)--> [B?, N]
//   Gather rows of the table (axis 0)          -> [B?, N, E]
//   optional Convert to the output type (f16 table -> f32)
//   Unsqueeze(axis 0)                          -> [1, B?, N, E]   (rank 4 again)
// A rank-4 activation table [1, 1, R, E] is squeezed to [R, E] first; a batched table
// [1, B, R, E] (B > 1) gathers per batch (Gather axis 1, batch_dims 1).
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_GET_ROWS(TranslateContext& c) {
  ir::Value data = c.in(0);
  ir::Value idx = ir::ops::squeeze(c.in(1), {0, 1});          // i32 [B, N]
  const ir::Shape& ds = data.shape();
  ir::NodePtr rows;
  if (ds.rank() == 2) {
    rows = ir::ops::gather(data, idx, 0);                       // [B, N, E]
  } else if (ds.rank() == 4 && ds[0].is(1) && ds[1].is(1)) {
    rows = ir::ops::gather(ir::ops::squeeze(data, {0, 1}), idx, 0);
  } else if (ds.rank() == 4 && ds[0].is(1)) {
    rows = ir::ops::gather(ir::ops::squeeze(data, {0}), idx, 1, 1);
  } else {
    return c.error("table " + ds.str() + " must be a matrix or [1, B, R, E]");
  }
  auto want = ir_type(c.tensor().type);
  if (want && rows->out_type() != *want) rows = ir::ops::convert(rows, *want);
  return ir::Value(ir::ops::unsqueeze(rows, {0}));              // [1, B, N, E]
}

}  // namespace ggflow::frontend
