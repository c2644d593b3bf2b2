// FuseRMSNormScale (fusion.h). Pattern, by structure:
//   Multiply(RMSNorm(x) [one input, one consumer], Constant w f32 [H])     (either operand order)
// -> RMSNorm(x, w) with the norm's eps, named after the Multiply (its consumers, tensor names and
// rt_info move to it). Skipped, with the reason logged: a norm that already has a gamma, a norm
// whose output something else also reads, a weight that is not a constant f32 vector of the row's
// length (a broadcast Multiply is not a per-element scale of the row).
#include "transforms/fusion/fusion.h"

#include "pattern/pattern.h"

namespace ggflow::transforms {

using namespace ggflow::pattern;

MatcherPass fuse_rmsnorm_scale() {
  P mul = op(ir::OpType::Multiply, {any(), any()});
  return MatcherPass("FuseRMSNormScale", mul, [mul](const Match& m, Rewriter& rw) {
    ir::NodePtr mn = m.node(mul);
    for (int i = 0; i < 2; ++i) {
      const ir::Value nv = mn->input(i), wv = mn->input(1 - i);
      if (nv.node->type() != ir::OpType::RMSNorm) continue;
      if (nv.node->inputs().size() != 1) return Outcome::skip("the RMSNorm already has a gamma input");
      if (nv.node->consumers().size() != 1) return Outcome::skip("the RMSNorm's output has other consumers");
      const ir::Shape& xs = nv.shape();
      if (wv.node->type() != ir::OpType::Constant || wv.type() != ir::ElementType::f32 || !wv.shape().is_static() ||
          wv.shape().rank() != 1 || !xs.rank_known() || xs.rank() < 1 || !xs[xs.rank() - 1].is_static() ||
          wv.shape()[0].value() != xs[xs.rank() - 1].value())
        return Outcome::skip("the other operand is not a constant f32 [H] matching the row length");
      if (nv.type() != ir::ElementType::f32 || ir::Value{mn, 0}.shape() != xs)
        return Outcome::skip("the Multiply broadcasts or converts the norm's output");
      auto fused = rw.make(ir::OpType::RMSNorm, {nv.node->input(0), wv}, nv.node->any_attrs(), mn);
      if (auto s = rw.replace_node(mn, fused); !s) return Outcome::skip(s.error().what);
      return Outcome::done();
    }
    return Outcome::skip("neither operand is an RMSNorm");
  });
}

Status fuse_for_execution(ir::Model& model, std::vector<std::string>* log, std::vector<std::string>* applied) {
  MatcherPass passes[] = {fuse_rmsnorm_scale()};
  for (MatcherPass& p : passes) {
    auto r = p.run(model);
    if (log) log->insert(log->end(), p.log().begin(), p.log().end());
    if (!r) return r.error();
    if (applied && *r) {
      size_t n = 0;
      for (const std::string& line : p.log()) n += line.ends_with(": applied");
      applied->push_back(p.name() + " x" + std::to_string(n));
    }
  }
  return {};
}

}  // namespace ggflow::transforms
