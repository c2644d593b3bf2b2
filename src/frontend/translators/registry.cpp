// The translator table, keyed by GgmlOp (one entry per line of GGFLOW_GGML_OPS).
#include "frontend/translate_ctx.h"

namespace ggflow::frontend {

Result<ir::Value> translate_NONE(TranslateContext& c) { return c.error("a leaf has no translator"); }

TranslateFn translator(GgmlOp op) {
  static const TranslateFn table[] = {
#define X(n) &translate_##n,
      GGFLOW_GGML_OPS(X)
#undef X
  };
  return op == GgmlOp::NONE ? nullptr : table[static_cast<int>(op)];
}

}  // namespace ggflow::frontend
