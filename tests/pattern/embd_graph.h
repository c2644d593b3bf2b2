// The GET_ROWS shape of DESIGN.md section 3, built for pattern tests:
//   inp_tokens i32 [1,1,1,T] -> Squeeze(0,1,2)? -> Gather(table, axis 0) -> Convert(f32)? -> Unsqueeze(axis 0)
#pragma once

#include "ir/model.h"
#include "ir/ops.h"

namespace ggflow::pattern::testing {

struct EmbdGraph {
  ir::NodePtr tokens, squeeze, table, gather, convert, unsqueeze;
  ir::Model model;
};

struct EmbdOptions {
  bool squeeze = true;          // indices pass through a Squeeze
  bool f16_table = false;       // the table is f16: a Convert follows the Gather
  std::string indices = "inp_tokens";
  int64_t unsqueeze_axis = 0;
};

inline EmbdGraph embd_graph(const EmbdOptions& o = {}) {
  using namespace ir;
  static const Symbol T = Symbol::named("T");
  EmbdGraph g;
  g.tokens = o.squeeze ? ops::parameter(ElementType::i32, {1, 1, 1, T}, o.indices)
                       : ops::parameter(ElementType::i32, {T}, o.indices);  // i32 [1,1,1,T] | [T]
  Value idx = g.tokens;
  if (o.squeeze) {
    g.squeeze = ops::squeeze(g.tokens, {0, 1, 2});                            // i32 [T]
    g.squeeze->set_name("tokens_sq");
    idx = g.squeeze;
  }
  std::vector<float> w(8 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i);
  Tensor tw = Tensor::f32({8, 4}, w);
  if (o.f16_table) tw = Tensor::from_f32(ElementType::f16, {8, 4}, w);
  g.table = ops::constant(tw, "token_embd.weight");                        // [V=8, H=4]
  g.gather = ops::gather(g.table, idx, 0);                                 // [T, 4]
  g.gather->set_name("get_rows");
  Value rows = g.gather;
  if (o.f16_table) {
    g.convert = ops::convert(g.gather, ElementType::f32);                  // f32 [T, 4]
    g.convert->set_name("get_rows_f32");
    rows = g.convert;
  }
  g.unsqueeze = ops::unsqueeze(rows, {o.unsqueeze_axis});                  // f32 [1, T, 4]
  g.unsqueeze->set_name("inp_embd");
  g.unsqueeze->out_names().insert("inp_embd");
  g.unsqueeze->rt_info()["origin"] = std::string("GET_ROWS");
  g.model = Model({ops::result(ops::multiply(g.unsqueeze, ops::scalar_f32(2.0f)), "out")}, {g.tokens});
  return g;
}

}  // namespace ggflow::pattern::testing
