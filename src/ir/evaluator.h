// The reference evaluator: runs a Model on host tensors with the reference kernels. It is the
// numeric oracle of ggflow: naive, deterministic (fixed reduction order, f32 accumulation, no
// dependence on batch composition), obviously correct.
//
// Parameters are bound in model order (or by friendly name). Variables live in a StateStore:
// every ReadValue sees the state as it was when the run started (or its init input when the
// variable is unset); the Assigns are committed when the run ends. Every computed tensor is
// checked against the graph: rank, static dims, and symbols (the first value a symbol takes in a
// run binds it; a different length later is an error that names both nodes).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gguf/result.h"
#include "ir/model.h"
#include "ir/tensor.h"

namespace ggflow::ir {

struct StateStore {
  std::map<std::string, Tensor> values;  // variable id -> current value
};

struct EvalOptions {
  bool check_shapes = true;
  // Called after each node with its outputs (debugging, layer-by-layer comparisons).
  std::function<void(const Node&, const std::vector<Tensor>&)> on_node;
};

// Parameters by friendly name.
Result<std::vector<Tensor>> evaluate(const Model& model, const std::vector<Tensor>& parameters,
                                     StateStore* state = nullptr, const EvalOptions& options = {});
Result<std::vector<Tensor>> evaluate_named(const Model& model, const std::map<std::string, Tensor>& parameters,
                                     StateStore* state = nullptr, const EvalOptions& options = {});

}  // namespace ggflow::ir
