#include "transforms/lm_head.h"

#include <optional>

namespace ggflow::transforms {

namespace {

// The logits input of an elementwise op with a scalar constant, or of Tanh; none for anything else.
std::optional<ir::Value> through_scalar_op(const ir::NodePtr& n) {
  if (n->type() == ir::OpType::Tanh) return n->input(0);
  if (n->type() != ir::OpType::Multiply && n->type() != ir::OpType::Add) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    const ir::Value c = n->input(1 - i);
    if (c.node->type() == ir::OpType::Constant && c.shape().is_static() && ir::product(c.shape().to_vector()) == 1)
      return n->input(i);
  }
  return std::nullopt;
}

}  // namespace

ir::NodePtr lm_head(const ir::Model& m) {
  for (const auto& r : m.results()) {
    if (r->name() != "logits") continue;
    ir::NodePtr n = r->input(0).node;
    while (auto in = through_scalar_op(n)) n = in->node;
    return n->type() == ir::OpType::MatMul ? n : nullptr;
  }
  return nullptr;
}

}  // namespace ggflow::transforms
