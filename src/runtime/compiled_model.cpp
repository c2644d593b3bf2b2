#include "runtime/compiled_model.h"

#include <cstdlib>
#include <unordered_map>

#include "ir/op_registry.h"

namespace ggflow::runtime {

Result<std::unique_ptr<CompiledModel>> compile_ref(ir::Model model);                              // ref_executor.cpp
Result<std::unique_ptr<CompiledModel>> compile_cpu(ir::Model model, const CompileOptions& options);  // cpu_executor.cpp

bool kv_poison_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GGFLOW_KV_POISON");
    return v != nullptr && *v != 0 && std::string_view(v) != "0";
  }();
  return on;
}

Result<Executor> executor_from_name(std::string_view name) {
  if (name == "cpu") return Executor::cpu;
  if (name == "ref") return Executor::ref;
  return make_error("unknown executor '" + std::string(name) + "'", "use --executor cpu or ref");
}

const char* to_string(Executor e) { return e == Executor::cpu ? "cpu" : "ref"; }

namespace {
// The parameter whose buffer the value `v` is, following aliased outputs back to their inputs
// and views (Reshape/Squeeze/Unsqueeze) back to their data; nullptr when it is not a parameter's.
const ir::Node* written_parameter(ir::Value v) {
  for (;;) {
    const ir::Node& n = *v.node;
    if (n.type() == ir::OpType::Parameter) return &n;
    bool next = false;
    for (const ir::OutputAlias& a : ir::op_aliases(n.type()))
      if (a.output == v.index) v = n.input(a.input), next = true;
    if (next) continue;
    if (n.type() == ir::OpType::Reshape || n.type() == ir::OpType::Squeeze || n.type() == ir::OpType::Unsqueeze) {
      v = n.input(0);
      continue;
    }
    return nullptr;
  }
}

std::string names(const ir::Model& m, const std::vector<size_t>& idx, bool params) {
  std::string s;
  for (size_t i : idx) s += (s.empty() ? "" : ", ") + (params ? m.parameters()[i] : m.results()[i])->name();
  return s;
}
}  // namespace

Result<Signature> read_signature(const ir::Model& m) {
  Signature sig;
  std::unordered_map<const ir::Node*, size_t> param_index, cache_of;
  for (size_t i = 0; i < m.parameters().size(); ++i) param_index[m.parameters()[i].get()] = i;
  std::vector<bool> is_cache_out(m.results().size(), false);
  for (size_t r = 0; r < m.results().size(); ++r) {
    const ir::Node* p = written_parameter(m.results()[r]->input(0));
    if (!p || !param_index.count(p)) continue;
    // Only a value some op wrote is a cache output; a Result that passes a parameter through is not.
    if (m.results()[r]->input(0).node.get() == p) continue;
    Signature::Cache c;
    c.name = p->name();
    c.param = param_index.at(p);
    c.result = r;
    c.type = p->out_type();
    const ir::Shape& s = p->out_shape();
    if (!s.rank_known()) return make_error("cache '" + c.name + "' has an unknown rank", "give the cache parameter a shape");
    for (size_t a = 0; a < s.rank(); ++a) {
      if (s[a].is_static()) {
        c.shape.push_back(s[a].value());
        continue;
      }
      if (c.dynamic_axis >= 0)
        return make_error("cache '" + c.name + "' " + s.str() + " has more than one dynamic axis",
                          "a cache grows along one axis (context rows or blocks)");
      for (size_t b = 0; b < a; ++b)
        if (!s[b].is(1))
          return make_error("cache '" + c.name + "' " + s.str() + " grows along axis " + std::to_string(a) +
                                " after a non-1 axis", "put the growing axis first (after singletons)");
      c.dynamic_axis = static_cast<int>(a);
      c.shape.push_back(0);
    }
    cache_of[p] = sig.caches.size();
    is_cache_out[r] = true;
    sig.caches.push_back(std::move(c));
  }
  for (size_t i = 0; i < m.parameters().size(); ++i)
    if (!cache_of.count(m.parameters()[i].get())) sig.inputs.push_back(i);
  for (size_t r = 0; r < m.results().size(); ++r)
    if (!is_cache_out[r]) sig.outputs.push_back(r);
  return sig;
}

Result<size_t> Signature::input(const ir::Model& m, std::string_view name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (m.parameters()[inputs[i]]->name() == name) return i;
  return make_error("the model has no input '" + std::string(name) + "'", "its inputs: " + names(m, inputs, true));
}

Result<size_t> Signature::output(const ir::Model& m, std::string_view name) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (m.results()[outputs[i]]->name() == name) return i;
  return make_error("the model has no output '" + std::string(name) + "'", "its outputs: " + names(m, outputs, false));
}

Status CompiledModel::bind_inputs(std::initializer_list<std::pair<size_t*, std::string_view>> inputs) const {
  for (const auto& [slot, name] : inputs) {
    auto i = input(name);
    if (!i) return i.error();
    *slot = *i;
  }
  return {};
}

Result<std::unique_ptr<CompiledModel>> compile(ir::Model model, const CompileOptions& options) {
  switch (options.executor) {
    case Executor::ref: return compile_ref(std::move(model));
    case Executor::cpu: return compile_cpu(std::move(model), options);
  }
  return make_error("unknown executor");
}

}  // namespace ggflow::runtime
