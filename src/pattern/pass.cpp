#include "pattern/pass.h"

#include <algorithm>
#include <unordered_set>

namespace ggflow::pattern {

namespace {
// The nodes still reachable from the results and sinks.
Result<std::unordered_set<const ir::Node*>> reachable(const ir::Model& m) {
  auto order = m.ordered();
  if (!order) return order.error();
  std::unordered_set<const ir::Node*> s;
  for (const auto& n : *order) s.insert(n.get());
  return s;
}
}  // namespace

Result<bool> MatcherPass::run(ir::Model& model) {
  auto order = model.ordered();
  if (!order) return order.error();
  Rewriter rw(model);
  Matcher matcher(pattern_);
  bool changed = false;
  auto alive = reachable(model);
  if (!alive) return alive.error();
  for (const ir::NodePtr& n : *order) {
    if (!alive->count(n.get())) continue;  // cut off by an earlier rewrite of this run
    for (size_t i = 0; i < n->n_outputs(); ++i) {
      ir::Value v(n, i);
      if (!matcher.match(v)) {
        const auto& types = pattern_->types;
        if (std::find(types.begin(), types.end(), n->type()) != types.end())
          log_.push_back(name_ + ": node '" + n->name() + "': no match: " + matcher.why_not());
        continue;
      }
      size_t before = rw.edits();
      Outcome o = callback_(matcher.result(), rw);
      if (o.applied) {
        log_.push_back(name_ + ": node '" + n->name() + "': applied");
        changed = true;
        alive = reachable(model);
        if (!alive) return make_error("pass " + name_ + " at " + n->describe() + ": " + alive.error().what, alive.error().hint);
        break;
      }
      if (rw.edits() != before)
        return make_error("pass " + name_ + ": the callback edited the graph at " + n->describe() +
                              " and then reported that it did not apply (" + o.why + ")",
                          "return Outcome::done() after any edit");
      log_.push_back(name_ + ": node '" + n->name() + "': skipped: " + o.why);
    }
  }
  return changed;
}

}  // namespace ggflow::pattern
