#include "ir/printer.h"

#include <sstream>

namespace ggflow::ir {

namespace {
struct FieldPrinter {
  std::ostringstream& os;
  bool symbols;
  bool first = true;
  void key(const char* k) { os << (first ? "" : ", ") << k << "="; first = false; }
  void operator()(const char* k, bool v) { key(k); os << (v ? "true" : "false"); }
  void operator()(const char* k, int64_t v) { key(k); os << v; }
  void operator()(const char* k, float v) { key(k); os << v; }
  void operator()(const char* k, const std::string& v) { key(k); os << '"' << v << '"'; }
  void operator()(const char* k, const std::vector<int64_t>& v) {
    key(k);
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << "]";
  }
  void operator()(const char* k, ElementType t) { key(k); os << to_string(t); }
  void operator()(const char* k, GeluMode m) { key(k); os << to_string(m); }
  void operator()(const char* k, RopeMode m) { key(k); os << to_string(m); }
  void operator()(const char* k, const Shape& s) {
    key(k);
    if (symbols || !s.rank_known()) { os << s.str(); return; }
    os << "[";
    for (size_t i = 0; i < s.rank(); ++i) os << (i ? "," : "") << (s[i].is_static() ? std::to_string(s[i].value()) : "?");
    os << "]";
  }
  void operator()(const char* k, const Tensor& t) { key(k); os << t.summary(); }
};

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}
}  // namespace

std::string attrs_text(const Node& node, bool symbols) {
  std::ostringstream os;
  FieldPrinter p{os, symbols};
  std::visit([&](const auto& a) { a.fields(p); }, node.any_attrs());
  std::string s = os.str();
  return s.empty() ? s : "{" + s + "}";
}

std::string node_line(const Node& n, const PrintOptions& opt) {
  std::ostringstream os;
  os << n.name() << " = " << n.type_name() << "(";
  for (size_t i = 0; i < n.n_inputs(); ++i) {
    const Value& v = n.input(i);
    os << (i ? ", " : "") << v.node->name();
    if (v.index) os << ":" << v.index;
  }
  os << ") ->";
  if (n.n_outputs() == 0) os << " ()";
  for (size_t i = 0; i < n.n_outputs(); ++i) os << (i ? ", " : " ") << to_string(n.out_type(i)) << n.out_shape(i).str();
  std::string a = attrs_text(n);
  if (!opt.constants_values && n.type() == OpType::Constant) {
    const Tensor& t = n.attrs<ConstantAttrs>().value;
    a = "{" + std::string(to_string(t.type())) + "}";
  }
  if (!a.empty()) os << " " << a;
  for (size_t i = 0; i < n.n_outputs(); ++i) {
    if (n.out_names(i).empty()) continue;
    os << " names" << (n.n_outputs() > 1 ? ":" + std::to_string(i) : "") << "={";
    bool f = true;
    for (const auto& s : n.out_names(i)) { os << (f ? "" : ",") << s; f = false; }
    os << "}";
  }
  if (opt.rt_info && !n.rt_info().empty()) {
    os << " rt={";
    bool f = true;
    for (const auto& [k, v] : n.rt_info()) { os << (f ? "" : ", ") << k << "=" << to_string(v); f = false; }
    os << "}";
  }
  if (n.error()) os << "  !! " << n.error()->what;
  return os.str();
}

std::string to_text(const Model& model, const PrintOptions& opt) {
  std::ostringstream os;
  os << "model '" << model.name() << "': " << model.parameters().size() << " parameters, "
     << model.results().size() << " results, " << model.sinks().size() << " sinks\n";
  auto order = model.ordered();
  if (!order) return os.str() + "!! " + order.error().what + "\n";
  for (const NodePtr& n : *order) os << node_line(*n, opt) << "\n";
  return os.str();
}

std::string to_dot(const Model& model, const PrintOptions& opt) {
  std::ostringstream os;
  os << "digraph \"" << dot_escape(model.name()) << "\" {\n  node [shape=box, fontname=\"monospace\"];\n";
  auto order = model.ordered();
  if (!order) return os.str() + "  // " + dot_escape(order.error().what) + "\n}\n";
  for (const NodePtr& n : *order) {
    std::string label = n->name() + "\\n" + std::string(n->type_name());
    std::string a = attrs_text(*n);
    if (n->type() == OpType::Constant && !opt.constants_values) a.clear();
    if (!a.empty()) label += "\\n" + dot_escape(a);
    const char* style = n->type() == OpType::Parameter ? ", shape=ellipse, style=filled, fillcolor=lightblue"
                        : n->type() == OpType::Result  ? ", shape=ellipse, style=filled, fillcolor=lightgreen"
                        : n->type() == OpType::Constant ? ", style=filled, fillcolor=lightgrey"
                        : n->error()                   ? ", style=filled, fillcolor=salmon"
                                                       : "";
    os << "  n" << n->id() << " [label=\"" << dot_escape(n->name()) << (label.substr(n->name().size())) << "\"" << style << "];\n";
    for (size_t i = 0; i < n->n_inputs(); ++i) {
      const Value& v = n->input(i);
      os << "  n" << v.node->id() << " -> n" << n->id() << " [label=\"" << to_string(v.type()) << v.shape().str()
         << (v.index ? " :" + std::to_string(v.index) : "") << "\"];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace ggflow::ir
