#include "frontend/layout.h"

namespace ggflow::frontend {

ir::Dim SymbolMap::dim(const Ext& e) {
  if (e.is_static()) return ir::Dim(e.n);
  auto it = syms_.find(e.sym);
  if (it == syms_.end()) it = syms_.emplace(e.sym, ir::Symbol::named(g_.ext_str(e))).first;
  return ir::Dim(it->second);
}

ir::Shape to_ir_shape(const Ne& ne, int rank, SymbolMap& syms) {
  std::vector<ir::Dim> d;
  for (int i = 0; i < rank; ++i) d.push_back(syms.dim(ne[rank - 1 - i]));
  return ir::Shape(std::move(d));
}

std::array<int64_t, 4> ir_perm_of_ggml_permute(const std::array<int, 4>& axes) {
  // result ne[axes[i]] = src ne[i]  =>  IR output axis 3 - axes[i] reads IR input axis 3 - i
  std::array<int64_t, 4> perm{};
  for (int i = 0; i < 4; ++i) perm[3 - axes[i]] = 3 - i;
  return perm;
}

std::optional<ir::ElementType> ir_type(GgmlType t) { return ir::from_ggml(t); }

}  // namespace ggflow::frontend
