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
  return ir::Value(ir::ops::layer_norm(c.in(0), c.tensor().p<NormParams>().eps));
}

}  // namespace ggflow::frontend
