// The reference kernels against hand-computed values: sources, casts, data movement,
// elementwise ops and reductions.
#include <climits>
#include <cmath>

#include "helpers.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using ET = ElementType;
using V = std::vector<float>;
using I = std::vector<int64_t>;

namespace {
NodePtr c23() { return ops::const_f32({0, 1, 2, 3, 4, 5}, std::vector<int64_t>{2, 3}); }  // [[0,1,2],[3,4,5]]
}  // namespace

TEST(Eval, ParametersAndConvert) {
  auto x = ops::parameter(ET::f32, {Dim::dynamic()}, "x");
  auto y = ops::convert(x, ET::i32);
  auto r = eval1(y, {x}, {Tensor::f32({3}, {1.7f, -2.5f, 3.0f})});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r->type(), ET::i32);
  EXPECT_EQ(i64s(*r), (I{1, -2, 3}));  // toward zero
  EXPECT_EQ(f32s(eval0(ops::convert(ops::const_i64({3, -4}), ET::f16))), (V{3, -4}));
  EXPECT_EQ(i64s(eval0(ops::convert(ops::const_i64({0, 7}), ET::boolean))), (I{0, 1}));
  EXPECT_EQ(f32s(eval0(ops::convert(ops::const_f32({1.0f / 3.0f}), ET::bf16)))[0], 0.333984375f);
  auto bad = eval1(y, {x}, {Tensor::i64({1}, {1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("value is i64, the parameter is f32"), std::string::npos);
}

TEST(Eval, ShapeOfRange) {
  auto x = ops::parameter(ET::f32, {Dim::dynamic(), 4}, "x");
  auto r = eval1(ops::shape_of(x), {x}, {Tensor(ET::f32, {5, 4})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(i64s(*r), (I{5, 4}));
  EXPECT_EQ(i64s(eval0(ops::range(ops::scalar_i64(2), ops::scalar_i64(11), ops::scalar_i64(3)))), (I{2, 5, 8}));
  EXPECT_EQ(i64s(eval0(ops::range(ops::scalar_i64(5), ops::scalar_i64(0), ops::scalar_i64(-2)))), (I{5, 3, 1}));
  EXPECT_EQ(f32s(eval0(ops::range(ops::scalar_f32(0), ops::scalar_f32(1), ops::scalar_f32(0.25f), ET::f32))), (V{0, 0.25f, 0.5f, 0.75f}));
}

TEST(Eval, ReshapeSqueezeUnsqueezeTranspose) {
  EXPECT_EQ(eval0(ops::reshape(c23(), {3, -1})).shape(), (I{3, 2}));
  EXPECT_EQ(f32s(eval0(ops::reshape(c23(), {3, -1}))), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(eval0(ops::reshape(c23(), {0, 1, -1}, true)).shape(), (I{2, 1, 3}));
  EXPECT_EQ(eval0(ops::squeeze(ops::reshape(c23(), {1, 2, 1, 3}))).shape(), (I{2, 3}));
  EXPECT_EQ(eval0(ops::unsqueeze(c23(), {1})).shape(), (I{2, 1, 3}));
  // squeeze() keeps a dynamic dim that happens to be 1 at run time, as inference said
  auto d = ops::parameter(ET::f32, {1, Dim::dynamic()}, "d");
  auto sq = eval1(ops::squeeze(d), {d}, {Tensor(ET::f32, {1, 1})});
  ASSERT_TRUE(sq.ok()) << sq.error().str();
  EXPECT_EQ(sq->shape(), (I{1}));
  auto t = eval0(ops::transpose(c23(), {1, 0}));
  EXPECT_EQ(t.shape(), (I{3, 2}));
  EXPECT_EQ(f32s(t), (V{0, 3, 1, 4, 2, 5}));
  auto x = ops::const_f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, std::vector<int64_t>{2, 3, 2});
  EXPECT_EQ(f32s(eval0(ops::transpose(x, {2, 0, 1}))), (V{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}));
}

TEST(Eval, ConcatBroadcastTile) {
  auto a = ops::const_f32({1, 2}, std::vector<int64_t>{2, 1});
  auto b = ops::const_f32({3, 4, 5, 6}, std::vector<int64_t>{2, 2});
  EXPECT_EQ(f32s(eval0(ops::concat({Value(a), Value(b)}, 1))), (V{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(f32s(eval0(ops::concat({Value(b), Value(ops::transpose(a, {1, 0}))}, 0))), (V{3, 4, 5, 6, 1, 2}));
  auto e = ops::broadcast(ops::scalar_f32(0), ops::const_i64({2, 0}));
  EXPECT_EQ(eval0(ops::concat({Value(e), Value(b)}, 1)).shape(), (I{2, 2}));
  auto bc = eval0(ops::broadcast(a, ops::const_i64({2, 3})));
  EXPECT_EQ(f32s(bc), (V{1, 1, 1, 2, 2, 2}));
  auto bb = eval0(ops::broadcast(ops::const_f32({1, 2, 3}), ops::const_i64({2, 1})));  // bidirectional
  EXPECT_EQ(bb.shape(), (I{2, 3}));
  EXPECT_EQ(f32s(eval0(ops::tile(a, {2, 2}))), (V{1, 1, 2, 2, 1, 1, 2, 2}));
}

TEST(Eval, GatherSliceSplitScatter) {
  EXPECT_EQ(f32s(eval0(ops::gather(c23(), ops::const_i64({1, 0, -1}), 0))), (V{3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(f32s(eval0(ops::gather(c23(), ops::const_i32({2, 0}), 1))), (V{2, 0, 5, 3}));
  EXPECT_EQ(f32s(eval0(ops::gather(c23(), ops::scalar_i64(1), 0))), (V{3, 4, 5}));
  // batch_dims 1: row b picks its own columns
  EXPECT_EQ(f32s(eval0(ops::gather(c23(), ops::const_i64({2, 2, 0, 1}, std::vector<int64_t>{2, 2}), 1, 1))), (V{2, 2, 3, 4}));
  auto oob = eval1(ops::gather(c23(), ops::const_i64({2}), 0), {}, {});
  ASSERT_FALSE(oob.ok());
  EXPECT_NE(oob.error().what.find("index 2 is out of range [0, 2)"), std::string::npos);

  EXPECT_EQ(f32s(eval0(ops::slice(c23(), {1}, {INT64_MAX}, {1}, {1}))), (V{1, 2, 4, 5}));
  EXPECT_EQ(f32s(eval0(ops::slice(c23(), {-1}, {INT64_MIN}, {-2}, {1}))), (V{2, 0, 5, 3}));
  EXPECT_EQ(f32s(eval0(ops::slice(c23(), {1, 0}, {2, 2}, {1, 1}, {0, 1}))), (V{3, 4}));

  auto sp = ops::variadic_split(c23(), 1, {1, -1});
  Model m({ops::result(Value(sp, 0)), ops::result(Value(sp, 1))}, {});
  auto r = evaluate(m, std::vector<Tensor>{});
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(f32s((*r)[0]), (V{0, 3}));
  EXPECT_EQ(f32s((*r)[1]), (V{1, 2, 4, 5}));

  auto up = ops::const_f32({9, 9, 9, 7, 7, 7}, std::vector<int64_t>{2, 3});
  EXPECT_EQ(f32s(eval0(ops::scatter_update(c23(), ops::const_i64({1, 0}), up, 0))), (V{7, 7, 7, 9, 9, 9}));
  auto cols = ops::const_f32({8, 9}, std::vector<int64_t>{2, 1});
  EXPECT_EQ(f32s(eval0(ops::scatter_update(c23(), ops::const_i64({2}), cols, 1))), (V{0, 1, 8, 3, 4, 9}));
}

TEST(Eval, Arithmetic) {
  auto col = ops::const_f32({10, 20}, std::vector<int64_t>{2, 1});
  EXPECT_EQ(f32s(eval0(ops::add(c23(), col))), (V{10, 11, 12, 23, 24, 25}));
  EXPECT_EQ(f32s(eval0(ops::subtract(c23(), ops::const_f32({1, 1, 1})))), (V{-1, 0, 1, 2, 3, 4}));
  EXPECT_EQ(f32s(eval0(ops::multiply(c23(), ops::scalar_f32(0.5f)))), (V{0, 0.5f, 1, 1.5f, 2, 2.5f}));
  EXPECT_EQ(f32s(eval0(ops::divide(ops::const_f32({1, 3}), ops::const_f32({4, 2})))), (V{0.25f, 1.5f}));
  EXPECT_EQ(f32s(eval0(ops::power(ops::const_f32({2, 9}), ops::const_f32({3, 0.5f})))), (V{8, 3}));
  EXPECT_EQ(f32s(eval0(ops::maximum(ops::const_f32({2, -9}), ops::const_f32({1, 0})))), (V{2, 0}));
  EXPECT_EQ(i64s(eval0(ops::divide(ops::const_i64({7, -7, 6}), ops::const_i64({2, 2, -4})))), (I{3, -4, -2}));  // floor
  EXPECT_EQ(i64s(eval0(ops::power(ops::const_i64({3}), ops::const_i64({4})))), (I{81}));
  EXPECT_EQ(i64s(eval0(ops::add(ops::const_i32({1, 2}), ops::const_i32({40})))), (I{41, 42}));
  auto z = eval1(ops::divide(ops::const_i64({1}), ops::const_i64({0})), {}, {});
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.error().what.find("division by zero"), std::string::npos);
  auto h = eval0(ops::add(ops::convert(ops::const_f32({1, 2048}), ET::f16), ops::convert(ops::const_f32({0.5f, 1}), ET::f16)));
  EXPECT_EQ(h.type(), ET::f16);
  EXPECT_EQ(f32s(h), (V{1.5f, 2048}));  // 2049 rounds to even in f16
}

TEST(Eval, ComparisonsLogicSelect) {
  auto a = ops::const_i64({1, 2, 3}), b = ops::const_i64({2});
  EXPECT_EQ(i64s(eval0(ops::equal(a, b))), (I{0, 1, 0}));
  EXPECT_EQ(i64s(eval0(ops::less(a, b))), (I{1, 0, 0}));
  EXPECT_EQ(i64s(eval0(ops::less_equal(a, b))), (I{1, 1, 0}));
  EXPECT_EQ(i64s(eval0(ops::greater_equal(a, b))), (I{0, 1, 1}));
  EXPECT_EQ(eval0(ops::less(ops::const_f32({0.5f}), ops::const_f32({1}))).type(), ET::boolean);
  // a causal mask as an outer comparison: pos [3,1] >= key [1,3]
  auto causal = ops::greater_equal(ops::const_i64({0, 1, 2}, std::vector<int64_t>{3, 1}), ops::const_i64({0, 1, 2}, std::vector<int64_t>{1, 3}));
  EXPECT_EQ(i64s(eval0(causal)), (I{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  auto t = ops::constant(Tensor::boolean({2}, {1, 0})), f = ops::constant(Tensor::boolean({2}, {1, 1}));
  EXPECT_EQ(i64s(eval0(ops::logical_and(t, f))), (I{1, 0}));
  auto sel = ops::select(ops::constant(Tensor::boolean({2, 1}, {1, 0})), c23(), ops::scalar_f32(-1));
  EXPECT_EQ(f32s(eval0(sel)), (V{0, 1, 2, -1, -1, -1}));
}

TEST(Eval, UnaryMath) {
  auto x = ops::const_f32({-1, 0, 0.5f, 2});
  auto s = f32s(eval0(ops::sqrt(ops::const_f32({4, 2.25f}))));
  EXPECT_EQ(s, (V{2, 1.5f}));
  auto e = f32s(eval0(ops::exp(x)));
  EXPECT_FLOAT_EQ(e[0], 0.36787944f);
  EXPECT_EQ(e[1], 1.0f);
  EXPECT_FLOAT_EQ(f32s(eval0(ops::tanh(x)))[3], 0.96402758f);
  EXPECT_FLOAT_EQ(f32s(eval0(ops::sin(x)))[2], 0.47942554f);
  EXPECT_FLOAT_EQ(f32s(eval0(ops::cos(x)))[3], -0.41614684f);
  auto sw = f32s(eval0(ops::swish(x)));  // x * sigmoid(x)
  EXPECT_FLOAT_EQ(sw[0], -0.26894142f);
  EXPECT_EQ(sw[1], 0.0f);
  EXPECT_FLOAT_EQ(sw[3], 1.7615942f);
  auto ge = f32s(eval0(ops::gelu(x, GeluMode::erf)));
  EXPECT_FLOAT_EQ(ge[0], -0.15865525f);
  EXPECT_FLOAT_EQ(ge[3], 1.9544997f);
  auto gt = f32s(eval0(ops::gelu(x, GeluMode::tanh)));
  EXPECT_NEAR(gt[0], -0.15880801f, 1e-6);
  EXPECT_NEAR(gt[3], 1.9545977f, 1e-6);
}

TEST(Eval, Reductions) {
  EXPECT_EQ(f32s(eval0(ops::reduce_sum(c23(), {1}))), (V{3, 12}));
  EXPECT_EQ(f32s(eval0(ops::reduce_sum(c23(), {0}))), (V{3, 5, 7}));
  auto m = eval0(ops::reduce_mean(c23(), {-1}, true));
  EXPECT_EQ(m.shape(), (I{2, 1}));
  EXPECT_EQ(f32s(m), (V{1, 4}));
  EXPECT_EQ(f32s(eval0(ops::reduce_prod(ops::const_f32({1, 2, 3, 4}, std::vector<int64_t>{2, 2}), {}))), (V{24}));
  EXPECT_EQ(i64s(eval0(ops::reduce_prod(ops::const_i64({2, 3, 4}), {0}))), (I{24}));
  EXPECT_EQ(i64s(eval0(ops::reduce_sum(ops::const_i32({2, 3, 4}), {0}))), (I{9}));
}
