// MUL_MAT(a [K, N, A2, A3], b [K, M, B2, B3]) -> [N, M, B2, B3]: GGML computes b · aᵀ, which in
// IR order is MatMul(b [.., M, K], a [.., N, K], transpose_b). A block-type weight a stays
// quantized (the IR's MatMul reads its rows). GGML broadcasts a over b's batch dims when B2 is
// a multiple of A2 (grouped-query attention: query head h reads kv head h / (B2 / A2)); numpy
// broadcasting cannot, so a's heads are repeated first: [A3, A2, N, K] -> Unsqueeze(2) ->
// Tile(1, 1, r, 1, 1) -> Reshape to [A3, A2·r, N, K] (A3, N, K read from a's live shape).
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_MUL_MAT(TranslateContext& c) {
  ir::Value a = c.in(0), b = c.in(1);
  const Ne &A = c.src(0).ne, &B = c.src(1).ne;
  if (c.src(0).n_dims == 4 && !(A[2] == B[2])) {
    if (!A[2].is_static() || !B[2].is_static() || !(A[3] == B[3]))
      return c.error("cannot broadcast a " + c.graph().ne_str(A) + " over b " + c.graph().ne_str(B));
    int64_t r = B[2].n / A[2].n;
    auto rep = ir::ops::tile(ir::ops::unsqueeze(a, {2}), {1, 1, r, 1, 1});     // [A3, A2, r, N, K]
    auto s = ir::ops::shape_of(a);
    auto target = ir::ops::concat({ir::ops::slice(s, {0}, {1}, {1}, {0}), ir::ops::const_i64({B[2].n}),
                                   ir::ops::slice(s, {2}, {4}, {1}, {0})}, 0);
    a = ir::ops::reshape(rep, target, false);                                  // [A3, B2, N, K]
  }
  return ir::Value(ir::ops::matmul(b, a, false, true));                       // [.., M, N]
}

}  // namespace ggflow::frontend
