// The text and DOT printers.
#include "helpers.h"
#include "ir/printer.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using ET = ElementType;

TEST(Printer, TextOneLinePerNode) {
  Symbol T = Symbol::named("T");
  auto tok = ops::parameter(ET::i32, {1, 1, 1, T}, "inp_tokens");
  auto sq = ops::squeeze(tok, {0, 1, 2});
  sq->set_name("tok_sq");
  auto table = ops::const_f32(std::vector<float>(12, 0.5f), std::vector<int64_t>{3, 4});
  table->set_name("token_embd");
  auto g = ops::gather(table, sq, 0);
  g->set_name("embd");
  g->out_names().insert("inp_embd");
  g->rt_info()["layer"] = int64_t{0};
  g->rt_info()["origin"] = std::string("GET_ROWS");
  auto u = ops::unsqueeze(g, {0});
  u->set_name("embd_4d");
  auto sp = ops::variadic_split(u, 2, {1, 3});
  sp->set_name("split");
  Model m({ops::result(Value(sp, 1), "out")}, {tok}, {}, "demo");
  std::string text = to_text(m);
  EXPECT_EQ(text,
            "model 'demo': 1 parameters, 1 results, 0 sinks\n"
            "inp_tokens = Parameter() -> i32[1,1,1,?T] {type=i32, shape=[1,1,1,?T]}\n"
            "token_embd = Constant() -> f32[3,4] {value=f32[3,4]{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, ...}}\n"
            "tok_sq = Squeeze(inp_tokens) -> i32[?T] {axes=[0,1,2]}\n"
            "embd = Gather(token_embd, tok_sq) -> f32[?T,4] {axis=0, batch_dims=0} names={inp_embd} "
            "rt={layer=0, origin=\"GET_ROWS\"}\n"
            "embd_4d = Unsqueeze(embd) -> f32[1,?T,4] {axes=[0]}\n"
            "split = VariadicSplit(embd_4d) -> f32[1,?T,1], f32[1,?T,3] {axis=2, lengths=[1,3]}\n"
            "out = Result(split:1) -> f32[1,?T,3]\n");
  PrintOptions no_values;
  no_values.constants_values = false;
  EXPECT_NE(to_text(m, no_values).find("token_embd = Constant() -> f32[3,4] {f32}"), std::string::npos);
  // an invalid node says why on its line
  auto bad = ops::add(g, ops::const_f32({1, 2, 3}));
  EXPECT_NE(node_line(*bad).find("!! node 'Add_"), std::string::npos);
}

TEST(Printer, Dot) {
  auto x = ops::parameter(ET::f32, {2, 3}, "x");
  auto t = ops::transpose(x, {1, 0});
  t->set_name("t\"q");
  Model m({ops::result(t, "y")}, {x}, {}, "g");
  std::string dot = to_dot(m);
  EXPECT_EQ(dot.rfind("digraph \"g\" {", 0), 0u);
  EXPECT_NE(dot.find("n" + std::to_string(x->id()) + " [label=\"x\\nParameter"), std::string::npos) << dot;
  EXPECT_NE(dot.find("t\\\"q\\nTranspose\\n{perm=[1,0]}"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n" + std::to_string(x->id()) + " -> n" + std::to_string(t->id()) + " [label=\"f32[2,3]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("fillcolor=lightgreen"), std::string::npos);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}
