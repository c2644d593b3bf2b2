// The fusions for execution (transforms/fusion): each on small graphs (structure against a
// hand-built expected graph, outputs bit for bit before and after), the cases it must leave alone
// (and say why), and on the real models: where it applied, and that every layout still computes
// the same (the executor invariance tests compare the fused layouts by memcmp).
#include <gtest/gtest.h>

#include "ir/ops.h"
#include "pattern/pass_test.h"
#include "transforms/fusion/fusion.h"

namespace ggflow::transforms {
namespace {

using namespace ggflow::ir;
using pattern::check_pass;
using pattern::check_pass_unchanged;

constexpr int64_t H = 8;
Symbol sym_T() {
  static Symbol s = Symbol::named("T");
  return s;
}

std::vector<float> weights(int64_t n, float base) {
  std::vector<float> w(n);
  for (int64_t i = 0; i < n; ++i) w[i] = base + 0.37f * static_cast<float>(i);
  return w;
}

// x [?T, H] -> RMSNorm -> Multiply by w [H] (w first when `swap`) -> Result "out".
Model norm_then_scale(bool swap, std::vector<int64_t> wshape = {H}, bool second_consumer = false) {
  auto x = ops::parameter(ElementType::f32, Shape{Dim(sym_T()), Dim(H)}, "x");
  auto n = ops::rms_norm(x, std::nullopt, 1e-5f);
  n->set_name("norm");
  auto w = ops::constant(Tensor::f32(wshape, weights(product(wshape), 0.5f)), "w");
  auto m = swap ? ops::multiply(w, n) : ops::multiply(n, w);
  m->set_name("attn_norm");
  std::vector<NodePtr> results = {ops::result(m, "out")};
  if (second_consumer) results.push_back(ops::result(n, "raw_norm"));
  return Model(results, std::vector<NodePtr>{x});
}

Model fused_expected() {
  auto x = ops::parameter(ElementType::f32, Shape{Dim(sym_T()), Dim(H)}, "x");
  auto w = ops::constant(Tensor::f32({H}, weights(H, 0.5f)), "w");
  auto n = ops::rms_norm(x, Value(w), 1e-5f);
  n->set_name("attn_norm");
  return Model(std::vector<NodePtr>{ops::result(n, "out")}, std::vector<NodePtr>{x});
}

TEST(FuseRMSNormScale, NormTimesWeightBecomesOneNormWithGamma) {
  pattern::MatcherPass pass = fuse_rmsnorm_scale();
  for (bool swap : {false, true}) {
    auto s = check_pass([swap] { return norm_then_scale(swap); }, pass, fused_expected);
    EXPECT_TRUE(s.ok()) << (swap ? "w * norm: " : "norm * w: ") << s.error().str();
  }
}

TEST(FuseRMSNormScale, LeavesAloneWhatItCannotFuseAndSaysWhy) {
  struct Case {
    const char* what;
    pattern::ModelFactory build;
    const char* why;
  } cases[] = {
      {"the unscaled norm is also a result", [] { return norm_then_scale(false, {H}, true); }, "other consumers"},
      {"a broadcast scalar weight", [] { return norm_then_scale(false, {1}); }, "constant f32 [H]"},
      {"a norm that already has a gamma",
       [] {
         auto x = ops::parameter(ElementType::f32, Shape{Dim(sym_T()), Dim(H)}, "x");
         auto n = ops::rms_norm(x, Value(ops::constant(Tensor::f32({H}, weights(H, 1.0f)))), 1e-5f);
         auto m = ops::multiply(n, ops::constant(Tensor::f32({H}, weights(H, 0.5f))));
         return Model(std::vector<NodePtr>{ops::result(m, "out")}, std::vector<NodePtr>{x});
       },
       "already has a gamma"},
      {"a weight computed at run time",
       [] {
         auto x = ops::parameter(ElementType::f32, Shape{Dim(sym_T()), Dim(H)}, "x");
         auto g = ops::parameter(ElementType::f32, Shape{Dim(H)}, "g");
         auto m = ops::multiply(ops::rms_norm(x, std::nullopt, 1e-5f), g);
         return Model(std::vector<NodePtr>{ops::result(m, "out")}, std::vector<NodePtr>{x, g});
       },
       "constant f32 [H]"},
  };
  for (const Case& c : cases) {
    pattern::MatcherPass pass = fuse_rmsnorm_scale();
    auto s = check_pass_unchanged(c.build, pass);
    EXPECT_TRUE(s.ok()) << c.what << ": " << s.error().str();
    bool said = false;
    for (const std::string& line : pass.log()) said = said || line.find(c.why) != std::string::npos;
    EXPECT_TRUE(said) << c.what << ": no log line says '" << c.why << "'";
  }
}

TEST(FuseForExecution, ReportsWhatApplied) {
  Model m = norm_then_scale(false);
  std::vector<std::string> log, applied;
  ASSERT_TRUE(fuse_for_execution(m, &log, &applied).ok());
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0], "FuseRMSNormScale x1");
  Model plain = norm_then_scale(false, {1});
  applied.clear();
  ASSERT_TRUE(fuse_for_execution(plain, nullptr, &applied).ok());
  EXPECT_TRUE(applied.empty());
}

}  // namespace
}  // namespace ggflow::transforms
