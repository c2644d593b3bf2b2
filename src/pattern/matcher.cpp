#include "pattern/matcher.h"

#include <algorithm>

namespace ggflow::pattern {

namespace {
std::string where(const ir::Value& v) {
  return std::string(v.node->type_name()) + " '" + v.node->name() + "'" + (v.index ? ":" + std::to_string(v.index) : "");
}
bool type_in(const PNode* p, ir::OpType t) { return std::find(p->types.begin(), p->types.end(), t) != p->types.end(); }
}  // namespace

void Matcher::fail(int depth, std::string why) {
  if (depth >= why_depth_) {
    why_depth_ = depth;
    why_.clear();
    for (const std::string& step : path_) why_ += step + ": ";
    why_ += why;
  }
}

bool Matcher::match(const ir::Value& v) {
  match_ = Match{};
  why_.clear();
  why_depth_ = -1;
  return m(root_.get(), v, 0);
}

bool Matcher::m(const PNode* p, const ir::Value& v, int depth) {
  auto& map = match_.map();
  if (auto it = map.find(p); it != map.end()) {
    if (it->second == v) return true;
    fail(depth, where(v) + " is not the value already matched by " + p->label + " (" + where(it->second) + ")");
    return false;
  }
  auto preds_ok = [&]() {
    for (const Predicate& pr : p->preds)
      if (!pr.test(v)) {
        fail(depth, where(v) + " fails " + pr.what);
        return false;
      }
    return true;
  };
  switch (p->kind) {
    case PNode::Kind::any:
      if (!preds_ok()) return false;
      map[p] = v;
      return true;
    case PNode::Kind::op: {
      if (!type_in(p, v.node->type())) {
        fail(depth, where(v) + " is not " + p->label);
        return false;
      }
      if (!preds_ok()) return false;
      if (p->check_inputs) {
        if (v.node->n_inputs() != p->inputs.size()) {
          fail(depth, where(v) + " has " + std::to_string(v.node->n_inputs()) + " inputs, the pattern " +
                          std::to_string(p->inputs.size()));
          return false;
        }
        auto saved = map;
        for (size_t i = 0; i < p->inputs.size(); ++i) {
          path_.push_back(where(v) + " input " + std::to_string(i));
          bool ok = m(p->inputs[i].get(), v.node->input(i), depth + 1);
          path_.pop_back();
          if (!ok) {
            map = std::move(saved);
            return false;
          }
        }
      }
      map[p] = v;
      return true;
    }
    case PNode::Kind::optional: {
      if (type_in(p, v.node->type()) && v.node->n_inputs() >= 1) {
        auto saved = map;
        bool ok = true;
        for (const Predicate& pr : p->preds) ok = ok && pr.test(v);
        path_.push_back(where(v) + " input 0");
        ok = ok && m(p->inputs[0].get(), v.node->input(0), depth + 1);
        path_.pop_back();
        if (ok) {
          map[p] = v;
          return true;
        }
        map = std::move(saved);
      }
      return m(p->inputs[0].get(), v, depth);  // the optional op is absent
    }
    case PNode::Kind::through: {
      ir::Value cur = v;
      for (int hops = 0; hops < 64; ++hops) {
        auto saved = map;
        if (m(p->inputs[0].get(), cur, depth + hops)) {
          map[p] = v;
          return true;
        }
        map = std::move(saved);
        if (!type_in(p, cur.node->type()) || cur.node->n_inputs() < 1) return false;
        cur = cur.node->input(0);
      }
      return false;
    }
  }
  return false;
}

}  // namespace ggflow::pattern
