// AdaptToGenAI on small translator-shaped graphs: the tests 1-5 (structure and values).
#include <gtest/gtest.h>

#include "graphs.h"
#include "pattern/pass_manager.h"
#include "pattern/pass_test.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::transforms::testing {
namespace {

using pattern::check_pass;
using pattern::check_pass_unchanged;

// GenAI inputs for token ids laid out as [1,T] (SDPA) or [T,1] (the PA layout's view).
std::map<std::string, Tensor> genai_inputs(const std::vector<int64_t>& ids, bool pa_shape) {
  const int64_t T = static_cast<int64_t>(ids.size());
  std::vector<int64_t> pos(T), ones(T, 1);
  for (int64_t i = 0; i < T; ++i) pos[i] = i;
  std::vector<int64_t> s = pa_shape ? std::vector<int64_t>{T, 1} : std::vector<int64_t>{1, T};
  return {{"input_ids", Tensor::i64(s, ids)},
          {"position_ids", Tensor::i64(s, pos)},
          {"attention_mask", Tensor::i64(pa_shape ? std::vector<int64_t>{T, 1} : std::vector<int64_t>{1, T}, ones)},
          {"beam_idx", Tensor::i32({pa_shape ? T : 1}, std::vector<int64_t>(pa_shape ? T : 1, 0))}};
}

Model adapted(Model m) {
  pattern::PassManager pm;
  pm.add<AdaptToGenAI>();
  auto r = pm.run(m);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : r.error().str());
  return m;
}

Tensor output(const Model& m, const std::string& name, const std::map<std::string, Tensor>& in) {
  auto r = evaluate_named(m, in);
  EXPECT_TRUE(static_cast<bool>(r)) << (r ? "" : r.error().str());
  if (!r) return {};
  for (size_t i = 0; i < m.results().size(); ++i)
    if (m.results()[i]->name() == name) return (*r)[i];
  ADD_FAILURE() << "no result " << name;
  return {};
}

// Test 1 (structural), against a hand-built expected graph, values compared bit for bit.
TEST(FixEmbdAxis, RewritesUnsqueezeToAxis1KeepingNameAndRtInfo) {
  pattern::MatcherPass pass = fix_embd_axis();
  auto expected = [] {
    EmbdModel m = embd_model();
    auto fixed = ops::unsqueeze(m.main.gather, {1});
    fixed->set_name("inp_embd");
    fixed->out_names().insert("inp_embd");
    fixed->rt_info()["origin"] = std::string("GET_ROWS");
    for (auto c : m.main.unsqueeze->consumers()) c.node->set_input(c.input, fixed);
    return m.model;
  };
  auto s = check_pass([] { return embd_model().model; }, pass, expected);
  EXPECT_TRUE(s.ok()) << s.error().str();
}

TEST(FixEmbdAxis, AfterAdaptToGenAIGatherUnchangedAndAxisIs1) {
  EmbdModel m = embd_model();
  NodePtr gather = m.main.gather;
  Model a = adapted(m.model);
  NodePtr u = a.find("inp_embd");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->type(), OpType::Unsqueeze);
  EXPECT_NE(u.get(), m.main.unsqueeze.get()) << "replaced, not mutated";
  EXPECT_EQ(u->attrs<AxesAttrs>().axes, std::vector<int64_t>{1});
  EXPECT_EQ(std::get<std::string>(u->rt_info().at("origin")), "GET_ROWS");
  EXPECT_EQ(u->input(0).node.get(), gather.get()) << "the Gather is unchanged";
  EXPECT_EQ(gather->attrs<GatherAttrs>().axis, 0);
  EXPECT_TRUE(u->out_names().count("inp_embd"));
}

// Test 2: a Convert between Gather and Unsqueeze.
TEST(FixEmbdAxis, LooksThroughConvert) {
  EmbdModel m = embd_model({.convert = true});
  NodePtr conv = m.main.convert;
  Model a = adapted(m.model);
  NodePtr u = a.find("inp_embd");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->attrs<AxesAttrs>().axes, std::vector<int64_t>{1});
  EXPECT_EQ(u->input(0).node.get(), conv.get());
  EXPECT_EQ(std::get<std::string>(u->rt_info().at("origin")), "GET_ROWS");
}

// Test 3: both layouts with values.
TEST(FixEmbdAxis, FunctionalBothLayouts) {
  const std::vector<int64_t> ids = {3, 7, 1, 9, 0};
  const int64_t T = 5, H = 4;
  Model a = adapted(embd_model().model);
  Tensor tbl = table(H);
  auto rows = tbl.to_f32();
  for (bool pa : {false, true}) {
    Tensor e = output(a, "embd", genai_inputs(ids, pa));
    std::vector<int64_t> want = pa ? std::vector<int64_t>{T, 1, 1, H} : std::vector<int64_t>{1, 1, T, H};
    EXPECT_EQ(e.shape(), want) << (pa ? "[T,1]" : "[1,T]");
    auto v = e.to_f32();
    ASSERT_EQ(v.size(), static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) EXPECT_EQ(v[t * H + h], rows[ids[t] * H + h]) << "row " << t;
  }
}

// Test 4: a second token lookup with another name is fixed; a lookup rooted elsewhere is not.
TEST(FixEmbdAxis, SecondTokenLookupFixedOtherLeftAlone) {
  EmbdModel m = embd_model({.second = true, .other = true});
  Model a = adapted(m.model);
  EXPECT_EQ(a.find("inp_embd")->attrs<AxesAttrs>().axes, std::vector<int64_t>{1});
  EXPECT_EQ(a.find("pe_tok_flat")->attrs<AxesAttrs>().axes, std::vector<int64_t>{1});
  EXPECT_EQ(a.find("pos_lookup")->attrs<AxesAttrs>().axes, std::vector<int64_t>{0});
  // SDPA view still evaluates; the PA view of main + second adds row by row (no [T,T] broadcast)
  EXPECT_EQ(output(a, "pos_rows", genai_inputs({1, 2, 3}, false)).shape(), (std::vector<int64_t>{1, 1, 3, 4}));
  Model b = adapted(embd_model({.second = true}).model);
  Tensor l = output(b, "logits", genai_inputs({1, 2, 3}, true));
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{3, 1, kVocab}));
  Tensor pe = output(b, "pe", genai_inputs({1, 2, 3}, true));
  EXPECT_EQ(pe.shape(), (std::vector<int64_t>{3, 1, 1, 4}));
  EXPECT_EQ(pe.to_f32()[4], 102.0f) << "row 1 of the second table is token 2's";
}

TEST(FixEmbdAxis, PairNotRootedAtInpTokensIsUnchanged) {
  auto before = [] {
    auto pos = ops::parameter(ElementType::i32, {1, 1, 1, sym_T()}, "inp_pos");
    GetRows g = get_rows(ops::constant(table(4), "pos_table"), pos, "pos_lookup");
    return Model({ops::result(g.unsqueeze, "out")}, {pos});
  };
  pattern::MatcherPass pass = fix_embd_axis();
  auto s = check_pass_unchanged(before, pass);
  EXPECT_TRUE(s.ok()) << s.error().str();
}

TEST(AdaptToGenAI, NoOpWithoutBuilderInputs) {
  auto before = [] {
    auto x = ops::parameter(ElementType::f32, {2, 4}, "x");
    return Model({ops::result(ops::multiply(x, ops::scalar_f32(2.0f)), "logits")}, {x});
  };
  AdaptToGenAI pass;
  auto s = check_pass_unchanged(before, pass);
  EXPECT_TRUE(s.ok()) << s.error().str();
  bool said = false;
  for (const auto& l : pass.log()) said = said || l.find("inp_tokens") != std::string::npos;
  EXPECT_TRUE(said) << "the log says why nothing happened";
}

// Test 5: inp_out_ids row selection: last row for [1,T], every row in order for [T,1].
TEST(FixInpOutIdsRowSelect, LastRowForSdpaAllRowsForPa) {
  auto make = [] {
    const int64_t H = 4;
    auto tokens = tokens_param();
    auto out_ids = ops::parameter(ElementType::i32, {1, 1, 1, sym_O()}, "inp_out_ids");
    auto tbl = ops::constant(table(H), "token_embd.weight");
    GetRows e = get_rows(tbl, tokens, "inp_embd");                                 // [1,1,T,H]
    auto x = ops::multiply(e.unsqueeze, ops::scalar_f32(2.0f));                     // [1,1,T,H]
    auto sq = ops::squeeze(x, {0, 1});                                              // [T,H]
    auto g = ops::gather(sq, ops::squeeze(out_ids, {0, 1}), 0);                     // [1,O,H]
    auto u = ops::unsqueeze(g, {0});                                                // [1,1,O,H]
    u->set_name("out_rows");
    return Model({ops::result(u, "rows"), lm_head(u, tbl)}, {tokens, out_ids});
  };
  Model a = adapted(make());
  EXPECT_FALSE(a.parameter("inp_out_ids")) << "the raw input is gone";
  const std::vector<int64_t> ids = {4, 8, 2, 6};
  auto rows = table(4).to_f32();
  Tensor sd = output(a, "rows", genai_inputs(ids, false));
  EXPECT_EQ(sd.shape(), (std::vector<int64_t>{1, 1, 1, 4}));
  for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(sd.to_f32()[h], 2.0f * rows[6 * 4 + h]);
  Tensor pa = output(a, "rows", genai_inputs(ids, true));
  EXPECT_EQ(pa.shape(), (std::vector<int64_t>{4, 1, 1, 4}));
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(pa.to_f32()[t * 4 + h], 2.0f * rows[ids[t] * 4 + h]);
  Tensor l = output(a, "logits", genai_inputs(ids, false));
  EXPECT_EQ(l.shape(), (std::vector<int64_t>{1, 1, kVocab})) << "LM head: MatMul of a rank-3 input";
}

}  // namespace
}  // namespace ggflow::transforms::testing
