// What a translator sees: the GGML tensor being translated, the IR values of its sources, the
// symbol map and the layout conversion (layout.h). Translators return the IR value that stands
// for the GGML tensor; they never pin a leading dim to a literal (special_zero reshapes and
// ShapeOf carry live lengths), so the same IR serves every layout adaptation.
#pragma once

#include <vector>

#include "frontend/ggml_graph.h"
#include "frontend/layout.h"
#include "base/result.h"
#include "ir/node.h"

namespace ggflow::frontend {

class TranslateContext {
 public:
  TranslateContext(const GgmlGraph& g, SymbolMap& syms) : g_(g), syms_(syms) {}

  const GgmlGraph& graph() const { return g_; }
  const GgmlTensor& tensor() const { return *t_; }
  const GgmlTensor& src(size_t i) const { return g_.tensor(t_->src[i]); }
  size_t n_src() const { return t_->src.size(); }
  ir::Value in(size_t i) const { return values_[t_->src[i]]; }
  int rank() const { return t_->n_dims; }
  // The IR shape GGML says this tensor has.
  ir::Shape out_shape() { return to_ir_shape(t_->ne, t_->n_dims, syms_); }
  ir::Shape shape_of(const Ne& ne, int rank) { return to_ir_shape(ne, rank, syms_); }
  // An error for this tensor: "ggml MUL_MAT 'attn_q-0' (#12): what".
  Error error(const std::string& what, const std::string& hint = {}) const;

  // Reshape `v` to the IR shape `want` without literal leading dims: an axis whose length is
  // provably the input's at the same axis copies it (special_zero 0), the one remaining dynamic
  // axis is -1, the rest are literals. Error when two axes would need -1.
  Result<ir::NodePtr> reshape_to(const ir::Value& v, const ir::Shape& want);

  // used by translate()
  void set_current(const GgmlTensor* t) { t_ = t; }
  std::vector<ir::Value>& values() { return values_; }

 private:
  const GgmlGraph& g_;
  SymbolMap& syms_;
  const GgmlTensor* t_ = nullptr;
  std::vector<ir::Value> values_;  // by GGML tensor id
};

using TranslateFn = Result<ir::Value> (*)(TranslateContext&);

// The translator of each op (nullptr for NONE).
#define X(op) Result<ir::Value> translate_##op(TranslateContext& c);
GGFLOW_GGML_OPS(X)
#undef X
TranslateFn translator(GgmlOp op);

}  // namespace ggflow::frontend
