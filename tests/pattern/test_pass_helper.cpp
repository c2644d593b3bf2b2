// The pass test helper (DESIGN.md section 7) on two example passes: graph before, pass,
// expected graph (structure, friendly names, rt_info), both evaluated on random inputs; and the
// negative form where the graph must come out unchanged. Also: the helper does fail when the
// result differs from the expectation.
#include <gtest/gtest.h>

#include "embd_graph.h"
#include "example_passes.h"
#include "pattern/pass_test.h"

using namespace ggflow;
using namespace ggflow::pattern;
using namespace ggflow::pattern::testing;
using ir::ElementType;

namespace {
const ir::Symbol kT = ir::Symbol::named("T");

ir::Model convert_graph(ElementType to, bool with_convert) {
  auto x = ir::ops::parameter(ElementType::f32, {kT, 4}, "x");          // f32 [T, 4]
  ir::Value v = x;
  if (with_convert) {
    auto c = ir::ops::convert(x, to);                                     // [T, 4]
    c->set_name("c");
    c->out_names().insert("c_out");
    v = c;
  } else {
    x->out_names().insert("c_out");                                       // the names moved to x
  }
  auto t = ir::ops::tanh(v);
  t->set_name("t");
  t->rt_info()["keep"] = std::string("me");
  return ir::Model({ir::ops::result(t, "out")}, {x});
}

PassTestOptions token_options() {
  PassTestOptions o;
  o.int_ranges["inp_tokens"] = {0, 8};
  o.int_ranges["inp_pos"] = {0, 8};
  o.dims["T"] = 5;
  return o;
}
}  // namespace

TEST(PassHelper, EliminateNopConvert) {
  auto pass = eliminate_nop_convert();
  auto s = check_pass([] { return convert_graph(ElementType::f32, true); }, pass,
                      [] { return convert_graph(ElementType::f32, false); });
  EXPECT_TRUE(s.ok()) << s.error().str();
}

TEST(PassHelper, EliminateNopConvertLeavesRealConverts) {
  auto pass = eliminate_nop_convert();
  auto s = check_pass_unchanged([] { return convert_graph(ElementType::f16, true); }, pass);
  EXPECT_TRUE(s.ok()) << s.error().str();
  EXPECT_NE(pass.log().back().find("skipped: converts f32 to f16"), std::string::npos);
}

TEST(PassHelper, MiniFixEmbdAxisWithAndWithoutConvert) {
  for (bool f16 : {false, true}) {
    auto pass = mini_fix_embd_axis();
    PassTestOptions o = token_options();
    o.same_semantics = false;  // the pass moves the token axis on purpose
    auto s = check_pass([&] { return embd_graph({.f16_table = f16}).model; }, pass,
                        [&] { return embd_graph({.f16_table = f16, .unsqueeze_axis = 1}).model; }, o);
    EXPECT_TRUE(s.ok()) << "f16=" << f16 << ": " << s.error().str();
  }
}

TEST(PassHelper, MiniFixEmbdAxisIgnoresOtherLookups) {
  auto pass = mini_fix_embd_axis();
  auto s = check_pass_unchanged([] { return embd_graph({.indices = "inp_pos"}).model; }, pass, token_options());
  EXPECT_TRUE(s.ok()) << s.error().str();
}

TEST(PassHelper, ReportsDifferences) {
  auto pass = mini_fix_embd_axis();
  PassTestOptions o = token_options();
  o.same_semantics = false;
  // expected graph without the rt_info: the helper must notice
  auto no_rt = [] {
    auto g = embd_graph({.unsqueeze_axis = 1});
    g.unsqueeze->rt_info().clear();
    return std::move(g.model);
  };
  auto s = check_pass([] { return embd_graph().model; }, pass, no_rt, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("rt_info differs"), std::string::npos) << s.error().what;
  // expected graph with another friendly name
  auto renamed = [] {
    auto g = embd_graph({.unsqueeze_axis = 1});
    g.unsqueeze->set_name("other");
    return std::move(g.model);
  };
  s = check_pass([] { return embd_graph().model; }, pass, renamed, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("friendly names differ"), std::string::npos);
  // same structure, but the semantics check is on: before [1,T,4] vs after [T,1,4] differ
  s = check_pass([] { return embd_graph().model; }, pass, [] { return embd_graph({.unsqueeze_axis = 1}).model; },
                 token_options());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("after vs before"), std::string::npos) << s.error().what;
  // a pass that must not fire but does
  s = check_pass_unchanged([] { return embd_graph().model; }, pass, token_options());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("reported a change"), std::string::npos);
}

TEST(PassHelper, StatefulGraphsGetInitialState) {
  // ReadValue without an init input: the runs need options.state
  ir::VariableAttrs var{"cache", ElementType::f32, ir::Shape{2}};
  auto build = [var](bool with_convert) {
    auto rv = ir::ops::read_value(var);
    rv->set_name("rv");
    auto x = ir::ops::parameter(ElementType::f32, {2}, "x");
    ir::Value v = rv;
    if (with_convert) v = ir::ops::convert(rv, ElementType::f32);
    auto sum = ir::ops::add(v, x);
    sum->set_name("sum");
    return ir::Model({ir::ops::result(sum, "out")}, {x}, {ir::ops::assign(sum, var)});
  };
  auto pass = eliminate_nop_convert();
  PassTestOptions o;
  auto s = check_pass([&] { return build(true); }, pass, [&] { return build(false); }, o);
  ASSERT_FALSE(s.ok());  // no state: the evaluation says so
  EXPECT_NE(s.error().what.find("variable 'cache' has no value"), std::string::npos) << s.error().what;
  o.state["cache"] = ir::Tensor::f32({2}, {1, 2});
  s = check_pass([&] { return build(true); }, pass, [&] { return build(false); }, o);
  EXPECT_TRUE(s.ok()) << s.error().str();
}
