// SET_ROWS(dst [E, R], rows [E, N], indices [N]) -> dst with row indices[i] replaced by
// rows[:, i]: the stateless KV-cache write of the raw layout. In IR order: ScatterUpdate on the
// row axis (IR axis 2 of the rank-4 [1, 1, R, E]) with the indices flattened to [N] and the rows
// converted to the destination's type.
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_SET_ROWS(TranslateContext& c) {
  ir::Value dst = c.in(0), rows = c.in(1);
  if (rows.type() != dst.type()) rows = ir::ops::convert(rows, dst.type());
  auto idx = ir::ops::reshape(c.in(2), std::vector<int64_t>{-1});                 // [N]
  return ir::Value(ir::ops::scatter_update(dst, idx, rows, ir_axis(1, c.rank())));
}

}  // namespace ggflow::frontend
