// RMS_NORM(x, eps) and NORM(x, eps) over ne0 (the IR's innermost axis), without weights (GGML
// multiplies by the weight in a separate MUL).
//   RMS_NORM: RMSNorm(x) = x / sqrt(mean(x²) + eps)
//   NORM:     d = x - mean(x); y = d * (1 / sqrt(mean(d²) + eps))     (ggml_compute_forward_norm)
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_RMS_NORM(TranslateContext& c) {
  return ir::Value(ir::ops::rms_norm(c.in(0), std::nullopt, c.tensor().p<NormParams>().eps));
}

Result<ir::Value> translate_NORM(TranslateContext& c) {
  float eps = c.tensor().p<NormParams>().eps;
  ir::Value x = c.in(0);
  auto d = ir::ops::subtract(x, ir::ops::reduce_mean(x, {-1}, true));            // [.., E]
  auto var = ir::ops::reduce_mean(ir::ops::multiply(d, d), {-1}, true);           // [.., 1]
  auto inv = ir::ops::divide(ir::ops::scalar_f32(1.0f), ir::ops::sqrt(ir::ops::add(var, ir::ops::scalar_f32(eps))));
  return ir::Value(ir::ops::multiply(d, inv));
}

}  // namespace ggflow::frontend
