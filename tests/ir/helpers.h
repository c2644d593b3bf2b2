// Small helpers shared by the IR tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ir/evaluator.h"
#include "ir/model.h"
#include "ir/ops.h"

namespace ggflow::ir::testing {

// "f32[1,?T,4]" for output i of a node.
inline std::string sig(const NodePtr& n, size_t i = 0) {
  if (n->error()) return "error: " + n->error()->what;
  return std::string(to_string(n->out_type(i))) + n->out_shape(i).str();
}
inline std::string err(const NodePtr& n) { return n->error() ? n->error()->what : std::string("no error"); }

// Evaluate a single-result graph built from `out` with the given parameters (in order).
inline Result<Tensor> eval1(const NodePtr& out, std::vector<NodePtr> params, std::vector<Tensor> values) {
  Model m({ops::result(out)}, std::move(params));
  auto r = evaluate(m, values);
  if (!r) return r.error();
  return (*r)[0];
}
// Evaluate a graph without parameters.
inline Tensor eval0(const NodePtr& out) {
  auto r = eval1(out, {}, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
  return r.ok() ? *r : Tensor();
}
inline std::vector<float> f32s(const Tensor& t) { return t.to_f32(); }
inline std::vector<int64_t> i64s(const Tensor& t) { return t.to_i64(); }

}  // namespace ggflow::ir::testing
