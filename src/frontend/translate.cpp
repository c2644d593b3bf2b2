#include "frontend/translate.h"

#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Error TranslateContext::error(const std::string& what, const std::string& hint) const {
  return make_error("ggml " + std::string(to_string(t_->op)) + " '" + t_->name + "' (#" + std::to_string(t_->id) + "): " + what, hint);
}

Result<ir::NodePtr> TranslateContext::reshape_to(const ir::Value& v, const ir::Shape& want) {
  const ir::Shape& in = v.shape();
  std::vector<int64_t> target;
  int minus_one = 0;
  for (size_t i = 0; i < want.rank(); ++i) {
    const ir::Dim& d = want[i];
    if (in.rank_known() && i < in.rank() && in[i] == d) target.push_back(0);
    else if (d.is_dynamic()) target.push_back(-1), ++minus_one;
    else target.push_back(d.value());
  }
  if (minus_one > 1)
    return error("reshape " + in.str() + " -> " + want.str() + " moves two run-time lengths", "reshape in two steps");
  return ir::ops::reshape(v, target, /*special_zero=*/true);
}

namespace {

std::string check_shape(const ir::Value& v, const ir::Shape& want) {
  if (v.node->error()) return v.node->error()->what;
  const ir::Shape& got = v.shape();
  bool ok = got.rank_known() && got.rank() == want.rank();
  for (size_t i = 0; ok && i < got.rank(); ++i) ok = got[i] == want[i];
  if (ok) return {};
  return "the IR infers " + std::string(to_string(v.type())) + got.str() + ", GGML says " + want.str();
}

}  // namespace

Result<ir::Model> translate(const GgmlGraph& g) {
  if (!g.status()) return g.status().error();
  SymbolMap syms(g);
  TranslateContext c(g, syms);
  auto& values = c.values();
  values.resize(g.tensors().size());
  std::vector<ir::NodePtr> params;
  auto owner = g.owner();
  for (const GgmlTensor& t : g.tensors()) {
    c.set_current(&t);
    auto ty = ir_type(t.type);
    if (t.leaf == LeafKind::input) {
      if (!ty || ir::is_block(*ty)) return c.error("input type " + std::string(gguf::traits(t.type).name) + " is not a plain type");
      auto p = ir::ops::parameter(*ty, c.out_shape(), t.name);
      params.push_back(p);
      values[t.id] = p;
      continue;
    }
    if (t.leaf == LeafKind::weight) {
      if (!ty) return c.error("weight type " + std::string(gguf::traits(t.type).name) + " is not supported by the IR",
                              "re-quantize the model to a supported type (f32, f16, bf16, q4_0..q8_0, k-quants)");
      ir::Shape s = c.out_shape();
      auto tensor = ir::Tensor::view(*ty, s.to_vector(), owner, t.data);
      if (!tensor) return c.error(tensor.error().what);
      values[t.id] = ir::ops::constant(*tensor, t.name);
      continue;
    }
    TranslateFn fn = translator(t.op);
    if (!fn) return c.error("no translator");
    uint64_t first = ir::ops::scalar_i64(0)->id();  // nodes made from here on belong to t
    auto v = fn(c);
    if (!v) return v.error();
    if (v->node->id() > first) v->node->set_name(t.name);
    if (auto e = check_shape(*v, c.out_shape()); !e.empty()) return c.error(e, "a translator bug: please report it");
    values[t.id] = *v;
  }
  std::vector<ir::NodePtr> results;
  for (const GgmlOutput& o : g.outputs()) {
    auto r = ir::ops::result(values[o.id], o.name);
    r->out_names().insert(o.name);
    results.push_back(r);
  }
  ir::Model m(std::move(results), std::move(params), {}, "ggml");
  if (auto s = m.infer(); !s) return s.error();
  return m;
}

}  // namespace ggflow::frontend
