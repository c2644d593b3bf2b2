// The reference kernels of the neural-network ops against hand-computed values: Softmax,
// RMSNorm, MatMul (plain, batched, block weights), RoPE (normal and NeoX), SDPA (causal, mask,
// GQA, logit soft-capping), and Variables (ReadValue/Assign through a StateStore).
#include <cmath>
#include <cstring>

#include "gguf/dequant.h"
#include "helpers.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using ET = ElementType;
using V = std::vector<float>;
using I = std::vector<int64_t>;

TEST(EvalNN, Softmax) {
  auto y = f32s(eval0(ops::softmax(ops::const_f32({0, std::log(3.0f), 1, 1}, std::vector<int64_t>{2, 2}), -1)));
  EXPECT_FLOAT_EQ(y[0], 0.25f);
  EXPECT_FLOAT_EQ(y[1], 0.75f);
  EXPECT_EQ(y[2], 0.5f);
  auto c = f32s(eval0(ops::softmax(ops::const_f32({0, 1, 0, 1}, std::vector<int64_t>{2, 2}), 0)));
  EXPECT_EQ(c, (V{0.5f, 0.5f, 0.5f, 0.5f}));
  auto inf = f32s(eval0(ops::softmax(ops::const_f32({-INFINITY, 0}), 0)));
  EXPECT_EQ(inf, (V{0, 1}));
}

TEST(EvalNN, RMSNorm) {
  // mean(x^2) of [3, 4] = 12.5; 1/sqrt(12.5 + 0) = 0.28284273
  auto y = f32s(eval0(ops::rms_norm(ops::const_f32({3, 4, 1, 1}, std::vector<int64_t>{2, 2}), std::nullopt, 0.0f)));
  EXPECT_FLOAT_EQ(y[0], 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(y[1], 4.0f / std::sqrt(12.5f));
  EXPECT_EQ(y[2], 1.0f);
  auto g = f32s(eval0(ops::rms_norm(ops::const_f32({2, 2}), Value(ops::const_f32({1, -3})), 0.0f)));
  EXPECT_EQ(g, (V{1, -3}));
}

TEST(EvalNN, MatMulPlainTransposedBatched) {
  auto a = ops::const_f32({1, 2, 3, 4, 5, 6}, std::vector<int64_t>{2, 3});
  auto b = ops::const_f32({1, 0, 0, 1, 1, 1}, std::vector<int64_t>{3, 2});
  EXPECT_EQ(f32s(eval0(ops::matmul(a, b))), (V{4, 5, 10, 11}));
  EXPECT_EQ(f32s(eval0(ops::matmul(a, a, false, true))), (V{14, 32, 32, 77}));
  EXPECT_EQ(f32s(eval0(ops::matmul(a, a, true, false))), (V{17, 22, 27, 22, 29, 36, 27, 36, 45}));
  auto ab = ops::const_f32({1, 2, 3, 4}, std::vector<int64_t>{2, 1, 2});  // two batches of [1,2]
  auto r = eval0(ops::matmul(ab, ops::const_f32({1, 1, 0, 1}, std::vector<int64_t>{2, 2})));
  EXPECT_EQ(r.shape(), (I{2, 1, 2}));
  EXPECT_EQ(f32s(r), (V{1, 3, 3, 7}));
  auto h = eval0(ops::matmul(ops::convert(a, ET::f16), ops::convert(b, ET::f16)));
  EXPECT_EQ(h.type(), ET::f16);
  EXPECT_EQ(f32s(h), (V{4, 5, 10, 11}));
}

namespace {
// One Q8_0 block: f16 scale d, then 32 int8 q; value = d * q.
std::vector<uint8_t> q8_0_block(float d, const std::vector<int8_t>& q) {
  std::vector<uint8_t> b(34);
  uint16_t h = ggflow::gguf::f32_to_f16(d);
  std::memcpy(b.data(), &h, 2);
  std::memcpy(b.data() + 2, q.data(), 32);
  return b;
}
// One Q4_0 block: f16 d, 16 bytes; element j < 16 is the low nibble of byte j, element j + 16
// the high nibble; value = d * (nibble - 8).
std::vector<uint8_t> q4_0_block(float d, const std::vector<int>& v) {
  std::vector<uint8_t> b(18);
  uint16_t h = ggflow::gguf::f32_to_f16(d);
  std::memcpy(b.data(), &h, 2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>((v[j] + 8) | ((v[j + 16] + 8) << 4));
  return b;
}
}  // namespace

TEST(EvalNN, MatMulBlockWeightsRowsIndependent) {
  // W [2, 32] in q8_0: row 0 = 0.5 * (k - 16), row 1 = 0.25 * (k % 3)
  std::vector<int8_t> q0(32), q1(32);
  for (int k = 0; k < 32; ++k) { q0[k] = static_cast<int8_t>(k - 16); q1[k] = static_cast<int8_t>(k % 3); }
  auto bytes = std::make_shared<std::vector<uint8_t>>(q8_0_block(0.5f, q0));
  auto r1 = q8_0_block(0.25f, q1);
  bytes->insert(bytes->end(), r1.begin(), r1.end());
  auto w = Tensor::view(ET::q8_0, {2, 32}, bytes, {bytes->data(), bytes->size()});
  ASSERT_TRUE(w.ok()) << w.error().str();
  auto wc = ops::constant(*w, "w");
  EXPECT_EQ(wc->attrs<ConstantAttrs>().value.bytes(), bytes->data());  // zero-copy
  std::vector<float> x(3 * 32);
  for (int m = 0; m < 3; ++m)
    for (int k = 0; k < 32; ++k) x[m * 32 + k] = m == 0 ? 1.0f : m == 1 ? (k < 16 ? 1.0f : 0.0f) : 0.5f * k;
  auto xp = ops::parameter(ET::f32, {1, Dim::dynamic(), 32}, "x");
  auto y = ops::matmul(xp, wc, false, true);
  auto r = eval1(y, {xp}, {Tensor::f32({1, 3, 32}, x)});
  ASSERT_TRUE(r.ok()) << r.error().str();
  // row 0: sum 0.5(k-16) = -8; sum 0.25(k%3) = 0.25*(11*0 + 11*1 + 10*2)=7.75
  // row 1 (k<16): 0.5*sum(k-16, k<16) = -68; 0.25*(6*0+5*1+5*2)=3.75
  // row 2 (0.5k): 0.25*sum k(k-16) = 0.25*(10416-7936)=620; 0.125*sum k*(k%3)= 0.125*(176 + 2*155) = 60.75
  EXPECT_EQ(f32s(*r), (V{-8, 7.75f, -68, 3.75f, 620, 60.75f}));
  // a row's result does not depend on the rows batched with it
  auto one = eval1(y, {xp}, {Tensor::f32({1, 1, 32}, std::vector<float>(x.begin() + 64, x.end()))});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(std::memcmp(one->bytes(), r->bytes() + 4 * 4, 8), 0);
}

TEST(EvalNN, MatMulAndGatherQ4_0) {
  std::vector<int> v(32);
  for (int k = 0; k < 32; ++k) v[k] = (k % 16) - 8;  // nibble values -8..7
  auto bytes = std::make_shared<std::vector<uint8_t>>(q4_0_block(2.0f, v));
  auto w = Tensor::view(ET::q4_0, {1, 32}, bytes, {bytes->data(), bytes->size()});
  ASSERT_TRUE(w.ok());
  auto wc = ops::constant(*w);
  auto ones = ops::const_f32(std::vector<float>(32, 1.0f), std::vector<int64_t>{1, 32});
  EXPECT_EQ(f32s(eval0(ops::matmul(ones, wc, false, true))), (V{-32}));  // 2 * 2 * sum(-8..7)
  auto row = eval0(ops::gather(wc, ops::const_i64({0, 0}), 0));
  EXPECT_EQ(row.type(), ET::f32);
  EXPECT_EQ(row.shape(), (I{2, 32}));
  EXPECT_EQ(f32s(row)[0], -16.0f);
  EXPECT_EQ(f32s(row)[17], -14.0f);
  EXPECT_EQ(f32s(eval0(ops::convert(wc, ET::f32)))[31], 14.0f);
}

TEST(EvalNN, RopeNormalAndNeox) {
  // x [T=2, H=1, S=4] all ones, positions [0, 1], base 100, n_dims 4:
  // theta_i = p * 100^(-2i/4): i=0 -> p, i=1 -> p/10
  auto x = ops::const_f32({1, 2, 3, 4, 1, 2, 3, 4}, std::vector<int64_t>{2, 1, 4});
  auto pos = ops::const_i32({0, 1});
  RopeAttrs a{RopeMode::normal, 4, 100.0f, 1.0f, 1.0f};
  auto n = f32s(eval0(ops::rope(x, pos, a)));
  EXPECT_EQ((V{n[0], n[1], n[2], n[3]}), (V{1, 2, 3, 4}));  // position 0: identity
  float c1 = std::cos(1.0f), s1 = std::sin(1.0f), c2 = std::cos(0.1f), s2 = std::sin(0.1f);
  EXPECT_FLOAT_EQ(n[4], 1 * c1 - 2 * s1);
  EXPECT_FLOAT_EQ(n[5], 1 * s1 + 2 * c1);
  EXPECT_FLOAT_EQ(n[6], 3 * c2 - 4 * s2);
  EXPECT_FLOAT_EQ(n[7], 3 * s2 + 4 * c2);
  a.mode = RopeMode::neox;  // pairs (0, 2) and (1, 3)
  auto x4 = f32s(eval0(ops::rope(x, pos, a)));
  EXPECT_FLOAT_EQ(x4[4], 1 * c1 - 3 * s1);
  EXPECT_FLOAT_EQ(x4[6], 1 * s1 + 3 * c1);
  EXPECT_FLOAT_EQ(x4[5], 2 * c2 - 4 * s2);
  EXPECT_FLOAT_EQ(x4[7], 2 * s2 + 4 * c2);
  // n_dims 2 rotates only the first pair; freq_scale 0.5 halves the angle; freq_factors divide it;
  // attn_factor scales cos and sin
  RopeAttrs p{RopeMode::normal, 2, 100.0f, 0.5f, 2.0f};
  auto pp = f32s(eval0(ops::rope(x, pos, p, Value(ops::const_f32({0.25f})))));
  float c = std::cos(0.5f * (1.0f / 0.25f)), s = std::sin(0.5f * (1.0f / 0.25f));
  EXPECT_FLOAT_EQ(pp[4], 2 * (1 * c - 2 * s));
  EXPECT_FLOAT_EQ(pp[5], 2 * (1 * s + 2 * c));
  EXPECT_EQ(pp[6], 3.0f);
  EXPECT_EQ(pp[7], 4.0f);
}

TEST(EvalNN, SdpaCausalMaskGqa) {
  // one head, Tq = Tk = 2, S = 1: q = [1, 1], k = [0, ln 3] (scale 1), v = [10, 20]
  auto q = ops::const_f32({1, 1}, std::vector<int64_t>{1, 1, 2, 1});
  auto k = ops::const_f32({0, std::log(3.0f)}, std::vector<int64_t>{1, 1, 2, 1});
  auto v = ops::const_f32({10, 20}, std::vector<int64_t>{1, 1, 2, 1});
  auto causal = f32s(eval0(ops::sdpa(q, k, v, std::nullopt, true, 1.0f)));
  EXPECT_EQ(causal[0], 10.0f);              // sees key 0 only
  EXPECT_FLOAT_EQ(causal[1], 17.5f);        // weights 1/4, 3/4
  auto full = f32s(eval0(ops::sdpa(q, k, v, std::nullopt, false, 1.0f)));
  EXPECT_FLOAT_EQ(full[0], 17.5f);
  auto mask = ops::const_f32({0, -INFINITY, 0, 0}, std::vector<int64_t>{2, 2});  // additive
  EXPECT_EQ(f32s(eval0(ops::sdpa(q, k, v, Value(mask), false, 1.0f))), causal);
  auto bmask = ops::constant(Tensor::boolean({2, 2}, {1, 0, 1, 1}));
  EXPECT_EQ(f32s(eval0(ops::sdpa(q, k, v, Value(bmask), false, 1.0f))), causal);
  // decode: Tq = 1 against Tk = 2 with causal sees both keys
  auto q1 = ops::const_f32({1}, std::vector<int64_t>{1, 1, 1, 1});
  EXPECT_FLOAT_EQ(f32s(eval0(ops::sdpa(q1, k, v, std::nullopt, true, 1.0f)))[0], 17.5f);
  // default scale 1/sqrt(S): S = 4, q.k = 2 ln 3 * ... use q = [ln 3 * 2 /4 ...]: check through S=4
  // GQA: 2 query heads share 1 kv head -> both heads equal
  auto q2 = ops::const_f32({1, 1, 1, 1}, std::vector<int64_t>{1, 2, 2, 1});
  auto g = f32s(eval0(ops::sdpa(q2, k, v, std::nullopt, true, 1.0f)));
  EXPECT_EQ(g, (V{10, 17.5f, 10, 17.5f}));
  auto q4 = ops::const_f32({1, 1, 1, 1}, std::vector<int64_t>{1, 1, 1, 4});
  auto k4 = ops::const_f32({0, 0, 0, 0, 1, 1, 1, 1}, std::vector<int64_t>{1, 1, 2, 4});
  auto d = f32s(eval0(ops::sdpa(q4, k4, v, std::nullopt, false)));  // scores 0 and 4/2 = 2
  EXPECT_FLOAT_EQ(d[0], (10.0f + 20.0f * std::exp(2.0f)) / (1.0f + std::exp(2.0f)));
}

// Gemma 2's logit soft-cap c: score = c * tanh(q.k * scale / c), THEN the additive mask (ggml's
// order). One head, S = 1, q = 2, keys {0, 3, -5, 1} (scale 1: raw scores 0, 6, -10, 2), c = 2,
// mask {0, 0, 1.5, -inf}: capped scores {0, 2 tanh 3, 2 tanh(-5) + 1.5}, key 3 unseen.
TEST(EvalNN, SdpaLogitSoftcap) {
  auto q = ops::const_f32({2}, std::vector<int64_t>{1, 1, 1, 1});
  auto k = ops::const_f32({0, 3, -5, 1}, std::vector<int64_t>{1, 1, 4, 1});
  auto v = ops::const_f32({10, 20, 40, 1000}, std::vector<int64_t>{1, 1, 4, 1});
  auto mask = ops::const_f32({0, 0, 1.5f, -INFINITY}, std::vector<int64_t>{1, 1, 1, 4});
  auto node = ops::sdpa(q, k, v, Value(mask), false, 1.0f, 2.0f);
  ASSERT_FALSE(node->error()) << node->error()->str();
  EXPECT_EQ(node->attrs<SdpaAttrs>().logit_softcap, 2.0f);
  const double s[3] = {0.0, 2.0 * std::tanh(3.0), 2.0 * std::tanh(-5.0) + 1.5}, vs[3] = {10, 20, 40};
  double num = 0, den = 0;
  for (int j = 0; j < 3; ++j) num += std::exp(s[j]) * vs[j], den += std::exp(s[j]);
  const float got = f32s(eval0(node))[0];
  EXPECT_NEAR(got, num / den, 1e-5 * (num / den)) << "c * tanh(q.k * scale / c) + mask";
  // the mask added before the cap would give a different value
  const double before = 2.0 * std::tanh((-10.0 + 1.5) / 2.0);
  EXPECT_GT(std::fabs(got - (num - std::exp(s[2]) * 40 + std::exp(before) * 40) / (den - std::exp(s[2]) + std::exp(before))), 1e-2);
  // scale folds into the tanh's argument: scale 0.5, c = 2 -> 2 tanh(q.k / 4)
  auto half = f32s(eval0(ops::sdpa(q, k, v, std::nullopt, false, 0.5f, 2.0f)));
  double n2 = 0, d2 = 0;
  const double raw[4] = {0, 6, -10, 2}, v4[4] = {10, 20, 40, 1000};
  for (int j = 0; j < 4; ++j) n2 += std::exp(2.0 * std::tanh(raw[j] * 0.5 / 2.0)) * v4[j], d2 += std::exp(2.0 * std::tanh(raw[j] * 0.5 / 2.0));
  EXPECT_NEAR(half[0], n2 / d2, 1e-5 * (n2 / d2));
  // softcap 0 is the uncapped op, bit for bit
  auto off = eval0(ops::sdpa(q, k, v, Value(mask), false, 1.0f, 0.0f));
  auto plain = eval0(ops::sdpa(q, k, v, Value(mask), false, 1.0f));
  EXPECT_EQ(std::memcmp(off.bytes(), plain.bytes(), plain.nbytes()), 0);
  // a non-finite cap is refused by the shape rule, with a hint
  auto bad = ops::sdpa(q, k, v, std::nullopt, false, 1.0f, INFINITY);
  ASSERT_TRUE(bad->error());
  EXPECT_NE(bad->error()->what.find("logit_softcap"), std::string::npos) << bad->error()->what;
  EXPECT_FALSE(bad->error()->hint.empty());
}

TEST(EvalNN, VariablesThroughStateStore) {
  // a KV-cache-like variable: cache = concat(read_value(cache), x); assign(cache)
  VariableAttrs var{"cache", ET::f32, Shape{Dim::dynamic(), 2}};
  auto init = ops::broadcast(ops::scalar_f32(0), ops::const_i64({0, 2}));
  auto rv = ops::read_value(var, Value(init));
  auto x = ops::parameter(ET::f32, {Dim::dynamic(), 2}, "x");
  auto cat = ops::concat({Value(rv), Value(x)}, 0);
  auto as = ops::assign(cat, var);
  Model m({ops::result(ops::reduce_sum(cat, {0}))}, {x}, {as});
  StateStore st;
  auto r1 = evaluate(m, {Tensor::f32({1, 2}, {1, 2})}, &st);
  ASSERT_TRUE(r1.ok()) << r1.error().str();
  EXPECT_EQ(f32s((*r1)[0]), (V{1, 2}));
  auto r2 = evaluate(m, {Tensor::f32({2, 2}, {10, 20, 30, 40})}, &st);
  ASSERT_TRUE(r2.ok()) << r2.error().str();
  EXPECT_EQ(f32s((*r2)[0]), (V{41, 62}));
  EXPECT_EQ(st.values.at("cache").shape(), (I{3, 2}));
  // without init and without state: an error that says how to fix it
  auto rv2 = ops::read_value(VariableAttrs{"v", ET::f32, Shape{2}});
  Model m2({ops::result(rv2)}, {});
  auto bad = evaluate(m2, std::vector<Tensor>{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("variable 'v' has no value"), std::string::npos);
}

TEST(EvalNN, SymbolsAreCheckedAtRunTime) {
  Symbol T = Symbol::named("T");
  auto a = ops::parameter(ET::f32, {T, 2}, "a");
  auto b = ops::parameter(ET::f32, {T, 2}, "b");
  Model m({ops::result(ops::add(a, b))}, {a, b});
  std::vector<std::string> seen;
  EvalOptions trace;
  trace.on_node = [&](const Node& n, const std::vector<Tensor>& out) {
    seen.push_back(n.name() + ":" + std::to_string(out.empty() ? -1 : out[0].numel()));
  };
  auto ok = evaluate(m, {Tensor(ET::f32, {3, 2}), Tensor(ET::f32, {3, 2})}, nullptr, trace);
  EXPECT_TRUE(ok.ok());
  ASSERT_EQ(seen.size(), 4u);  // a, b, Add, Result
  EXPECT_EQ(seen[0], "a:6");
  auto bad = evaluate(m, {Tensor(ET::f32, {3, 2}), Tensor(ET::f32, {1, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("symbol T is 1 here but 3 at node 'a'"), std::string::npos) << bad.error().what;
  auto by_name = evaluate_named(m, std::map<std::string, Tensor>{{"a", Tensor(ET::f32, {1, 2})}, {"b", Tensor(ET::f32, {1, 2})}});
  EXPECT_TRUE(by_name.ok());
  auto missing = evaluate_named(m, std::map<std::string, Tensor>{{"a", Tensor(ET::f32, {1, 2})}});
  EXPECT_FALSE(missing.ok());
}
