// The matcher on the GET_ROWS structure: optional Convert present and absent, a predicate that
// fails (with the reason), and the trace of Gather indices through an optional Squeeze to the
// Parameter named inp_tokens.
#include <gtest/gtest.h>

#include "embd_graph.h"
#include "pattern/matcher.h"

using namespace ggflow;
using namespace ggflow::pattern;
using ir::OpType;
using ggflow::pattern::testing::embd_graph;
using ggflow::pattern::testing::EmbdOptions;

namespace {
struct EmbdPattern {
  P tokens = parameter("inp_tokens");
  P indices = optional(OpType::Squeeze, tokens);
  P gather = op(OpType::Gather, {any(), indices},
                {attr<ir::GatherAttrs>("axis == 0", [](const ir::GatherAttrs& a) { return a.axis == 0; })});
  P convert = optional(OpType::Convert, gather);
  P unsqueeze = op(OpType::Unsqueeze, {convert});
};
}  // namespace

TEST(Matcher, OptionalConvertPresent) {
  auto g = embd_graph({.f16_table = true});
  EmbdPattern p;
  Matcher m(p.unsqueeze);
  ASSERT_TRUE(m.match(g.unsqueeze)) << m.why_not();
  const Match& r = m.result();
  EXPECT_EQ(r.node(p.unsqueeze), g.unsqueeze);
  ASSERT_TRUE(r.has(p.convert));
  EXPECT_EQ(r.node(p.convert), g.convert);
  EXPECT_EQ(r.node(p.gather), g.gather);
  EXPECT_EQ(r.node(p.indices), g.squeeze);
  EXPECT_EQ(r.node(p.tokens), g.tokens);
}

TEST(Matcher, OptionalConvertAbsent) {
  auto g = embd_graph();
  EmbdPattern p;
  Matcher m(p.unsqueeze);
  ASSERT_TRUE(m.match(g.unsqueeze)) << m.why_not();
  EXPECT_FALSE(m.result().has(p.convert));
  EXPECT_EQ(m.result().node(p.gather), g.gather);
  EXPECT_EQ(m.result().node(p.tokens), g.tokens);
  // the same pattern does not match other nodes
  EXPECT_FALSE(m.match(g.gather));
  EXPECT_NE(m.why_not().find("is not Unsqueeze"), std::string::npos) << m.why_not();
}

TEST(Matcher, TraceThroughOptionalSqueezeToNamedParameter) {
  EmbdPattern p;
  auto with = embd_graph({.squeeze = true});
  auto without = embd_graph({.squeeze = false});
  Matcher m(p.unsqueeze);
  ASSERT_TRUE(m.match(with.unsqueeze)) << m.why_not();
  EXPECT_TRUE(m.result().has(p.indices));  // the Squeeze is there
  ASSERT_TRUE(m.match(without.unsqueeze)) << m.why_not();
  EXPECT_FALSE(m.result().has(p.indices));  // indices straight from the Parameter
  EXPECT_EQ(m.result().node(p.tokens), without.tokens);
  // a longer chain: through(Convert, Reshape, Squeeze) to the parameter
  auto tok = ir::ops::parameter(ir::ElementType::i64, {1, 5}, "inp_tokens");
  auto chain = ir::ops::squeeze(ir::ops::convert(ir::ops::reshape(tok, {1, 1, 5}), ir::ElementType::i32), {0, 1});
  P tr = through({OpType::Squeeze, OpType::Convert, OpType::Reshape}, parameter("inp_tokens"));
  Matcher mt(tr);
  EXPECT_TRUE(mt.match(chain)) << mt.why_not();
  EXPECT_TRUE(mt.match(tok));  // zero hops
  auto other = ir::ops::exp(ir::ops::parameter(ir::ElementType::f32, {5}, "inp_tokens"));
  EXPECT_FALSE(mt.match(other));  // Exp is not a hop
}

TEST(Matcher, PredicateFailsWithAReason) {
  // Gather indices from inp_pos: the named-parameter predicate fails, and says where.
  auto g = embd_graph({.indices = "inp_pos"});
  EmbdPattern p;
  Matcher m(p.unsqueeze);
  EXPECT_FALSE(m.match(g.unsqueeze));
  EXPECT_NE(m.why_not().find("Gather 'get_rows' input 1: Squeeze 'tokens_sq' input 0: Parameter 'inp_pos' fails name == 'inp_tokens'"),
            std::string::npos)
      << m.why_not();
  // attribute predicate
  P gather1 = op(OpType::Gather, {any(), any()},
                 {attr<ir::GatherAttrs>("axis == 1", [](const ir::GatherAttrs& a) { return a.axis == 1; })});
  Matcher mg(gather1);
  EXPECT_FALSE(mg.match(g.gather));
  EXPECT_NE(mg.why_not().find("fails axis == 1"), std::string::npos);
}

TEST(Matcher, Predicates) {
  auto g = embd_graph();
  auto probe = [](P p, const ir::Value& v) { Matcher m(std::move(p)); return m.match(v); };
  EXPECT_TRUE(probe(any({consumers(1)}), g.gather));
  EXPECT_FALSE(probe(any({consumers(2)}), g.gather));
  EXPECT_TRUE(probe(any({element_type(ir::ElementType::f32), rank(2)}), g.gather));
  EXPECT_FALSE(probe(any({rank(3)}), g.gather));
  EXPECT_TRUE(probe(any({name("inp_embd")}), g.unsqueeze));  // tensor name
  EXPECT_TRUE(probe(op(OpType::Constant, {}, {}), ir::ops::const_i64({0, 1})));
  EXPECT_TRUE(probe(any({const_values({0, 1})}), ir::ops::const_i64({0, 1})));
  EXPECT_FALSE(probe(any({const_values({0, 2})}), ir::ops::const_i64({0, 1})));
  EXPECT_FALSE(probe(op(OpType::Gather, {any()}), g.gather));  // input count
  EXPECT_TRUE(probe(op_any_of({OpType::Add, OpType::Gather}, {any(), any()}), g.gather));
  // a pattern node used twice must match the same value
  auto x = ir::ops::parameter(ir::ElementType::f32, {2}, "x");
  auto y = ir::ops::parameter(ir::ElementType::f32, {2}, "y");
  P same = any();
  P sq = op(OpType::Multiply, {same, same});
  EXPECT_TRUE(probe(sq, ir::ops::multiply(x, x)));
  EXPECT_FALSE(probe(sq, ir::ops::multiply(x, y)));
}
