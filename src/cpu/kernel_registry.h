// The kernel registry (kernel_registry.cpp): the executor's kernel kind for a node, from its op,
// element types and constant operands; Kind::fallback runs the IR reference kernel.
#pragma once

#include "cpu/executor_impl.h"

namespace ggflow::cpu {

// Fills the step's compile-time kernel data (a matmul's weight) and returns its kind.
Kind choose_kernel(const ir::Node& n, Step& s);

}  // namespace ggflow::cpu
