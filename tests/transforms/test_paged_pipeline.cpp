// The tests 6 and 7: a small decoder through AdaptToGenAI -> MakeStateful ->
// SDPAToPagedAttention, structurally and numerically; and the article's bug (Unsqueeze axis 0)
// under the PA layout.
#include <gtest/gtest.h>

#include <cstring>

#include "graphs.h"
#include "ir/ops.h"
#include "pattern/pass_manager.h"
#include "pattern/rewriter.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"
#include "transforms/make_stateful.h"
#include "transforms/sdpa_to_paged_attention/sdpa_to_paged_attention.h"

namespace ggflow::transforms::testing {
namespace {

using D = Decoder;
const std::vector<int64_t> kIds = {3, 7, 1, 9, 4};

Result<bool> run(Model& m, std::vector<std::unique_ptr<pattern::Pass>> passes) {
  pattern::PassManager pm;
  for (auto& p : passes) pm.add(std::move(p));
  return pm.run(m);
}

std::vector<std::unique_ptr<pattern::Pass>> passes(bool paged, bool with_fix = true) {
  std::vector<std::unique_ptr<pattern::Pass>> v;
  if (with_fix) {
    v.push_back(std::make_unique<AdaptToGenAI>());
  } else {  // AdaptToGenAI without FixEmbdAxis: the pre-fix graph
    v.push_back(std::make_unique<pattern::MatcherPass>(fix_inp_out_ids_row_select()));
    v.push_back(genai_interface({}));
  }
  v.push_back(std::make_unique<MakeStateful>());
  if (paged) v.push_back(std::make_unique<SDPAToPagedAttention>());
  return v;
}

Tensor logits_of(const Model& m, const std::vector<Tensor>& out) {
  for (size_t i = 0; i < m.results().size(); ++i)
    if (m.results()[i]->name() == "logits") return out[i];
  return {};
}

// running mean of the embeddings' first 4 dims, per kv head, + the embedding itself
std::vector<float> expected_row(int64_t t) {
  auto tbl = table(D::E).to_f32();
  std::vector<float> row(D::E);
  for (int64_t h = 0; h < D::H; ++h)
    for (int64_t d = 0; d < D::D; ++d) {
      int64_t c = (h / (D::H / D::Hkv)) * D::D + d;
      float acc = 0.0f;
      for (int64_t j = 0; j <= t; ++j) acc += tbl[kIds[j] * D::E + c];
      row[h * D::D + d] = tbl[kIds[t] * D::E + h * D::D + d] + acc / static_cast<float>(t + 1);
    }
  return row;
}

// Test 6.
TEST(SDPAToPagedAttention, DecoderConvertsAndComputesRunningMean) {
  Model m = decoder().model;
  auto r = run(m, passes(true));
  ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
  auto order = m.ordered();
  ASSERT_TRUE(static_cast<bool>(order));
  NodePtr pa;
  for (const auto& n : *order) {
    EXPECT_NE(n->type(), OpType::ScaledDotProductAttention);
    EXPECT_NE(n->type(), OpType::ReadValue);
    if (n->type() == OpType::PagedAttention) pa = n;
  }
  ASSERT_TRUE(pa) << "a PagedAttention is created";
  EXPECT_EQ(pa->input(0).shape().rank(), 2u);
  EXPECT_TRUE(pa->input(0).shape()[1].is(D::H * D::D)) << pa->input(0).shape().str();
  EXPECT_TRUE(m.sinks().empty()) << "the Assigns are gone";
  for (const char* gone : {"beam_idx", "attention_mask", "inp_tokens", "inp_out_ids", "self_kq_mask"})
    EXPECT_FALSE(m.parameter(gone)) << gone;
  EXPECT_EQ(m.parameter("input_ids")->out_shape().rank(), 1u);
  EXPECT_EQ(m.parameter("key_cache.0")->out_shape().str(), "[?blocks,2,32,2]");

  // step 1: prefill 4 tokens; step 2: decode the 5th, with the caches the kernel wrote
  Tensor kc(ElementType::f32, {1, D::Hkv, 32, D::D}), vc = kc;
  for (int step = 0; step < 2; ++step) {
    int64_t past = step == 0 ? 0 : 4, n = step == 0 ? 4 : 1;
    std::vector<int64_t> ids(kIds.begin() + past, kIds.begin() + past + n), pos(n), rows(n);
    for (int64_t i = 0; i < n; ++i) pos[i] = past + i, rows[i] = i;
    std::map<std::string, Tensor> in{{"input_ids", Tensor::i64({n}, ids)},
                                     {"position_ids", Tensor::i64({n}, pos)},
                                     {"past_lens", Tensor::i32({1}, {past})},
                                     {"subsequence_begins", Tensor::i32({2}, {0, n})},
                                     {"block_indices", Tensor::i32({1}, {0})},
                                     {"block_indices_begins", Tensor::i32({2}, {0, 1})},
                                     {"max_context_len", Tensor::i32({}, {past + n})},
                                     {"key_cache.0", kc},
                                     {"value_cache.0", vc},
                                     {"sampled_tokens_indices", Tensor::i64({n}, rows)}};
    auto out = evaluate_named(m, in);
    ASSERT_TRUE(static_cast<bool>(out)) << out.error().str();
    Tensor l = logits_of(m, *out);
    ASSERT_EQ(l.shape(), (std::vector<int64_t>{n, 1, kVocab}));
    auto v = l.to_f32();
    for (int64_t i = 0; i < n; ++i) {
      auto want = expected_row(past + i);
      for (int64_t c = 0; c < D::E; ++c) EXPECT_FLOAT_EQ(v[i * kVocab + c], want[c]) << "token " << past + i << " dim " << c;
    }
    for (size_t i = 0; i < m.results().size(); ++i) {
      if (m.results()[i]->name() == "key_cache.0_out") kc = (*out)[i];
      if (m.results()[i]->name() == "value_cache.0_out") vc = (*out)[i];
    }
  }
}

// The SDPA layout of the same decoder: stateful, and its logits equal the PA layout's bit for bit.
TEST(MakeStateful, DecoderSdpaLayoutMatchesPagedBitForBit) {
  Model s = decoder().model, p = decoder().model;
  ASSERT_TRUE(static_cast<bool>(run(s, passes(false))));
  ASSERT_TRUE(static_cast<bool>(run(p, passes(true))));
  EXPECT_EQ(s.sinks().size(), 2u) << "one Assign per cache";
  StateStore st;
  std::vector<int64_t> ids(kIds.begin(), kIds.end()), pos = {0, 1, 2, 3, 4};
  auto out = evaluate_named(s, {{"input_ids", Tensor::i64({1, 5}, ids)},
                                {"position_ids", Tensor::i64({1, 5}, pos)},
                                {"attention_mask", Tensor::i64({1, 5}, {1, 1, 1, 1, 1})},
                                {"beam_idx", Tensor::i32({1}, {0})}}, &st);
  ASSERT_TRUE(static_cast<bool>(out)) << out.error().str();
  EXPECT_EQ(st.values.size(), 2u);
  Tensor sl = logits_of(s, *out);
  ASSERT_EQ(sl.shape(), (std::vector<int64_t>{1, 1, kVocab}));
  Tensor kc(ElementType::f32, {1, D::Hkv, 32, D::D});
  auto po = evaluate_named(p, {{"input_ids", Tensor::i64({5}, ids)}, {"position_ids", Tensor::i64({5}, pos)},
                               {"past_lens", Tensor::i32({1}, {0})}, {"subsequence_begins", Tensor::i32({2}, {0, 5})},
                               {"block_indices", Tensor::i32({1}, {0})}, {"block_indices_begins", Tensor::i32({2}, {0, 1})},
                               {"max_context_len", Tensor::i32({}, {5})}, {"key_cache.0", kc}, {"value_cache.0", kc},
                               {"sampled_tokens_indices", Tensor::i64({1}, {4})}});
  ASSERT_TRUE(static_cast<bool>(po)) << po.error().str();
  Tensor pl = logits_of(p, *po);
  ASSERT_EQ(pl.shape(), (std::vector<int64_t>{1, 1, kVocab}));
  EXPECT_EQ(std::memcmp(sl.bytes(), pl.bytes(), sl.nbytes()), 0);
}

TEST(SDPAToPagedAttention, RefusesWithoutPreconditions) {
  Model m = decoder().model;
  ASSERT_TRUE(static_cast<bool>(run(m, [] {
    std::vector<std::unique_ptr<pattern::Pass>> v;
    v.push_back(std::make_unique<AdaptToGenAI>());
    return v;
  }())));
  SDPAToPagedAttention pass;
  auto r = pass.run(m);  // no MakeStateful: the caches are still Parameters
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.error().what.find("precondition failed"), std::string::npos) << r.error().what;
  EXPECT_NE(r.error().what.find("stateful cache"), std::string::npos) << r.error().what;
  Model raw = decoder().model;
  auto r2 = pass.run(raw);
  ASSERT_FALSE(static_cast<bool>(r2));
  EXPECT_NE(r2.error().what.find("'input_ids'"), std::string::npos) << r2.error().what;
}

// PagedAttention scores in q8_0 arithmetic exactly when its cache is q8_0: an SDPA that asks for
// q8_0 scores over the decoder's f32 cache is refused, naming the mismatch.
TEST(SDPAToPagedAttention, RefusesQ8ScoresOverAnF32Cache) {
  Model m = decoder().model;
  ASSERT_TRUE(static_cast<bool>(run(m, passes(false))));
  auto order = m.ordered();
  ASSERT_TRUE(static_cast<bool>(order));
  pattern::Rewriter rw(m);
  int swapped = 0;
  for (const auto& n : *order) {
    if (n->type() != ir::OpType::ScaledDotProductAttention) continue;
    const auto& a = n->attrs<ir::SdpaAttrs>();
    std::optional<ir::Value> mask;
    if (n->n_inputs() == 4) mask = n->input(3);
    auto q8 = ir::ops::sdpa(n->input(0), n->input(1), n->input(2), mask, a.causal, a.scale, a.logit_softcap, true);
    ASSERT_TRUE(static_cast<bool>(rw.replace_node(n, q8)));
    ++swapped;
  }
  ASSERT_GT(swapped, 0);
  auto r = SDPAToPagedAttention().run(m);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.error().what.find("q8_0 scores over a key cache that is not q8_0"), std::string::npos) << r.error().what;
  EXPECT_NE(r.error().hint.find("kv_type"), std::string::npos) << r.error().hint;
}

// Test 7: the bug itself. (a) The pre-fix decoder (FixEmbdAxis left out) under the PA layout is
// refused when the graph is built: the embedding [1,T,1,E] puts the tokens on axis 1, so q
// reaches PagedAttention as [1, T·H·D] and its shape rule (run by the verifier) refuses it,
// naming the SDPA being replaced.
TEST(Regression37606, PreFixDecoderIsRefusedUnderPagedLayout) {
  Model m = decoder().model;
  auto r = run(m, passes(true, /*with_fix=*/false));
  ASSERT_FALSE(static_cast<bool>(r)) << "the pre-fix graph must not convert silently";
  EXPECT_NE(r.error().what.find("ScaledDotProductAttention"), std::string::npos) << r.error().what;
  EXPECT_NE(r.error().what.find("static width"), std::string::npos) << r.error().what;
  Model ok = decoder().model;
  EXPECT_TRUE(static_cast<bool>(run(ok, passes(true, true))));
}

// (b) The article's minimal counterexample: the pre-fix embedding of PA-shaped ids [T,1]
// PRODUCES [1,T,1,H]; the fixed one [T,1,1,H]. (c) Added to a branch that follows the PA token
// axis ([T,1,1,H], like RoPE's cos/sin), the pre-fix graph is REFUSED by the verifier's broadcast
// guard with the Add's name; the fixed graph verifies.
TEST(Regression37606, PreFixEmbeddingProducesWrongShapeAndGuardRefusesTheBroadcast) {
  const int64_t H = 4, T = 3;
  auto make = [&] {  // embd + Transpose(inp_pos)·w: [1,1,T,H] raw/SDPA, [T,1,1,H] PA
    auto tokens = tokens_param();
    auto pos = ops::parameter(ElementType::i32, {1, 1, 1, sym_T()}, "inp_pos");
    auto e = get_rows(ops::constant(table(H), "token_embd.weight"), tokens, "inp_embd").unsqueeze;
    auto pb = ops::multiply(ops::transpose(ops::convert(pos, ElementType::f32), {0, 1, 3, 2}),
                            ops::const_f32({1, 1, 1, 1}));                                // [1,1,T,H]
    auto sum = ops::add(e, pb);
    sum->set_name("embd_plus_pos");
    auto tbl = ops::constant(table(H), "out.weight");
    return Model({ops::result(e, "embd"), ops::result(sum, "sum"), lm_head(sum, tbl)}, {tokens, pos});
  };
  // the PA layout's input change (SDPAToPagedAttention's first step): ids, positions i64 [T] -> Unsqueeze(1)
  auto to_pa_inputs = [](Model& m) {
    pattern::Rewriter rw(m);
    for (const char* name : {"input_ids", "position_ids"}) {
      auto old = m.parameter(name);
      auto p = ops::parameter(ElementType::i64, {Symbol::named("T")}, name);
      (void)rw.replace_value(Value(old, 0), ops::unsqueeze(p, {1}), false);
      std::replace(m.parameters().begin(), m.parameters().end(), old, p);
    }
    return m.infer();
  };
  std::map<std::string, Tensor> in{{"input_ids", Tensor::i64({T}, {5, 2, 8})}, {"position_ids", Tensor::i64({T}, {0, 1, 2})},
                                   {"attention_mask", Tensor::i64({1, T}, {1, 1, 1})}, {"beam_idx", Tensor::i32({1}, {0})}};
  for (bool fixed : {false, true}) {
    Model m = make();
    pattern::MatcherPass embd = fix_embd_axis();
    auto iface = genai_interface({});
    if (fixed) {
      ASSERT_TRUE(static_cast<bool>(embd.run(m)));
    }
    ASSERT_TRUE(static_cast<bool>(iface->run(m)));
    ASSERT_TRUE(to_pa_inputs(m).ok());
    auto v = verify(m);
    if (!fixed) {
      ASSERT_FALSE(v.ok()) << "the broadcast guard refuses [1,T,1,H] + [T,1,1,H]";
      EXPECT_NE(v.error().what.find("embd_plus_pos"), std::string::npos) << v.error().what;
      // evaluated anyway, the embedding alone is [1,T,1,H]: the tokens left the leading axis
      Model only({m.results()[0]}, m.parameters());
      auto r = evaluate_named(only, in);
      ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
      EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{1, T, 1, H}));
    } else {
      ASSERT_TRUE(v.ok()) << v.error().str();
      auto r = evaluate_named(m, in);
      ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
      EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{T, 1, 1, H}));
      EXPECT_EQ((*r)[1].shape(), (std::vector<int64_t>{T, 1, 1, H}));
    }
  }
}

}  // namespace
}  // namespace ggflow::transforms::testing
