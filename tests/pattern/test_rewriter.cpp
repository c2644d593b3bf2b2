// Rewriter edits, MatcherPass outcomes and the PassManager (verification after each pass, dumps).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "embd_graph.h"
#include "ir/printer.h"
#include "pattern/pass_manager.h"

using namespace ggflow;
using namespace ggflow::pattern;
using ir::OpType;
using ggflow::pattern::testing::embd_graph;

TEST(Rewriter, ReplaceNodeKeepsConsumersNamesAndRtInfo) {
  auto x = ir::ops::parameter(ir::ElementType::f32, {2, 3}, "x");
  auto e = ir::ops::exp(x);
  e->set_name("act");
  e->out_names().insert("act_out");
  e->rt_info()["layer"] = int64_t{3};
  auto c1 = ir::ops::add(e, e);
  auto c2 = ir::ops::tanh(e);
  ir::Model m({ir::ops::result(c1), ir::ops::result(c2)}, {x});
  Rewriter rw(m);
  auto t = rw.make(OpType::Sin, {x});
  t->rt_info()["layer"] = int64_t{7};  // its own entry wins
  t->rt_info()["mine"] = true;
  ASSERT_TRUE(rw.replace_node(e, t).ok());
  EXPECT_EQ(c1->input(0).node, t);
  EXPECT_EQ(c1->input(1).node, t);
  EXPECT_EQ(c2->input(0).node, t);
  EXPECT_EQ(t->consumers().size(), 3u);
  EXPECT_EQ(e->consumers().size(), 0u);
  EXPECT_EQ(t->name(), "act");
  EXPECT_EQ(t->out_names(), (std::set<std::string>{"act_out"}));
  EXPECT_TRUE(e->out_names().empty());
  EXPECT_EQ(std::get<int64_t>(t->rt_info().at("layer")), 7);
  EXPECT_TRUE(std::get<bool>(t->rt_info().at("mine")));
  EXPECT_TRUE(ir::verify(m).ok());
  // output counts must agree
  auto sp = ir::ops::variadic_split(x, 1, {1, 2});
  EXPECT_FALSE(rw.replace_node(t, sp).ok());
}

TEST(Rewriter, ReplaceValueAroundItselfAndModelLists) {
  auto x = ir::ops::parameter(ir::ElementType::f32, {2}, "x");
  auto y = ir::ops::exp(x);
  auto r = ir::ops::result(y, "out");
  ir::Model m({r}, {x});
  Rewriter rw(m);
  // insert a node after y: the new node reads y, every other consumer reads the new node
  auto after = rw.make(OpType::Tanh, {y});
  ASSERT_TRUE(rw.replace_value(y, after).ok());
  EXPECT_EQ(after->input(0).node, y);
  EXPECT_EQ(r->input(0).node, after);
  // replacing a parameter updates the model's parameter list
  auto x2 = ir::ops::parameter(ir::ElementType::f32, {2}, "x2");
  ReplaceOptions keep_name;
  keep_name.copy_name = false;
  ASSERT_TRUE(rw.replace_node(x, x2, keep_name).ok());
  EXPECT_EQ(m.parameters()[0], x2);
  EXPECT_EQ(m.parameters()[0]->name(), "x2");
  ASSERT_TRUE(m.infer().ok());
  EXPECT_TRUE(ir::verify(m).ok());
  EXPECT_GT(rw.edits(), 0u);
}

TEST(MatcherPass, AppliesSkipsAndLogs) {
  auto g = embd_graph();
  int calls = 0;
  MatcherPass skipper("Skipper", op(OpType::Unsqueeze, {any()}), [&](const Match&, Rewriter&) {
    ++calls;
    return Outcome::skip("not today");
  });
  auto r = skipper.run(g.model);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(skipper.log().size(), 1u);
  EXPECT_EQ(skipper.log()[0], "Skipper: node 'inp_embd': skipped: not today");

  P root = op(OpType::Unsqueeze, {any()});
  MatcherPass liar("Liar", root, [&](const Match& m, Rewriter& rw) {
    rw.set_input(m.node(root), 0, g.gather);
    return Outcome::skip("edited anyway");
  });
  auto lr = liar.run(g.model);
  ASSERT_FALSE(lr.ok());
  EXPECT_NE(lr.error().what.find("edited the graph"), std::string::npos);

  MatcherPass near("Near", op(OpType::Unsqueeze, {op(OpType::Convert)}), [&](const Match&, Rewriter&) {
    return Outcome::done();
  });
  ASSERT_TRUE(near.run(g.model).ok());
  ASSERT_EQ(near.log().size(), 1u);
  EXPECT_NE(near.log()[0].find("no match: Unsqueeze 'inp_embd' input 0: Gather 'get_rows' is not Convert"), std::string::npos)
      << near.log()[0];
}

TEST(PassManager, VerifiesAfterEachPassAndNamesIt) {
  // a broken pass moves the token axis of one operand: [1,T,4] * [T,1,4] -> refused by the guard
  auto g = embd_graph();
  PassManager pm;
  pm.add<FunctionPass>("BreakAxis", [&](ir::Model& m) -> Result<bool> {
    Rewriter rw(m);
    auto wrong = rw.make(OpType::Unsqueeze, {g.gather}, ir::AxesAttrs{{1}}, g.unsqueeze);      // [T,1,4]
    auto add = rw.make(OpType::Add, {g.unsqueeze, wrong});                                      // [T,T,4]
    add->set_name("bad_add");
    auto consumer = g.unsqueeze->consumers()[0].node->shared_from_this();
    rw.set_input(consumer, 0, add);
    return true;
  });
  auto r = pm.run(g.model);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("after pass BreakAxis: node 'bad_add' (Add): broadcasting [1,?T,4] with [?T,1,4]"), std::string::npos)
      << r.error().what;
}

TEST(PassManager, DumpsTextAndDot) {
  auto dir = std::filesystem::temp_directory_path() / ("ggflow_pm_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  for (DumpFormat f : {DumpFormat::text, DumpFormat::dot}) {
    auto g = embd_graph();
    PassManagerOptions opt;
    opt.dump = f;
    opt.dump_dir = dir.string();
    PassManager pm(opt);
    pm.add<FunctionPass>("Noop", [](ir::Model&) -> Result<bool> { return false; });
    auto r = pm.run(g.model);
    ASSERT_TRUE(r.ok()) << r.error().str();
    EXPECT_FALSE(*r);
  }
  std::ifstream in(dir / "01_Noop.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("inp_embd = Unsqueeze(get_rows)"), std::string::npos) << ss.str();
  EXPECT_TRUE(std::filesystem::exists(dir / "00_input.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "00_input.dot"));
  EXPECT_TRUE(std::filesystem::exists(dir / "01_Noop.dot"));
  std::filesystem::remove_all(dir);
}
