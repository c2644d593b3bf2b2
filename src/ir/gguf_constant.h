// Weight constants straight from a GGUF file, zero-copy: the Tensor is a view into the file's
// mapping and holds `file.bytes()` (a shared_ptr), so the mapping outlives the File object.
// GGML lists dims innermost first (ne); IR shapes are outermost first, so the shape is ne
// reversed: a weight with ne = [K, N] is the IR tensor [N, K] (N rows of K, blocks along K).
#pragma once

#include <string>

#include "gguf/file.h"
#include "ir/node.h"
#include "ir/tensor.h"

namespace ggflow::ir {

// Errors: a GGML type the IR has no element type for (e.g. IQ2_XXS), or bytes that do not fit.
Result<Tensor> gguf_tensor(const gguf::File& file, const gguf::TensorInfo& info);
// A Constant node named after the tensor ("blk.0.attn_q.weight").
Result<NodePtr> gguf_constant(const gguf::File& file, const gguf::TensorInfo& info);

}  // namespace ggflow::ir
