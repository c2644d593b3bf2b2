// Symbolic values of shape-carrying tensors. Shape subgraphs such as
// `Concat(Constant[1,1], ShapeOf(input_ids))` feed Reshape and Broadcast; evaluating them as
// Dims (a static number or a symbol) lets a Reshape's output keep the token symbol `T`, which is
// what makes the broadcast guard of the verifier able to see the same T on two axes.
// Understood: Constant, ShapeOf, Concat, Gather (constant indices), Convert, Squeeze, Unsqueeze,
// Reshape (of 1-D values), Slice, and Add/Multiply of static numbers. Anything else: unknown.
#pragma once

#include <optional>
#include <vector>

#include "ir/node.h"

namespace ggflow::ir {

// One element of a shape-carrying tensor: a number (any sign: -1 and 0 mean something to
// Reshape) or the length named by a symbol.
struct SymInt {
  int64_t value = 0;
  Symbol sym;  // valid(): the value is that symbol's length
  bool is_sym() const { return sym.valid(); }
  static SymInt of(const Dim& d) { return d.is_static() ? SymInt{d.value(), {}} : SymInt{-1, d.symbol()}; }
  Dim dim() const { return is_sym() ? Dim(sym) : Dim(value); }
};

std::optional<std::vector<SymInt>> symbolic_value(const Value& v, int depth = 0);

}  // namespace ggflow::ir
