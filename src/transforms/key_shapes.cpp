// key_shapes_markdown (layouts.h): one Markdown table of the key tensors' shapes, a column per
// layout, read from the converted graphs themselves (so docs/LAYOUTS.md cannot drift from the code).
#include <algorithm>
#include <cctype>
#include <map>

#include "transforms/layouts.h"
#include "transforms/lm_head.h"

namespace ggflow::transforms {

namespace {

// "f32 [?T,1,64]"; anonymous symbols ("?s24", numbered in creation order) print as "?" so that the
// table does not change when unrelated code creates more symbols.
std::string ty(const ir::Value& v) {
  std::string s = v.shape().str(), o;
  for (size_t i = 0; i < s.size(); ++i) {
    o += s[i];
    if (s[i] == '?' && i + 2 < s.size() && s[i + 1] == 's' && std::isdigit(static_cast<unsigned char>(s[i + 2]))) {
      size_t j = i + 2;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      i = j - 1;  // skip "s<digits>"
    }
  }
  return std::string(ir::to_string(v.type())) + " " + o;
}

std::vector<std::pair<std::string, std::string>> key_rows(const ir::Model& m) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& p : m.parameters()) {
    const std::string& n = p->name();
    bool later_layer = (n.rfind("cache_", 0) == 0 && n.find("_l0") == std::string::npos) ||
                       ((n.rfind("key_cache.", 0) == 0 || n.rfind("value_cache.", 0) == 0) &&
                        n != "key_cache.0" && n != "value_cache.0");
    if (!later_layer) rows.push_back({"input `" + n + "`", ty(p)});
  }
  auto order = m.ordered();
  if (!order) return rows;
  bool attn = false;
  for (const auto& n : *order) {
    const std::string& name = n->name();
    if (name == "inp_embd" || name == "Qcur-0" || name == "Kcur-0") rows.push_back({"`" + name + "`", ty(n)});
    if (n->type() == ir::OpType::ReadValue && name.find("_l0") != std::string::npos)
      rows.push_back({"state `" + n->attrs<ir::VariableAttrs>().id + "` (ReadValue)", ty(n)});
    if (!attn && (n->type() == ir::OpType::ScaledDotProductAttention || n->type() == ir::OpType::PagedAttention)) {
      attn = true;
      const char* in_names[] = {"q", "k", "v"};
      for (size_t i = 0; i < 3; ++i) rows.push_back({std::string("layer 0 attention ") + in_names[i], ty(n->input(i))});
      if (n->type() == ir::OpType::ScaledDotProductAttention && n->n_inputs() == 4) {
        rows.push_back({"layer 0 attention mask", ty(n->input(3))});
        const ir::Node& mk = *n->input(3).node;
        auto it = mk.rt_info().find("sliding_window");
        rows.push_back({"layer 0 sliding window", mk.type() == ir::OpType::Parameter ? "mask input " + mk.name()
                                                  : it == mk.rt_info().end()        ? "none"
                                                                                    : "mask: " + ir::to_string(it->second)});
      }
      if (n->type() == ir::OpType::PagedAttention) {
        const ir::Node& w = *n->input(11).node;
        std::string v = w.type() == ir::OpType::Constant ? std::to_string(w.attrs<ir::ConstantAttrs>().value.to_i64()[0]) : "?";
        rows.push_back({"layer 0 sliding window", "input 11: " + v});
      }
      rows.push_back({"layer 0 attention output", ty(ir::Value(n, 0))});
    }
  }
  for (const auto& r : m.results())
    if (r->name() == "logits") {
      if (ir::NodePtr head = lm_head(m)) rows.push_back({"LM head input (MatMul)", ty(head->input(0))});
      rows.push_back({"output `logits`", ty(r)});
    }
  return rows;
}

}  // namespace

std::string key_shapes_markdown(const std::string& label, const std::vector<std::pair<Layout, ir::Model>>& models) {
  std::vector<std::string> order;
  std::map<std::string, std::map<Layout, std::string>> cells;
  for (const auto& [layout, m] : models)
    for (const auto& [k, v] : key_rows(m)) {
      if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
      cells[k][layout] = v;
    }
  std::string s = "### " + label + "\n\n| tensor |";
  for (const auto& [layout, m] : models) s += std::string(" ") + to_string(layout) + " |";
  s += "\n|---|";
  for (size_t i = 0; i < models.size(); ++i) s += "---|";
  s += "\n";
  for (const auto& k : order) {
    s += "| " + k + " |";
    for (const auto& [layout, m] : models) {
      auto it = cells[k].find(layout);
      s += " " + (it == cells[k].end() ? std::string("—") : "`" + it->second + "`") + " |";
    }
    s += "\n";
  }
  return s;
}

}  // namespace ggflow::transforms
