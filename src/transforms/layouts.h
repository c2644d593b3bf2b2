// The three layouts of one graph (DESIGN.md section 1 and 3): raw (as translated), SDPA
// (AdaptToGenAI + MakeStateful) and paged (+ SDPAToPagedAttention). to_layout runs the passes
// through a PassManager (re-inference and the verifier, broadcast guard included, after each).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "ir/model.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"
#include "transforms/sdpa_to_paged_attention/sdpa_to_paged_attention.h"

namespace ggflow::transforms {

enum class Layout { raw, sdpa, paged };
std::optional<Layout> layout_from_name(std::string_view name);  // "raw" | "sdpa" | "paged"
const char* to_string(Layout l);

// Rewrites `model` (a raw graph) into `layout`. `log` receives the passes' logs.
Status to_layout(ir::Model& model, Layout layout, const GenAIOptions& genai, const PagedOptions& paged = {},
                 std::vector<std::string>* log = nullptr);

// The shapes of the key tensors of each layout's graph as a Markdown section (docs/LAYOUTS.md):
// the inputs, the embedding, layer 0's Q/K, the attention op's inputs and output, the caches, the
// row selection before the LM head and the logits.
std::string key_shapes_markdown(const std::string& model_label, const std::vector<std::pair<Layout, ir::Model>>& models);

}  // namespace ggflow::transforms
