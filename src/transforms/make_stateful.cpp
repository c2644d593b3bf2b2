// MakeStateful (see make_stateful.h): ScatterUpdate into a cache Parameter -> ReadValue, Gather
// by beam_idx, Concat, Assign.
#include "transforms/make_stateful.h"

#include <algorithm>

#include "ir/ops.h"

namespace ggflow::transforms {

namespace o = ir::ops;

Result<bool> MakeStateful::run(ir::Model& m) {
  ir::NodePtr input_ids = m.parameter("input_ids"), beam_idx = m.parameter("beam_idx");
  if (!input_ids || !beam_idx)
    return make_error("MakeStateful: precondition failed: the model has no Parameter 'input_ids' / 'beam_idx'",
                      "run AdaptToGenAI first");
  auto order = m.ordered();
  if (!order) return order.error();
  std::vector<ir::NodePtr> writes;
  for (const auto& n : *order)
    if (n->type() == ir::OpType::ScatterUpdate && n->input(0).node->type() == ir::OpType::Parameter) writes.push_back(n);
  if (writes.empty()) {
    log_.push_back("MakeStateful: no ScatterUpdate into a cache Parameter: nothing to do");
    return false;
  }
  pattern::Rewriter rw(m);
  const ir::Symbol B = ir::Symbol::named("B"), P = ir::Symbol::named("P");
  auto batch = o::slice(o::shape_of(input_ids), {0}, {1}, {1}, {0});                      // i64 [1] = {B}
  for (const auto& w : writes) {
    ir::NodePtr cache = w->input(0).node;                                                  // f32 [1,1,KV,E]
    const ir::Shape& cs = cache->out_shape();
    if (cs.rank() != 4 || w->attrs<ir::AxisAttrs>().axis != 2 || !cs[3].is_static())
      return make_error("MakeStateful: precondition failed: " + w->describe() + " writes " + cache->describe() + " " +
                            cs.str() + " on axis " + std::to_string(w->attrs<ir::AxisAttrs>().axis),
                        "the raw cache must be [1,1,KV,E] written on axis 2 (the builder's SET_ROWS)");
    const int64_t E = cs[3].value();
    ir::VariableAttrs var{cache->name(), cache->out_type(), ir::Shape{B, 1, P, E}};
    auto init = o::broadcast(o::scalar_f32(0.0f), o::concat({batch, o::const_i64({1, 0, E})}, 0));  // [B,1,0,E]
    ir::NodePtr init_v = cache->out_type() == ir::ElementType::f32 ? init : o::convert(init, cache->out_type());
    auto past = o::read_value(var, ir::Value(init_v));                                    // [B,1,P,E]
    past->set_name(cache->name() + "_past");
    auto reordered = o::gather(past, beam_idx, 0);                                       // [B,1,P,E]
    auto kv = rw.make(ir::OpType::Concat, {reordered, w->input(2)}, ir::AxisAttrs{2});    // [B,1,P+T,E]
    auto assign = o::assign(kv, var);
    assign->set_name(cache->name() + "_assign");
    // the raw Result cache_X_out reads the write: drop it
    std::vector<ir::NodePtr> drop;
    for (const auto& c : w->consumers())
      if (c.node->type() == ir::OpType::Result) drop.push_back(c.node->shared_from_this());
    for (const auto& r : drop) std::erase(m.results(), r);
    if (auto s = rw.replace_node(w, kv); !s) return s.error();
    rw.remove_parameter(cache);
    rw.add_sink(assign);
    log_.push_back("MakeStateful: '" + cache->name() + "': ReadValue -> Gather(beam_idx) -> Concat -> Assign");
  }
  return true;
}

}  // namespace ggflow::transforms
