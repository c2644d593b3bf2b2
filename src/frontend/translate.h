// GgmlGraph -> ir::Model, raw layout (DESIGN.md section 3): one translator per GGML op
// (translators/), shared by every consumer and never layout-aware. Inputs become Parameters of
// the same name (shape from the GGML shape, symbols T/KV/O dynamic), weights become zero-copy
// Constants over the mapped file (block types stay block types), outputs become Results of the
// same name. After each translator the IR's inferred shape is checked against GGML's shape
// rule, so a translator bug is reported at the node that has it.
#pragma once

#include "frontend/ggml_graph.h"
#include "base/result.h"
#include "ir/model.h"

namespace ggflow::frontend {

Result<ir::Model> translate(const GgmlGraph& graph);

}  // namespace ggflow::frontend
