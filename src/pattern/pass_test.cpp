#include "pattern/pass_test.h"

#include <cmath>
#include <random>
#include <unordered_map>

#include "ir/printer.h"
#include "pattern/pass_manager.h"

namespace ggflow::pattern {

namespace {
using ir::Node;

class Comparer {
 public:
  Status nodes(const Node& a, const Node& e) {
    auto it = pairs_.find(&a);
    if (it != pairs_.end()) {
      if (it->second == &e) return {};
      return diff(a, e, "the graph reuses a node where the expected graph has another");
    }
    if (back_.count(&e)) return diff(a, e, "the expected graph reuses a node where the graph has another");
    pairs_[&a] = &e;
    back_[&e] = &a;
    if (a.type() != e.type()) return diff(a, e, "op types differ");
    if (a.has_default_name() != e.has_default_name() || (!a.has_default_name() && a.name() != e.name()))
      return diff(a, e, "friendly names differ");
    if (ir::attrs_text(a, false) != ir::attrs_text(e, false)) return diff(a, e, "attributes differ");
    if (a.rt_info() != e.rt_info()) return diff(a, e, "rt_info differs");
    if (a.n_outputs() != e.n_outputs()) return diff(a, e, "output counts differ");
    for (size_t i = 0; i < a.n_outputs(); ++i) {
      if (a.out_type(i) != e.out_type(i)) return diff(a, e, "output types differ");
      if (a.out_names(i) != e.out_names(i)) return diff(a, e, "tensor names differ");
      if (auto s = shapes(a.out_shape(i), e.out_shape(i)); !s) return diff(a, e, "output shapes differ");
    }
    if (a.n_inputs() != e.n_inputs()) return diff(a, e, "input counts differ");
    for (size_t i = 0; i < a.n_inputs(); ++i) {
      if (a.input(i).index != e.input(i).index) return diff(a, e, "input " + std::to_string(i) + " reads another output");
      if (auto s = nodes(*a.input(i).node, *e.input(i).node); !s)
        return make_error(s.error().what + "\n  (input " + std::to_string(i) + " of '" + a.name() + "')");
    }
    return {};
  }

 private:
  Status shapes(const ir::Shape& a, const ir::Shape& e) {
    if (a.rank_known() != e.rank_known() || a.rank() != e.rank()) return make_error("rank");
    for (size_t i = 0; i < a.rank(); ++i) {
      if (a[i].is_static() != e[i].is_static()) return make_error("dim");
      if (a[i].is_static()) {
        if (a[i].value() != e[i].value()) return make_error("dim");
        continue;
      }
      uint32_t x = a[i].symbol().id(), y = e[i].symbol().id();
      auto [it, ins] = sym_.try_emplace(x, y);
      auto [jt, jns] = sym_back_.try_emplace(y, x);
      if (it->second != y || jt->second != x) return make_error("symbol");
    }
    return {};
  }
  static Status diff(const Node& a, const Node& e, const std::string& what) {
    return make_error("graphs differ: " + what + "\n  got:      " + ir::node_line(a) + "\n  expected: " + ir::node_line(e));
  }
  std::unordered_map<const Node*, const Node*> pairs_, back_;
  std::unordered_map<uint32_t, uint32_t> sym_, sym_back_;
};
}  // namespace

Status compare_models(const ir::Model& a, const ir::Model& e) {
  auto count = [](const char* what, size_t x, size_t y) -> Status {
    if (x == y) return {};
    return make_error(std::string("graphs differ: ") + std::to_string(x) + " " + what + ", expected " + std::to_string(y));
  };
  if (auto s = count("parameters", a.parameters().size(), e.parameters().size()); !s) return s;
  if (auto s = count("results", a.results().size(), e.results().size()); !s) return s;
  if (auto s = count("sinks", a.sinks().size(), e.sinks().size()); !s) return s;
  Comparer c;
  for (size_t i = 0; i < a.results().size(); ++i)
    if (auto s = c.nodes(*a.results()[i], *e.results()[i]); !s) return s;
  for (size_t i = 0; i < a.sinks().size(); ++i)
    if (auto s = c.nodes(*a.sinks()[i], *e.sinks()[i]); !s) return s;
  for (size_t i = 0; i < a.parameters().size(); ++i)
    if (auto s = c.nodes(*a.parameters()[i], *e.parameters()[i]); !s) return s;
  if (a.rt_info() != e.rt_info()) return make_error("graphs differ: model rt_info differs");
  return {};
}

std::map<std::string, ir::Tensor> random_inputs(const ir::Model& model, uint64_t seed, const PassTestOptions& opt) {
  std::mt19937_64 rng(seed);
  std::map<std::string, ir::Tensor> out;
  for (const ir::NodePtr& p : model.parameters()) {
    const ir::Shape& s = p->out_shape();
    std::vector<int64_t> shape;
    for (const ir::Dim& d : s.dims()) {
      if (d.is_static()) { shape.push_back(d.value()); continue; }
      auto it = opt.dims.find(d.symbol().name());
      shape.push_back(it != opt.dims.end() ? it->second : opt.default_dim);
    }
    ir::ElementType t = p->out_type();
    int64_t n = ir::product(shape);
    if (ir::is_float(t)) {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> v(n);
      for (float& x : v) x = u(rng);
      out[p->name()] = ir::Tensor::from_f32(t, shape, v);
    } else {
      auto it = opt.int_ranges.find(p->name());
      auto [lo, hi] = it != opt.int_ranges.end() ? it->second : std::pair<int64_t, int64_t>{0, 4};
      if (t == ir::ElementType::boolean) { lo = 0; hi = 2; }
      std::uniform_int_distribution<int64_t> u(lo, hi - 1);
      std::vector<int64_t> v(n);
      for (int64_t& x : v) x = u(rng);
      out[p->name()] = ir::Tensor::from_i64(t, shape, v);
    }
  }
  return out;
}

Status compare_outputs(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b, float tol,
                       const std::string& what) {
  if (a.size() != b.size()) return make_error(what + ": output counts differ");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].type() != b[i].type() || a[i].shape() != b[i].shape())
      return make_error(what + ": output " + std::to_string(i) + " is " + a[i].summary() + " vs " + b[i].summary());
    if (tol == 0.0f) {
      if (!a[i].same_bytes(b[i])) return make_error(what + ": output " + std::to_string(i) + " differs: " + a[i].summary() + " vs " + b[i].summary());
      continue;
    }
    auto x = a[i].to_f32(), y = b[i].to_f32();
    for (size_t k = 0; k < x.size(); ++k)
      if (!(std::fabs(x[k] - y[k]) <= tol))
        return make_error(what + ": output " + std::to_string(i) + " element " + std::to_string(k) + ": " +
                          std::to_string(x[k]) + " vs " + std::to_string(y[k]));
  }
  return {};
}

static Result<std::vector<ir::Tensor>> run_model(const ir::Model& m, const std::map<std::string, ir::Tensor>& in,
                                                  const PassTestOptions& opt) {
  ir::StateStore st{opt.state};
  return ir::evaluate_named(m, in, &st);
}

static Result<bool> run_pass(ir::Model& m, Pass& pass) {
  if (auto s = ir::verify(m); !s) return make_error("the graph before the pass is invalid: " + s.error().what, s.error().hint);
  PassManager pm;
  struct Borrowed : Pass {
    Pass& p;
    explicit Borrowed(Pass& q) : p(q) {}
    std::string name() const override { return p.name(); }
    Result<bool> run(ir::Model& model) override {
      auto r = p.run(model);
      log_ = p.log();
      return r;
    }
  };
  pm.add<Borrowed>(pass);
  return pm.run(m);
}

Status check_pass(const ModelFactory& before, Pass& pass, const ModelFactory& expected, const PassTestOptions& opt) {
  ir::Model m = before();
  ir::Model ref = before();
  ir::Model exp = expected();
  auto r = run_pass(m, pass);
  if (!r) return r.error();
  if (!*r) return make_error("pass " + pass.name() + " reported no change where a change was expected");
  if (auto s = ir::verify(exp); !s) return make_error("the expected graph is invalid: " + s.error().what, s.error().hint);
  if (auto s = compare_models(m, exp); !s)
    return make_error(s.error().what + "\n--- graph after " + pass.name() + ":\n" + ir::to_text(m) + "--- expected:\n" + ir::to_text(exp));
  for (int run = 0; run < opt.runs; ++run) {
    auto in = random_inputs(m, opt.seed + static_cast<uint64_t>(run), opt);
    auto got = run_model(m, in, opt);
    if (!got) return make_error("evaluating the graph after the pass: " + got.error().what, got.error().hint);
    auto want = run_model(exp, in, opt);
    if (!want) return make_error("evaluating the expected graph: " + want.error().what, want.error().hint);
    if (auto s = compare_outputs(*got, *want, opt.tolerance, "after vs expected"); !s) return s;
    if (opt.same_semantics) {
      auto old = run_model(ref, in, opt);
      if (!old) return make_error("evaluating the graph before the pass: " + old.error().what, old.error().hint);
      if (auto s = compare_outputs(*got, *old, opt.tolerance, "after vs before"); !s) return s;
    }
  }
  return {};
}

Status check_pass_unchanged(const ModelFactory& before, Pass& pass, const PassTestOptions& opt) {
  ir::Model m = before();
  ir::Model ref = before();
  auto r = run_pass(m, pass);
  if (!r) return r.error();
  if (*r) return make_error("pass " + pass.name() + " reported a change where none was expected\n" + ir::to_text(m));
  if (auto s = compare_models(m, ref); !s) return make_error("the graph changed: " + s.error().what);
  auto in = random_inputs(m, opt.seed, opt);
  auto got = run_model(m, in, opt);
  if (!got) return got.error();
  auto old = run_model(ref, in, opt);
  if (!old) return old.error();
  return compare_outputs(*got, *old, 0.0f, "after vs before");
}

}  // namespace ggflow::pattern
