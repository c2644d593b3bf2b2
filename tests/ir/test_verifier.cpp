// The verifier: cycles, listed parameters/results, stale shapes after an edit, variables, and
// the broadcast guard of DESIGN.md section 3 rule 4.
#include "helpers.h"
#include "ir/verifier.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using ET = ElementType;

namespace {
std::string verr(const Model& m) {
  auto s = verify(m);
  return s.ok() ? "ok" : s.error().what;
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(Verifier, AcceptsAWellFormedModel) {
  Symbol T = Symbol::named("T");
  auto x = ops::parameter(ET::f32, {1, T, 8}, "x");
  auto w = ops::parameter(ET::f32, {8}, "w");
  auto y = ops::multiply(ops::rms_norm(x, std::nullopt, 1e-5f), w);  // [1,T,8] * [8]: fine
  auto z = ops::add(y, ops::const_f32(std::vector<float>(8, 1.0f), std::vector<int64_t>{1, 1, 8}));
  Model m({ops::result(z, "out")}, {x, w});
  EXPECT_EQ(verr(m), "ok");
}

TEST(Verifier, RefusesTokenAxisOuterProduct) {
  // The article's bug: the same token count T on axis 1 of one operand and axis 0 of the other.
  Symbol T = Symbol::named("T");
  auto a = ops::parameter(ET::f32, {1, T, 4}, "embd");    // [1,T,H]
  auto b = ops::parameter(ET::f32, {T, 1, 4}, "pos");     // [T,1,H]
  auto add = ops::add(a, b);
  add->set_name("inp_add");
  EXPECT_EQ(sig(add), "f32[?T,?T,4]");  // shape inference alone lets it through
  Model m({ops::result(add)}, {a, b});
  std::string e = verr(m);
  EXPECT_TRUE(has(e, "node 'inp_add' (Add): broadcasting [1,?T,4] with [?T,1,4] multiplies dynamic dims T")) << e;
  EXPECT_TRUE(has(e, "into [?T,?T,4]")) << e;
  EXPECT_TRUE(has(verify(m).error().hint, "allow_outer_broadcast"));

  // Two different token symbols: refused as well, and both are named.
  Symbol T2 = Symbol::named("T");
  auto c = ops::parameter(ET::f32, {T2, 1, 4}, "pos2");
  auto add2 = ops::add(a, c);
  Model m2({ops::result(add2)}, {a, c});
  e = verr(m2);
  EXPECT_TRUE(has(e, "multiplies dynamic dims T (axis 0 of input 1) and T' (axis 1 of input 0)") ||
              has(e, "multiplies dynamic dims T (axis 1 of input 0) and T' (axis 0 of input 1)") ||
              has(e, "multiplies dynamic dims T (axis 0 of input 0)"))
      << e;

  // A missing leading axis counts as 1: [T,1,H] + [T,H] is the same bug.
  auto d = ops::parameter(ET::f32, {T, 4}, "d");
  Model m3({ops::result(ops::add(b, d))}, {b, d});
  EXPECT_TRUE(has(verr(m3), "multiplies dynamic dims")) << verr(m3);

  // Select broadcasts its condition too.
  auto cond = ops::parameter(ET::boolean, {T, 1}, "cond");
  auto val = ops::parameter(ET::f32, {1, T}, "val");
  Model m4({ops::result(ops::select(cond, val, ops::scalar_f32(0)))}, {cond, val});
  EXPECT_TRUE(has(verr(m4), "(Select): broadcasting")) << verr(m4);
}

TEST(Verifier, AllowsOneSidedAndIntendedBroadcasts) {
  Symbol T = Symbol::named("T"), K = Symbol::named("KV");
  auto x = ops::parameter(ET::f32, {T, 4}, "x");
  auto row = ops::parameter(ET::f32, {1, 4}, "row");
  auto col = ops::parameter(ET::f32, {T, 1}, "col");
  Model ok1({ops::result(ops::multiply(x, row)), ops::result(ops::add(x, col))}, {x, row, col});
  EXPECT_EQ(verr(ok1), "ok");
  // [T,1] x [1,4]: only one dynamic dim is stretched: fine
  Model ok2({ops::result(ops::multiply(col, row))}, {col, row});
  EXPECT_EQ(verr(ok2), "ok");
  // a mask from positions: [T,1] >= [1,KV] is an outer product; refused unless marked
  auto q = ops::parameter(ET::i64, {T, 1}, "qpos");
  auto k = ops::parameter(ET::i64, {1, K}, "kpos");
  auto mask = ops::greater_equal(q, k);
  Model m({ops::result(mask)}, {q, k});
  EXPECT_TRUE(has(verr(m), "multiplies dynamic dims T (axis 0 of input 0) and KV (axis 1 of input 1)")) << verr(m);
  mask->rt_info()[kAllowOuterBroadcast] = true;
  EXPECT_EQ(verr(m), "ok");
  EXPECT_TRUE(verify(m, VerifyOptions{false}).ok());
}

TEST(Verifier, StructuralErrors) {
  {
    auto x = ops::parameter(ET::f32, {4}, "x");
    Model unlisted({ops::result(ops::exp(x))}, {});
    EXPECT_TRUE(has(verr(unlisted), "node 'x' (Parameter) is used but not listed")) << verr(unlisted);
  }
  {
    auto x = ops::parameter(ET::f32, {4}, "x");
    auto y = ops::exp(x);
    auto r2 = ops::result(y, "orphan");
    Model orphan({ops::result(y, "out")}, {x});
    EXPECT_TRUE(has(verr(orphan), "node 'orphan' (Result) reads node")) << verr(orphan);
    EXPECT_TRUE(has(verr(orphan), "not in the model's results"));
  }
  {
    auto x = ops::parameter(ET::f32, {4}, "x");
    Model notres({ops::exp(x)}, {x});
    EXPECT_TRUE(has(verr(notres), "is not a Result"));
  }
  {
    auto x = ops::parameter(ET::f32, {4}, "x");
    auto bad = ops::add(x, ops::parameter(ET::f32, {5}, "z"));
    bad->set_name("bad");
    (void)bad->infer();
    Model invalid({ops::result(bad)}, {x, bad->input(1).node});
    EXPECT_TRUE(has(verr(invalid), "node 'bad' (Add): cannot broadcast")) << verr(invalid);
  }
}

TEST(Verifier, CatchesCyclesAndStaleShapes) {
  auto x = ops::parameter(ET::f32, {4}, "x");
  auto a = ops::exp(x);
  auto b = ops::tanh(a);
  auto r = ops::result(b);
  Model m({r}, {x});
  a->set_input(0, b);  // a cycle a -> b -> a
  EXPECT_TRUE(has(verr(m), "cycle")) << verr(m);
  a->set_input(0, x);  // break it again (and free the nodes)
  EXPECT_EQ(verr(m), "ok");
  auto y = ops::parameter(ET::f32, {6}, "y");
  m.parameters().push_back(y);
  a->set_input(0, y);  // an edit without re-inference
  EXPECT_TRUE(has(verr(m), "is recorded as f32[4] but its inputs give f32[6]")) << verr(m);
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(verr(m), "ok");
  EXPECT_EQ(sig(r), "f32[6]");
}

TEST(Verifier, Variables) {
  VariableAttrs v{"state", ET::f32, Shape{2}};
  struct G { NodePtr x, sum; };
  auto build = [&]() {
    auto rv = ops::read_value(v, Value(ops::const_f32({0, 0})));
    auto x = ops::parameter(ET::f32, {2}, "x");
    return G{x, ops::add(rv, x)};
  };
  G a = build();
  Model ok({ops::result(a.sum)}, {a.x}, {ops::assign(a.sum, v)});
  EXPECT_EQ(verr(ok), "ok");
  G b = build();
  Model orphan({ops::result(b.sum)}, {b.x}, {ops::assign(b.sum, VariableAttrs{"other", ET::f32, Shape{2}})});
  EXPECT_TRUE(has(verr(orphan), "writes variable 'other' that no ReadValue reads")) << verr(orphan);
  G c = build();
  Model wrong({ops::result(c.sum)}, {c.x}, {c.sum});
  EXPECT_TRUE(has(verr(wrong), "is not an Assign"));
}

TEST(Model, CloneIsDeepAndEquivalent) {
  Symbol T = Symbol::named("T");
  auto x = ops::parameter(ET::f32, {T, 2}, "x");
  auto e = ops::exp(x);
  e->rt_info()["k"] = int64_t{1};
  e->out_names().insert("e_out");
  Model m({ops::result(ops::add(e, ops::const_f32({1, 2})), "out")}, {x}, {}, "orig");
  auto c = m.clone();
  ASSERT_TRUE(c.ok()) << c.error().str();
  EXPECT_EQ(verr(*c), "ok");
  EXPECT_NE(c->parameters()[0], x);
  EXPECT_EQ(c->name(), "orig");
  auto ce = c->results()[0]->input(0).node->input(0).node;
  EXPECT_NE(ce, e);
  EXPECT_EQ(std::get<int64_t>(ce->rt_info().at("k")), 1);
  EXPECT_EQ(ce->out_names().count("e_out"), 1u);
  EXPECT_EQ(ce->out_shape()[0], Dim(T));  // symbols are shared with the original
  auto a = evaluate(m, {Tensor::f32({1, 2}, {0, 1})});
  auto b = evaluate(*c, {Tensor::f32({1, 2}, {0, 1})});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)[0].same_bytes((*b)[0]));
}
