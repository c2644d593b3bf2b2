#include "transforms/layouts.h"

#include "pattern/pass_manager.h"
#include "transforms/make_stateful.h"

namespace ggflow::transforms {

std::optional<Layout> layout_from_name(std::string_view n) {
  if (n == "raw") return Layout::raw;
  if (n == "sdpa") return Layout::sdpa;
  if (n == "paged" || n == "pa") return Layout::paged;
  return std::nullopt;
}

const char* to_string(Layout l) { return l == Layout::raw ? "raw" : l == Layout::sdpa ? "sdpa" : "paged"; }

Status to_layout(ir::Model& model, Layout layout, const GenAIOptions& genai, const PagedOptions& paged,
                 std::vector<std::string>* log) {
  if (layout == Layout::raw) return {};
  pattern::PassManager pm;
  pm.add<AdaptToGenAI>(genai);
  pm.add<MakeStateful>();
  if (layout == Layout::paged) pm.add<SDPAToPagedAttention>(paged);
  auto r = pm.run(model);
  if (log) log->insert(log->end(), pm.log().begin(), pm.log().end());
  if (!r) return r.error();
  if (!*r) return make_error(std::string("no pass changed the graph on the way to the ") + to_string(layout) + " layout",
                             "the model has no builder inputs (inp_tokens)");
  return {};
}

}  // namespace ggflow::transforms
