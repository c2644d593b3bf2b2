// The GGML vocabulary (shape rules, recorded errors), the one place of ne -> IR conversion, and
// the structure of the shared translators the layout passes rely on.
#include <gtest/gtest.h>

#include <limits>

#include "builder/build.h"
#include "frontend/layout.h"
#include "frontend/translate.h"
#include "ir/evaluator.h"
#include "ir/ops.h"

namespace ggflow::frontend {
namespace {

using T = GgmlType;

TEST(GgmlGraph, ShapeRules) {
  GgmlGraph g;
  Ext t = g.symbol("T");
  EXPECT_EQ(g.symbol("T"), t);
  int x = g.input("x", T::F32, {64, t, 1, 1});
  std::vector<uint8_t> w(64 * 96 * 4);
  int wq = g.weight("wq", T::F32, {64, 96, 1, 1}, 2, w, nullptr);
  int q = g.mul_mat(wq, x);
  EXPECT_EQ(g.ne_str(g.tensor(q).ne), "[96, T, 1, 1]");
  int h = g.reshape(q, {16, 6, t, 1});
  EXPECT_EQ(g.ne_str(g.tensor(g.permute(h, 0, 2, 1, 3)).ne), "[16, T, 6, 1]");
  EXPECT_EQ(g.ne_str(g.tensor(g.transpose(x)).ne), "[T, 64, 1, 1]");
  EXPECT_EQ(g.ne_str(g.tensor(g.glu(GgmlGlu::SWIGLU, x, false)).ne), "[32, T, 1, 1]");
  EXPECT_TRUE(g.status().ok());
}

TEST(GgmlGraph, ShapeErrorsAreRecordedNotFatal) {
  GgmlGraph g;
  int a = g.input("a", T::F32, {64, 3, 1, 1});
  int b = g.input("b", T::F32, {32, 3, 1, 1});
  g.mul_mat(a, b);
  ASSERT_FALSE(g.status().ok());
  EXPECT_NE(g.status().error().what.find("MUL_MAT"), std::string::npos) << g.status().error().what;
  EXPECT_NE(g.status().error().what.find("[64, 3, 1, 1]"), std::string::npos);
  g.reshape(a, {7, 1, 1, 1});  // the first error is kept
  EXPECT_NE(g.status().error().what.find("MUL_MAT"), std::string::npos);
  EXPECT_FALSE(translate(g).ok());
}

TEST(Layout, NeToIrIsReversedInOnePlace) {
  GgmlGraph g;
  Ext t = g.symbol("T");
  SymbolMap syms(g);
  ir::Shape s = to_ir_shape({576, t, 1, 1}, 4, syms);
  EXPECT_EQ(s.str(), "[1,1,?T,576]");
  EXPECT_EQ(to_ir_shape({576, 49152, 1, 1}, 2, syms).str(), "[49152,576]");
  EXPECT_EQ(to_ir_shape({576, t, 1, 1}, 4, syms)[2], s[2]);  // one IR symbol per GGML symbol
  EXPECT_EQ(ir_axis(0, 4), 3);
  EXPECT_EQ(ir_axis(1, 4), 2);
  // ggml_permute(x, 0, 2, 1, 3) swaps ne1 and ne2: IR axes 1 and 2
  auto p = ir_perm_of_ggml_permute({0, 2, 1, 3});
  EXPECT_EQ((std::vector<int64_t>(p.begin(), p.end())), (std::vector<int64_t>{0, 2, 1, 3}));
  // (1, 2, 0, 3): ne -> [ne2, ne0, ne1, ne3], i.e. IR [n3, n2, n1, n0] -> [n3, n1, n0, n2]
  p = ir_perm_of_ggml_permute({1, 2, 0, 3});
  EXPECT_EQ((std::vector<int64_t>(p.begin(), p.end())), (std::vector<int64_t>{0, 2, 3, 1}));
}

// translate_get_rows keeps the shared contract: Squeeze(0, 1) of the indices, Gather on axis 0,
// optional Convert, Unsqueeze(axis 0). AdaptToGenAI (not this translator) moves the axis.
TEST(Translate, GetRowsContract) {
  for (T table : {T::F32, T::F16}) {
    GgmlGraph g;
    Ext t = g.symbol("T");
    int ids = g.input("inp_tokens", T::I32, {t, 1, 1, 1});
    std::vector<uint8_t> w(8 * 10 * (table == T::F32 ? 4 : 2));
    int emb = g.weight("token_embd.weight", table, {8, 10, 1, 1}, 2, w, nullptr);
    g.add_output("out", g.get_rows(emb, ids));
    auto m = translate(g);
    ASSERT_TRUE(m) << m.error().str();
    auto v = m->output("out");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->shape().str(), "[1,1,?T,8]");
    auto un = v->node;
    ASSERT_EQ(un->type(), ir::OpType::Unsqueeze);
    EXPECT_EQ(un->attrs<ir::AxesAttrs>().axes, std::vector<int64_t>{0});
    auto gather = un->input(0).node;
    if (table == T::F16) {
      ASSERT_EQ(gather->type(), ir::OpType::Convert);
      gather = gather->input(0).node;
    }
    ASSERT_EQ(gather->type(), ir::OpType::Gather);
    EXPECT_EQ(gather->attrs<ir::GatherAttrs>().axis, 0);
    auto sq = gather->input(1).node;
    ASSERT_EQ(sq->type(), ir::OpType::Squeeze);
    EXPECT_EQ(sq->attrs<ir::AxesAttrs>().axes, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(sq->input(0).node->name(), "inp_tokens");
  }
}

// FLASH_ATTN_EXT with Gemma 2's logit soft-cap translates (it used to be refused): one
// ScaledDotProductAttention carrying scale and logit_softcap, then the transpose to GGML's result
// layout. ALiBi and a non-finite cap are still refused, naming the op.
TEST(Translate, FlashAttnExtLogitSoftcap) {
  auto build = [](float max_bias, float softcap) {
    GgmlGraph g;
    Ext t = g.symbol("T"), kv = g.symbol("KV");
    int q = g.input("q", T::F32, {16, t, 4, 1});      // [D, T, H]
    int k = g.input("k", T::F32, {16, kv, 2, 1});     // [D, KV, Hkv]
    int v = g.input("v", T::F32, {16, kv, 2, 1});
    int m = g.input("mask", T::F32, {kv, t, 1, 1});   // [KV, T]
    g.add_output("o", g.flash_attn_ext(q, k, v, m, 0.25f, max_bias, softcap));  // [16, 4, T]
    return translate(g);
  };
  auto m = build(0.0f, 50.0f);
  ASSERT_TRUE(m) << m.error().str();
  auto o = m->output("o");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->shape().str(), "[1,?T,4,16]");
  ASSERT_EQ(o->node->type(), ir::OpType::Transpose);
  auto sdpa = o->node->input(0).node;
  ASSERT_EQ(sdpa->type(), ir::OpType::ScaledDotProductAttention);
  EXPECT_EQ(sdpa->attrs<ir::SdpaAttrs>().scale, 0.25f);
  EXPECT_EQ(sdpa->attrs<ir::SdpaAttrs>().logit_softcap, 50.0f);
  EXPECT_FALSE(sdpa->attrs<ir::SdpaAttrs>().causal);
  EXPECT_EQ(sdpa->n_inputs(), 4u) << "the mask stays additive, added after the cap";
  auto plain = build(0.0f, 0.0f);
  ASSERT_TRUE(plain) << plain.error().str();
  EXPECT_EQ(plain->output("o")->node->input(0).node->attrs<ir::SdpaAttrs>().logit_softcap, 0.0f);
  auto alibi = build(8.0f, 50.0f);
  ASSERT_FALSE(alibi);
  EXPECT_NE(alibi.error().what.find("ALiBi"), std::string::npos) << alibi.error().what;
  auto inf = build(0.0f, std::numeric_limits<float>::infinity());
  ASSERT_FALSE(inf);
  EXPECT_NE(inf.error().what.find("logit_softcap"), std::string::npos) << inf.error().what;
  EXPECT_NE(inf.error().what.find("FLASH_ATTN_EXT"), std::string::npos) << inf.error().what;
}

// VIEW of a column range of every row of [R, T] (gemma4's per-layer inputs: layer il's Epl columns
// of each token's row), with the token count dynamic: a Slice on the innermost IR axis, and the
// values are the view's elements.
TEST(Translate, ViewOfAColumnRangeWithDynamicRows) {
  GgmlGraph g;
  Ext t = g.symbol("T");
  int x = g.input("x", T::F32, {12, t, 1, 1});                          // [R = 12, T]
  g.add_output("v", g.view(x, {4, t, 1, 1}, {4, 12 * 4, 0, 0}, 8 * 4));  // columns 8..11 of every row
  auto m = translate(g);
  ASSERT_TRUE(m) << m.error().str();
  auto v = m->output("v");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->shape().str(), "[1,1,?T,4]");
  EXPECT_EQ(v->node->type(), ir::OpType::Slice);
  std::vector<float> in(3 * 12);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  auto r = ir::evaluate_named(*m, {{"x", ir::Tensor::f32({1, 1, 3, 12}, in)}});
  ASSERT_TRUE(r) << r.error().str();
  const auto got = (*r)[0].to_f32();
  ASSERT_EQ(got.size(), 12u);
  for (int row = 0; row < 3; ++row)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[row * 4 + c], float(row * 12 + 8 + c)) << row << "," << c;
  // a range that leaves the row is not this case: with a dynamic T it is refused, not misread
  GgmlGraph bad;
  Ext bt = bad.symbol("T");
  int bx = bad.input("x", T::F32, {12, bt, 1, 1});
  bad.add_output("v", bad.view(bx, {4, bt, 1, 1}, {4, 12 * 4, 0, 0}, 10 * 4));
  EXPECT_FALSE(translate(bad).ok());
}

// The whole stories260K graph: inputs and outputs carry the contract's shapes with the same
// symbols, and no Reshape target pins a leading dim to a literal.
TEST(Translate, Stories260KRawLayout) {
  auto f = gguf::File::open(std::string(GGFLOW_SHARED) + "/models/stories260K.gguf");
  ASSERT_TRUE(f) << f.error().str();
  auto b = builder::build(*f);
  ASSERT_TRUE(b) << b.error().str();
  auto m = translate(b->graph);
  ASSERT_TRUE(m) << m.error().str();
  auto shape = [&](const std::string& n) { return m->parameter(n)->out_shape().str(); };
  EXPECT_EQ(shape("inp_tokens"), "[1,1,1,?T]");
  EXPECT_EQ(shape("inp_pos"), "[1,1,1,?T]");
  EXPECT_EQ(shape("inp_out_ids"), "[1,1,1,?O]");
  EXPECT_EQ(shape("self_kq_mask"), "[1,1,?T,?KV]");
  EXPECT_EQ(shape("cache_k_l4"), "[1,1,?KV,32]");
  EXPECT_EQ(m->output("logits")->shape().str(), "[1,1,?O,512]");
  EXPECT_EQ(m->output("cache_v_l2_out")->shape().str(), "[1,1,?KV,32]");
  auto order = m->ordered();
  ASSERT_TRUE(order);
  int reshapes = 0;
  for (const auto& n : *order) {
    if (n->type() != ir::OpType::Reshape || n->input(1).node->type() != ir::OpType::Constant) continue;
    ++reshapes;
    auto target = n->input(1).node->attrs<ir::ConstantAttrs>().value.to_i64();
    if (target.size() == 4) {
      EXPECT_EQ(target[0], 0) << n->describe() << ": a literal leading dim";
    }
  }
  EXPECT_GT(reshapes, 10);
}

}  // namespace
}  // namespace ggflow::frontend
