// GGML order -> IR order, in ONE place.
//
// GGML writes a shape `ne` innermost first and every tensor has 4 extents; the IR writes shapes
// outermost first. A GGML tensor of IR rank r (4 for activations and graph inputs; a weight keeps
// the rank of its GGUF shape, so a matrix [K, N] is the IR constant [N, K] and a norm vector [E]
// stays [E]) maps to the IR shape
//
//     ir[i] = ne[r - 1 - i]        e.g. ne [576, T, 1, 1] (r = 4)  ->  IR [1, 1, T, 576]
//
// and GGML dim d is IR axis r - 1 - d. Every translator converts shapes, axes and permutations
// through these functions and nowhere else. Symbols (T, KV, O) become IR symbols with the same
// display name, one per translation, so that every dim that GGML says is T is the same IR ?T.
#pragma once

#include <array>
#include <map>

#include "frontend/ggml_graph.h"
#include "ir/dim.h"
#include "ir/element_type.h"

namespace ggflow::frontend {

class SymbolMap {
 public:
  explicit SymbolMap(const GgmlGraph& g) : g_(g) {}
  ir::Dim dim(const Ext& e);   // a literal, or the IR symbol of the GGML symbol

 private:
  const GgmlGraph& g_;
  std::map<int, ir::Symbol> syms_;
};

// IR shape of a GGML shape of IR rank `rank` (1..4): the first `rank` extents, reversed.
ir::Shape to_ir_shape(const Ne& ne, int rank, SymbolMap& syms);
// IR axis of GGML dim `d` in a tensor of IR rank `rank`.
inline int64_t ir_axis(int d, int rank) { return rank - 1 - d; }
// ggml_permute(a, axes): source dim i becomes dim axes[i]. As an IR Transpose perm (output axis
// o reads input axis perm[o]) for rank-4 tensors.
std::array<int64_t, 4> ir_perm_of_ggml_permute(const std::array<int, 4>& axes);
// The IR element type of a GGML type (plain or block); nullopt when the IR has none.
std::optional<ir::ElementType> ir_type(GgmlType t);

}  // namespace ggflow::frontend
