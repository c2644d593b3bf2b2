// Matching a pattern against a graph value. On success the Match maps every pattern node that
// took part to the graph value it matched (an absent optional is not in the map). On failure
// why_not() says where the deepest attempt failed, e.g.
//   "Gather 'embd' input 1: Parameter 'inp_pos' fails name == 'inp_tokens'".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/node.h"
#include "pattern/pattern.h"

namespace ggflow::pattern {

class Match {
 public:
  bool has(const P& p) const { return map_.count(p.get()) > 0; }
  ir::Value value(const P& p) const { return map_.at(p.get()); }
  ir::NodePtr node(const P& p) const { return map_.at(p.get()).node; }
  const std::map<const PNode*, ir::Value>& map() const { return map_; }
  std::map<const PNode*, ir::Value>& map() { return map_; }

 private:
  std::map<const PNode*, ir::Value> map_;
};

class Matcher {
 public:
  explicit Matcher(P root) : root_(std::move(root)) {}
  const P& root() const { return root_; }
  bool match(const ir::Value& v);
  const Match& result() const { return match_; }
  const std::string& why_not() const { return why_; }

 private:
  bool m(const PNode* p, const ir::Value& v, int depth);
  void fail(int depth, std::string why);
  P root_;
  Match match_;
  std::string why_;
  int why_depth_ = -1;
  std::vector<std::string> path_;  // "Gather 'g' input 1" steps down to the current value
};

}  // namespace ggflow::pattern
