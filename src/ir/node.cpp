#include "ir/node.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "base/check.h"
#include "ir/infer_ctx.h"
#include "ir/op_registry.h"

namespace ggflow::ir {
namespace {
std::atomic<uint64_t> g_next_node_id{1};
}

std::string_view to_string(OpType t) { return op_def(t).name; }

std::optional<OpType> op_type_from_name(std::string_view name) {
#define X(n, a, mi, ma) \
  if (name == #n) return OpType::n;
  GGFLOW_IR_OPS(X)
#undef X
  return std::nullopt;
}

std::string to_string(const RtValue& v) {
  struct V {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { std::ostringstream os; os << d; return os.str(); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
  };
  return std::visit(V{}, v);
}

ElementType Value::type() const {
  return index < node->n_outputs() ? node->out_type(index) : ElementType::undefined;
}
const Shape& Value::shape() const {
  static const Shape kUnknown = Shape::dynamic_rank();
  return index < node->n_outputs() ? node->out_shape(index) : kUnknown;
}

Node::~Node() {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Value& v = inputs_[i];
    if (!v.node || v.index >= v.node->outputs_.size()) continue;
    auto& cs = v.node->outputs_[v.index].consumers;
    std::erase_if(cs, [&](const Consumer& c) { return c.node == this && c.input == i; });
  }
}

std::string Node::describe() const { return "node '" + name_ + "' (" + std::string(type_name()) + ")"; }

void Node::set_input(size_t i, Value v) {
  GGFLOW_CHECK(i < inputs_.size(), "set_input: index out of range");
  GGFLOW_CHECK(v.node != nullptr, "set_input: null producer");
  Value& old = inputs_[i];
  if (old.node && old.index < old.node->outputs_.size()) {
    auto& cs = old.node->outputs_[old.index].consumers;
    std::erase_if(cs, [&](const Consumer& c) { return c.node == this && c.input == i; });
  }
  if (v.index < v.node->outputs_.size()) v.node->outputs_[v.index].consumers.push_back({this, i});
  inputs_[i] = std::move(v);
}

size_t Node::consumer_count() const {
  size_t n = 0;
  for (const Output& o : outputs_) n += o.consumers.size();
  return n;
}

Symbol Node::own_symbol(uint32_t key) {
  auto it = own_symbols_.find(key);
  if (it != own_symbols_.end()) return it->second;
  Symbol s = Symbol::fresh();
  own_symbols_[key] = s;
  return s;
}

static size_t nominal_outputs(const Node& n) {
  if (n.type() == OpType::Assign) return 0;
  if (n.type() == OpType::VariadicSplit && std::holds_alternative<SplitAttrs>(n.any_attrs()))
    return n.attrs<SplitAttrs>().lengths.size();
  return 1;
}

Status Node::infer() {
  const OpDef& def = op_def(type_);
  auto set_error = [&](const Error& e) {
    error_ = Error{describe() + ": " + e.what, e.hint};
    size_t n = std::max(outputs_.size(), nominal_outputs(*this));
    outputs_.resize(n);
    for (Output& o : outputs_) {
      o.type = ElementType::undefined;
      o.shape = Shape::dynamic_rank();
    }
    return Status(*error_);
  };
  int n_in = static_cast<int>(inputs_.size());
  if (n_in < def.min_inputs || (def.max_inputs >= 0 && n_in > def.max_inputs))
    return set_error(fail("has " + std::to_string(n_in) + " inputs, expects " +
                          std::to_string(def.min_inputs) +
                          (def.max_inputs == def.min_inputs ? ""
                           : def.max_inputs < 0            ? " or more"
                                                           : " to " + std::to_string(def.max_inputs))));
  if (!def.attrs_ok(attrs_))
    return set_error(fail("has attributes of the wrong kind (variant index " +
                          std::to_string(attrs_.index()) + ")"));
  for (int i = 0; i < n_in; ++i) {
    const Value& v = inputs_[i];
    if (v.index >= v.node->n_outputs())
      return set_error(fail("input " + std::to_string(i) + " reads output " + std::to_string(v.index) +
                            " of " + v.node->describe() + ", which has " +
                            std::to_string(v.node->n_outputs()) + " outputs"));
    if (v.node->error_ || v.type() == ElementType::undefined)
      return set_error(fail("input " + std::to_string(i) + " comes from invalid " + v.node->describe(),
                            "fix that node first"));
  }
  InferCtx ctx(*this);
  auto r = def.infer(ctx);
  if (!r) return set_error(r.error());
  auto& ports = *r;
  if (outputs_.size() != ports.size()) outputs_.resize(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) {
    outputs_[i].type = ports[i].type;
    outputs_[i].shape = std::move(ports[i].shape);
  }
  error_.reset();
  return {};
}

NodePtr make_node(OpType type, std::vector<Value> inputs, AnyAttrs attrs, std::string name) {
  NodePtr n(new Node());
  n->type_ = type;
  n->id_ = g_next_node_id.fetch_add(1);
  n->default_name_ = name.empty();
  n->name_ = name.empty() ? std::string(to_string(type)) + "_" + std::to_string(n->id_) : std::move(name);
  const OpDef& def = op_def(type);
  n->attrs_ = (std::holds_alternative<NoAttrs>(attrs) && !def.attrs_ok(attrs)) ? def.default_attrs()
                                                                               : std::move(attrs);
  n->inputs_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    GGFLOW_CHECK(inputs[i].node != nullptr, "make_node: null input");
    n->inputs_[i] = inputs[i];
    Node* p = inputs[i].node.get();
    if (inputs[i].index < p->outputs_.size()) p->outputs_[inputs[i].index].consumers.push_back({n.get(), i});
  }
  (void)n->infer();
  return n;
}

}  // namespace ggflow::ir
