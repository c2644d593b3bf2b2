// AdaptToGenAI = FixEmbdAxis, then FixInpOutIdsRowSelect, then GenAIInterface (see the header).
// The two structural fixes match from the raw Parameters inp_tokens / inp_out_ids, so they run
// before GenAIInterface replaces those inputs.
#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::transforms {

Result<bool> AdaptToGenAI::run(ir::Model& model) {
  if (!model.parameter("inp_tokens")) {
    log_.push_back("AdaptToGenAI: no Parameter 'inp_tokens': not a graph of the builder, nothing to do");
    return false;
  }
  bool changed = false;
  pattern::MatcherPass embd = fix_embd_axis(), rows = fix_inp_out_ids_row_select();
  auto iface = genai_interface(options_);
  for (pattern::Pass* p : std::initializer_list<pattern::Pass*>{&embd, &rows, iface.get()}) {
    auto r = p->run(model);
    log_.insert(log_.end(), p->log().begin(), p->log().end());
    if (!r) return make_error("AdaptToGenAI: " + r.error().what, r.error().hint);
    changed = changed || *r;
    if (auto s = model.infer(); !s) return make_error("AdaptToGenAI after " + p->name() + ": " + s.error().what, s.error().hint);
  }
  return changed;
}

}  // namespace ggflow::transforms
