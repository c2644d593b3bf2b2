// What a shape rule sees: the node, its input types and shapes, its attributes, and helpers
// shared by the rules (axis normalization, numpy broadcasting with symbols, values of small
// shape-carrying inputs).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/node.h"
#include "ir/shape_value.h"

namespace ggflow::ir {

class InferCtx {
 public:
  explicit InferCtx(Node& node) : node_(node) {}
  const Node& node() const { return node_; }
  size_t n_in() const { return node_.n_inputs(); }
  const Value& input(size_t i) const { return node_.input(i); }
  ElementType type(size_t i) const { return node_.input(i).type(); }
  const Shape& shape(size_t i) const { return node_.input(i).shape(); }
  template <class A>
  const A& attrs() const { return node_.attrs<A>(); }
  // A dynamic dim that belongs to this node (the same symbol on every re-inference).
  Dim fresh(uint32_t key) { return Dim(node_.own_symbol(key)); }

  // The value of a small 1-D (or scalar) integer input as Dims: static numbers, or symbols
  // where the value is a dim of some shape (ShapeOf, Concat, Gather... see shape_value.h).
  std::optional<std::vector<SymInt>> sym_value(size_t i) const;
  // The value of an input when it is known statically (a Constant, or foldable shape math).
  std::optional<std::vector<int64_t>> const_value(size_t i) const;

 private:
  Node& node_;
};

inline Error fail(std::string what, std::string hint = {}) {
  return Error{std::move(what), std::move(hint)};
}
// axis in [-rank, rank) -> [0, rank)
Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const char* what);
// Numpy broadcasting of several shapes. Equal dims stay; a static 1 takes the other side's dim;
// two different symbols give a fresh dim from `ctx` (one of them may be 1 at run time).
Result<Shape> broadcast_shapes(InferCtx& ctx, const std::vector<Shape>& shapes);
Result<void> require_rank(const Shape& s, size_t min_rank, const char* what);
bool same_or_dynamic(const Dim& a, const Dim& b);  // not provably different
std::string join(const std::vector<int64_t>& v);

}  // namespace ggflow::ir
