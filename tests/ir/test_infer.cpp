// Shape and type inference of every op: static, dynamic (symbols kept where provable), errors
// that name the node.
#include <climits>

#include "helpers.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using ET = ElementType;

namespace {
struct Syms {
  Symbol T = Symbol::named("T"), B = Symbol::named("B"), K = Symbol::named("KV");
};
NodePtr f32(Shape s, std::string name = "x") { return ops::parameter(ET::f32, std::move(s), std::move(name)); }
NodePtr i64(Shape s, std::string name = "i") { return ops::parameter(ET::i64, std::move(s), std::move(name)); }
}  // namespace

TEST(Infer, ErrorsNameTheNode) {
  auto n = ops::add(f32({2, 3}), f32({4, 3}));
  n->set_name("bad_add");
  ASSERT_TRUE(n->error());
  EXPECT_NE(n->error()->what.find("'Add_"), std::string::npos);  // named at creation
  EXPECT_FALSE(n->infer().ok());
  EXPECT_NE(err(n).find("node 'bad_add' (Add)"), std::string::npos) << err(n);
  EXPECT_NE(err(n).find("axis 0 has 2 and 4"), std::string::npos) << err(n);
  auto w = make_node(OpType::Add, {f32({2})});
  EXPECT_NE(err(w).find("has 1 inputs, expects 2"), std::string::npos);
}

TEST(Infer, SourcesAndCasts) {
  Syms s;
  EXPECT_EQ(sig(f32({1, s.T, 4})), "f32[1,?T,4]");
  EXPECT_NE(err(ops::parameter(ET::q4_0, {32}, "w")).find("plain element type"), std::string::npos);
  EXPECT_EQ(sig(ops::const_i64({1, 2, 3})), "i64[3]");
  EXPECT_EQ(sig(ops::scalar_f32(1)), "f32[]");
  EXPECT_EQ(sig(ops::result(f32({s.T}))), "f32[?T]");
  EXPECT_EQ(sig(ops::convert(f32({s.T, 2}), ET::f16)), "f16[?T,2]");
  // f32 -> q8_0 (the KV cache's rounding): whole 32-value blocks on the last axis; no other block type
  EXPECT_EQ(sig(ops::convert(f32({s.T, 64}), ET::q8_0)), "q8_0[?T,64]");
  EXPECT_NE(err(ops::convert(f32({2}), ET::q8_0)).find("multiple of 32"), std::string::npos);
  EXPECT_NE(err(ops::convert(f32({32}), ET::q4_0)).find("cannot convert to q4_0"), std::string::npos);
  EXPECT_NE(err(ops::convert(ops::convert(f32({32}), ET::f16), ET::q8_0)).find("cannot convert to q8_0"), std::string::npos);
  EXPECT_EQ(sig(ops::parameter(ET::q8_0, {4, 64}, "key_cache.0")), "q8_0[4,64]");  // a paged q8_0 cache
  EXPECT_NE(err(ops::parameter(ET::q8_0, {4, 48}, "c")).find("plain element type"), std::string::npos);
  EXPECT_EQ(sig(ops::shape_of(f32({s.B, s.T, 4}))), "i64[3]");
  EXPECT_NE(err(ops::shape_of(f32({2}), ET::f32)).find("i64 or i32"), std::string::npos);
}

TEST(Infer, Range) {
  Syms s;
  EXPECT_EQ(sig(ops::range(ops::scalar_i64(2), ops::scalar_i64(11), ops::scalar_i64(3))), "i64[3]");
  EXPECT_EQ(sig(ops::range(ops::scalar_i64(5), ops::scalar_i64(0), ops::scalar_i64(-2))), "i64[3]");
  // range(0, T, 1) has length T: stop comes from ShapeOf
  auto x = f32({s.B, s.T});
  auto t = ops::gather(ops::shape_of(x), ops::scalar_i64(1), 0);
  EXPECT_EQ(sig(t), "i64[]");
  EXPECT_EQ(sig(ops::range(ops::scalar_i64(0), t, ops::scalar_i64(1))), "i64[?T]");
  auto r = ops::range(ops::scalar_i64(1), t, ops::scalar_i64(1));
  EXPECT_TRUE(r->out_shape()[0].is_dynamic());
  EXPECT_FALSE(r->out_shape()[0] == Dim(s.T));
  EXPECT_NE(err(ops::range(ops::const_i64({0, 1}), ops::scalar_i64(3), ops::scalar_i64(1))).find("must be a scalar"), std::string::npos);
  EXPECT_NE(err(ops::range(ops::scalar_i64(0), ops::scalar_i64(3), ops::scalar_i64(0))).find("step is 0"), std::string::npos);
}

TEST(Infer, Variables) {
  Syms s;
  VariableAttrs v{"past_k.0", ET::f32, Shape{1, 3, s.K, 8}};
  EXPECT_EQ(sig(ops::read_value(v)), "f32[1,3,?KV,8]");
  auto init = ops::broadcast(ops::scalar_f32(0), ops::const_i64({1, 3, 0, 8}));
  EXPECT_EQ(sig(ops::read_value(v, Value(init))), "f32[1,3,?KV,8]");
  EXPECT_NE(err(ops::read_value(v, Value(ops::const_i64({0})))).find("init value has type i64"), std::string::npos);
  auto a = ops::assign(f32({1, 3, s.T, 8}), v);
  EXPECT_EQ(a->n_outputs(), 0u);
  EXPECT_FALSE(a->error());
  EXPECT_NE(err(ops::assign(f32({1, 4, s.T, 8}), v)).find("has shape [1,4,?T,8], variable 'past_k.0' is"), std::string::npos);
  EXPECT_NE(err(ops::read_value(VariableAttrs{"", ET::f32, {}})).find("id is empty"), std::string::npos);
}

TEST(Infer, Reshape) {
  Syms s;
  auto x = f32({s.B, s.T, 6});
  EXPECT_EQ(sig(ops::reshape(f32({2, 3, 4}), {6, -1})), "f32[6,4]");
  EXPECT_EQ(sig(ops::reshape(x, {0, 0, 2, 3}, true)), "f32[?B,?T,2,3]");   // special_zero keeps symbols
  EXPECT_EQ(sig(ops::reshape(x, {0, -1, 6}, true)), "f32[?B,?T,6]");       // -1 cancels to T
  auto flat = ops::reshape(x, {-1, 6});
  EXPECT_TRUE(flat->out_shape()[0].is_dynamic());                          // B*T: a fresh symbol
  EXPECT_FALSE(flat->out_shape()[0] == Dim(s.T));
  EXPECT_FALSE(ops::reshape(x, {-1, 6})->out_shape()[0] == flat->out_shape()[0]);  // another node, another count
  Dim before = flat->out_shape()[0];
  ASSERT_TRUE(flat->infer().ok());
  EXPECT_EQ(flat->out_shape()[0], before);  // a node's own symbol is stable across re-inference
  // the DESIGN's AdaptToGenAI reshape: [1,1] + shape(input_ids)
  auto ids = i64({s.B, s.T}, "input_ids");
  auto tgt = ops::concat({Value(ops::const_i64({1, 1})), Value(ops::shape_of(ids))}, 0);
  EXPECT_EQ(sig(ops::reshape(ids, tgt)), "i64[1,1,?B,?T]");
  // dynamic target of unknown values: rank from the target's length
  auto unk = ops::reshape(x, i64({3}, "t"));
  EXPECT_EQ(unk->out_shape().rank(), 3u);
  EXPECT_NE(err(ops::reshape(f32({2, 3}), {4, 2})).find("cannot reshape [2,3] (6 elements) into [4,2]"), std::string::npos);
  EXPECT_NE(err(ops::reshape(f32({2, 3}), {-1, -1})).find("more than one -1"), std::string::npos);
  EXPECT_NE(err(ops::reshape(f32({2, 3}), {5, -1})).find("cannot reshape"), std::string::npos);
  EXPECT_NE(err(ops::reshape(f32({2, 3}), ops::const_f32({6}))).find("must be integer"), std::string::npos);
}

TEST(Infer, SqueezeUnsqueeze) {
  Syms s;
  EXPECT_EQ(sig(ops::squeeze(i64({1, 1, s.T}), {0, 1})), "i64[?T]");
  EXPECT_EQ(sig(ops::squeeze(i64({1, s.T, 1}))), "i64[?T]");
  EXPECT_EQ(sig(ops::squeeze(i64({1, s.T}), {-2})), "i64[?T]");
  EXPECT_NE(err(ops::squeeze(i64({2, 3}), {0})).find("cannot squeeze axis 0 of [2,3]"), std::string::npos);
  EXPECT_NE(err(ops::squeeze(i64({2, 3}), {2})).find("out of range"), std::string::npos);
  EXPECT_EQ(sig(ops::unsqueeze(f32({s.T, 4}), {0})), "f32[1,?T,4]");
  EXPECT_EQ(sig(ops::unsqueeze(f32({s.T, 4}), {1})), "f32[?T,1,4]");
  EXPECT_EQ(sig(ops::unsqueeze(f32({s.T, 4}), {0, -1})), "f32[1,?T,4,1]");
  EXPECT_NE(err(ops::unsqueeze(f32({2}), {})).find("at least one axis"), std::string::npos);
  EXPECT_NE(err(ops::unsqueeze(f32({2}), {0, 0})).find("repeats axis"), std::string::npos);
}

TEST(Infer, TransposeConcatBroadcastTile) {
  Syms s;
  EXPECT_EQ(sig(ops::transpose(f32({s.B, s.T, 3, 8}), {0, 2, 1, 3})), "f32[?B,3,?T,8]");
  EXPECT_EQ(sig(ops::transpose(f32({2, 3}), {})), "f32[3,2]");
  EXPECT_NE(err(ops::transpose(f32({2, 3}), {0})).find("perm [0]"), std::string::npos);
  EXPECT_NE(err(ops::transpose(f32({2, 3}), {0, 0})).find("repeats"), std::string::npos);
  EXPECT_EQ(sig(ops::concat({Value(f32({2, 3})), Value(f32({4, 3}))}, 0)), "f32[6,3]");
  EXPECT_EQ(sig(ops::concat({Value(f32({1, 3, 0, 8})), Value(f32({1, 3, s.T, 8}))}, 2)), "f32[1,3,?T,8]");
  auto kv = ops::concat({Value(f32({1, 3, s.K, 8})), Value(f32({1, 3, s.T, 8}))}, -2);
  EXPECT_TRUE(kv->out_shape()[2].is_dynamic());
  EXPECT_FALSE(kv->out_shape()[2] == Dim(s.T));
  EXPECT_NE(err(ops::concat({Value(f32({2, 3})), Value(f32({2, 4}))}, 0)).find("does not match"), std::string::npos);
  EXPECT_NE(err(ops::concat({Value(f32({2, 3})), Value(i64({2, 3}))}, 0)).find("input 1 is i64"), std::string::npos);
  EXPECT_NE(err(ops::concat({Value(f32({2, 3})), Value(f32({2}))}, 0)).find("ranks"), std::string::npos);
  EXPECT_EQ(sig(ops::broadcast(ops::scalar_f32(0), ops::const_i64({2, 3}))), "f32[2,3]");
  auto x = f32({s.T, 1});
  EXPECT_EQ(sig(ops::broadcast(x, ops::concat({Value(ops::shape_of(x)), Value(ops::const_i64({4}))}, 0))), "f32[?T,?T,4]");
  EXPECT_NE(err(ops::broadcast(f32({3}), ops::const_i64({2}))).find("cannot broadcast"), std::string::npos);
  EXPECT_EQ(sig(ops::tile(f32({s.T, 2}), {1, 3})), "f32[?T,6]");
  EXPECT_TRUE(ops::tile(f32({s.T, 2}), {2, 1})->out_shape()[0].is_dynamic());
  EXPECT_NE(err(ops::tile(f32({2}), {1, 2})).find("repeats [1,2] do not match"), std::string::npos);
}

TEST(Infer, GatherSliceSplitScatter) {
  Syms s;
  auto table = f32({100, 8}, "table");
  auto ids = i64({s.T}, "ids");
  EXPECT_EQ(sig(ops::gather(table, ids, 0)), "f32[?T,8]");
  EXPECT_EQ(sig(ops::gather(table, ops::scalar_i64(3), 0)), "f32[8]");
  EXPECT_EQ(sig(ops::gather(f32({s.B, 10, 4}), i64({s.B, 3}), 1, 1)), "f32[?B,3,4]");
  EXPECT_EQ(sig(ops::gather(f32({2, 3, 4}), i64({5}), -1)), "f32[2,3,5]");
  EXPECT_NE(err(ops::gather(table, ops::const_f32({1}), 0)).find("indices must be integer"), std::string::npos);
  EXPECT_NE(err(ops::gather(table, ids, 2)).find("out of range"), std::string::npos);
  EXPECT_NE(err(ops::gather(f32({2, 10}), i64({3, 1}), 1, 1)).find("batch dim 0 differs"), std::string::npos);
  auto q = ops::constant(Tensor(ET::q8_0, {4, 32}));
  EXPECT_EQ(sig(ops::gather(q, ids, 0)), "f32[?T,32]");
  EXPECT_NE(err(ops::gather(q, ids, 1)).find("gathers rows only"), std::string::npos);

  EXPECT_EQ(sig(ops::slice(f32({10, 8}), {2}, {INT64_MAX}, {3}, {0})), "f32[3,8]");
  EXPECT_EQ(sig(ops::slice(f32({10, 8}), {-1}, {-11}, {-1}, {0})), "f32[10,8]");
  EXPECT_EQ(sig(ops::slice(f32({10, 8}), {1, 0}, {4, 4}, {1, 2}, {})), "f32[3,2]");
  EXPECT_EQ(sig(ops::slice(f32({s.T, 8}), {0}, {INT64_MAX}, {1}, {0})), "f32[?T,8]");
  EXPECT_EQ(sig(ops::slice(f32({s.T, 8}), {0}, {4}, {1}, {1})), "f32[?T,4]");
  EXPECT_FALSE(ops::slice(f32({s.T, 8}), {1}, {INT64_MAX}, {1}, {0})->out_shape()[0] == Dim(s.T));
  EXPECT_NE(err(ops::slice(f32({4}), {0}, {4}, {0}, {0})).find("step is 0"), std::string::npos);
  EXPECT_NE(err(ops::slice(f32({4}), {0}, {4, 1}, {1}, {0})).find("same length"), std::string::npos);

  auto sp = ops::variadic_split(f32({s.T, 10}), 1, {2, -1, 3});
  ASSERT_EQ(sp->n_outputs(), 3u);
  EXPECT_EQ(sig(sp, 0), "f32[?T,2]");
  EXPECT_EQ(sig(sp, 1), "f32[?T,5]");
  EXPECT_EQ(sig(sp, 2), "f32[?T,3]");
  EXPECT_EQ(sig(ops::variadic_split(f32({s.T, 4}), 0, {-1}), 0), "f32[?T,4]");
  EXPECT_NE(err(ops::variadic_split(f32({4, 10}), 1, {2, 3})).find("do not add up to 10"), std::string::npos);
  EXPECT_NE(err(ops::variadic_split(f32({4, 10}), 1, {-1, -1})).find("more than one -1"), std::string::npos);

  EXPECT_EQ(sig(ops::scatter_update(f32({8, 4}), i64({2}), f32({2, 4}), 0)), "f32[8,4]");
  EXPECT_EQ(sig(ops::scatter_update(f32({s.K, 4}), i64({s.T}), f32({s.T, 4}), 0)), "f32[?KV,4]");
  EXPECT_NE(err(ops::scatter_update(f32({8, 4}), i64({2}), f32({3, 4}), 0)).find("must have shape [2,4]"), std::string::npos);
}

TEST(Infer, Elementwise) {
  Syms s;
  EXPECT_EQ(sig(ops::add(f32({s.T, 4}), f32({1, 4}))), "f32[?T,4]");
  EXPECT_EQ(sig(ops::multiply(f32({s.T, 4}), f32({4}))), "f32[?T,4]");
  EXPECT_EQ(sig(ops::subtract(f32({2, 1}), f32({1, 3}))), "f32[2,3]");
  EXPECT_EQ(sig(ops::divide(f32({s.T, 1}), f32({s.T, 1}))), "f32[?T,1]");
  EXPECT_EQ(sig(ops::power(f32({3}), ops::scalar_f32(2))), "f32[3]");
  EXPECT_EQ(sig(ops::maximum(i64({3}), i64({1}))), "i64[3]");
  auto two = ops::add(f32({s.T}), f32({s.K}));  // T or KV may be 1: a fresh dim
  EXPECT_TRUE(two->out_shape()[0].is_dynamic());
  EXPECT_FALSE(two->out_shape()[0] == Dim(s.T));
  EXPECT_EQ(sig(ops::equal(i64({s.T}), i64({1}))), "boolean[?T]");
  EXPECT_EQ(sig(ops::less(f32({2, 1}), f32({2}))), "boolean[2,2]");
  EXPECT_EQ(sig(ops::less_equal(i64({s.T, 1}), i64({1, s.K}))), "boolean[?T,?KV]");
  EXPECT_EQ(sig(ops::greater_equal(f32({3}), f32({3}))), "boolean[3]");
  auto b = ops::parameter(ET::boolean, {s.T, 1}, "b");
  EXPECT_EQ(sig(ops::logical_and(b, ops::parameter(ET::boolean, {1, 5}, "c"))), "boolean[?T,5]");
  EXPECT_EQ(sig(ops::select(b, f32({1, 4}), ops::scalar_f32(0))), "f32[?T,4]");
  for (auto n : {ops::sqrt(f32({s.T})), ops::exp(f32({s.T})), ops::tanh(f32({s.T})), ops::sin(f32({s.T})),
                 ops::cos(f32({s.T})), ops::swish(f32({s.T})), ops::gelu(f32({s.T}), GeluMode::tanh)})
    EXPECT_EQ(sig(n), "f32[?T]") << n->type_name();
  EXPECT_NE(err(ops::add(f32({2}), i64({2}))).find("operand types differ: f32 and i64"), std::string::npos);
  EXPECT_NE(err(ops::logical_and(f32({2}), f32({2}))).find("must be boolean"), std::string::npos);
  EXPECT_NE(err(ops::add(b, b)).find("arithmetic on boolean"), std::string::npos);
  EXPECT_NE(err(ops::select(f32({2}), f32({2}), f32({2}))).find("condition must be boolean"), std::string::npos);
  EXPECT_NE(err(ops::exp(i64({2}))).find("must be f32, f16 or bf16"), std::string::npos);
}

TEST(Infer, ReductionsAndNorms) {
  Syms s;
  EXPECT_EQ(sig(ops::reduce_sum(f32({s.T, 4, 5}), {1})), "f32[?T,5]");
  EXPECT_EQ(sig(ops::reduce_mean(f32({s.T, 4}), {-1}, true)), "f32[?T,1]");
  EXPECT_EQ(sig(ops::reduce_prod(i64({3, 4}), {})), "i64[]");
  EXPECT_NE(err(ops::reduce_sum(f32({2}), {1})).find("out of range"), std::string::npos);
  EXPECT_EQ(sig(ops::softmax(f32({s.T, 7}), -1)), "f32[?T,7]");
  EXPECT_NE(err(ops::softmax(f32({2}), 1)).find("softmax axis 1"), std::string::npos);
  EXPECT_EQ(sig(ops::rms_norm(f32({1, s.T, 8}), Value(f32({8}, "g")), 1e-5f)), "f32[1,?T,8]");
  EXPECT_EQ(sig(ops::rms_norm(f32({1, s.T, 8}), std::nullopt, 1e-5f)), "f32[1,?T,8]");
  EXPECT_NE(err(ops::rms_norm(f32({1, s.T, 8}), Value(f32({4}, "g")), 1e-5f)).find("gamma [4] must be [H]"), std::string::npos);
}

TEST(Infer, MatMul) {
  Syms s;
  EXPECT_EQ(sig(ops::matmul(f32({s.T, 4}), f32({4, 6}))), "f32[?T,6]");
  EXPECT_EQ(sig(ops::matmul(f32({1, s.T, 4}), f32({6, 4}), false, true)), "f32[1,?T,6]");
  EXPECT_EQ(sig(ops::matmul(f32({4, s.T}), f32({4, 6}), true, false)), "f32[?T,6]");
  EXPECT_EQ(sig(ops::matmul(f32({3, 1, 2, 4}), f32({5, 4, 6}))), "f32[3,5,2,6]");
  auto w = ops::constant(Tensor(ET::q4_0, {6, 32}));
  EXPECT_EQ(sig(ops::matmul(f32({1, s.T, 32}), w, false, true)), "f32[1,?T,6]");
  EXPECT_NE(err(ops::matmul(f32({1, s.T, 32}), w)).find("must be used with transpose_b"), std::string::npos);
  EXPECT_NE(err(ops::matmul(f32({2, 4}), f32({5, 6}))).find("inner dims differ"), std::string::npos);
  EXPECT_NE(err(ops::matmul(f32({4}), f32({4, 6}))).find("rank >= 2"), std::string::npos);
  EXPECT_NE(err(ops::matmul(i64({2, 4}), f32({4, 6}))).find("input a must be"), std::string::npos);
}

TEST(Infer, RopeAndAttention) {
  Syms s;
  RopeAttrs ra{RopeMode::neox, 8, 10000.0f, 1.0f, 1.0f};
  auto pos = ops::parameter(ET::i32, {s.T}, "pos");
  EXPECT_EQ(sig(ops::rope(f32({1, s.T, 3, 8}), pos, ra)), "f32[1,?T,3,8]");
  EXPECT_EQ(sig(ops::rope(f32({s.T, 1, 3, 8}), ops::parameter(ET::i32, {s.T, 1}, "p2"), ra)), "f32[?T,1,3,8]");
  EXPECT_NE(err(ops::rope(f32({1, 4, 3, 8}), ops::parameter(ET::i32, {5}, "p3"), ra)).find("do not broadcast"), std::string::npos);
  EXPECT_EQ(sig(ops::rope(f32({1, s.T, 3, 8}), ops::parameter(ET::i32, {5}, "p4"), ra)), "f32[1,?T,3,8]");  // T may be 5
  EXPECT_NE(err(ops::rope(f32({s.T, 8}), pos, ra)).find("[..., T, H, S]"), std::string::npos);
  RopeAttrs big = ra;
  big.n_dims = 10;
  EXPECT_NE(err(ops::rope(f32({1, s.T, 3, 8}), pos, big)).find("exceeds head size"), std::string::npos);
  EXPECT_NE(err(ops::rope(f32({1, s.T, 3, 8}), f32({s.T}, "fp"), ra)).find("positions must be integer"), std::string::npos);

  auto q = f32({1, 6, s.T, 8}, "q"), k = f32({1, 2, s.K, 8}, "k"), v = f32({1, 2, s.K, 4}, "v");
  EXPECT_EQ(sig(ops::sdpa(q, k, v, std::nullopt, true)), "f32[1,6,?T,4]");
  EXPECT_EQ(sig(ops::sdpa(q, k, v, Value(f32({1, 1, s.T, s.K}, "m")), false)), "f32[1,6,?T,4]");
  EXPECT_NE(err(ops::sdpa(q, f32({1, 4, s.K, 8}, "k4"), f32({1, 4, s.K, 4}, "v4"), std::nullopt, true)).find("not a multiple"), std::string::npos);
  EXPECT_NE(err(ops::sdpa(q, f32({1, 2, 6, 8}, "k6"), f32({1, 2, 7, 4}, "v7"), std::nullopt, true)).find("k and v lengths differ"), std::string::npos);
  auto qs = f32({1, 6, 5, 8}, "qs"), ks = f32({1, 2, 9, 8}, "ks"), vs = f32({1, 2, 9, 4}, "vs");
  EXPECT_NE(err(ops::sdpa(qs, ks, vs, Value(f32({1, 1, 5, 3}, "mm")), false)).find("does not broadcast to the scores"), std::string::npos);
  EXPECT_EQ(sig(ops::sdpa(qs, ks, vs, Value(f32({5, 9}, "m2")), false)), "f32[1,6,5,4]");
  EXPECT_NE(err(ops::sdpa(q, f32({1, 2, s.K, 4}, "k2"), v, std::nullopt, false)).find("head sizes differ"), std::string::npos);
}

TEST(Infer, DynamicRankInputs) {
  auto x = ops::parameter(ET::f32, Shape::dynamic_rank(), "x");
  EXPECT_EQ(sig(x), "f32[...]");
  EXPECT_EQ(sig(ops::add(x, f32({2}))), "f32[...]");
  EXPECT_EQ(sig(ops::exp(x)), "f32[...]");
  auto r = ops::reshape(x, {2, -1});
  EXPECT_EQ(sig(r), "f32[2,?" + r->out_shape()[1].symbol().name() + "]");
  EXPECT_EQ(sig(ops::transpose(x, {1, 0})), "f32[...]");
  EXPECT_EQ(sig(ops::gather(x, i64({3}), 0)), "f32[...]");
  EXPECT_EQ(sig(ops::matmul(x, f32({4, 5}))), "f32[...]");
  EXPECT_EQ(ops::shape_of(x)->out_shape().rank(), 1u);
  EXPECT_TRUE(ops::shape_of(x)->out_shape()[0].is_dynamic());
  EXPECT_EQ(sig(ops::concat({Value(x), Value(f32({2, 3}))}, 0)), "f32[...]");
}
