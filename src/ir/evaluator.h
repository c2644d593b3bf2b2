// The reference evaluator: runs a Model on host tensors with the reference kernels. It is the
// numeric oracle of ggflow: naive, deterministic (fixed reduction order, f32 accumulation, no
// dependence on batch composition), obviously correct.
//
// `Evaluator` prepares a model once (the order, every node input resolved to a slot, parameters
// and variables by index) and runs it many times; `evaluate()` is one preparation and one run.
// Variables: every ReadValue sees the state as it was when the run started (or its init input when
// the variable is unset); the Assigns are committed when the run succeeds. Every computed tensor is
// checked against the graph: rank, static dims, and symbols (the first value a symbol takes in a
// run binds it; a different length later is an error that names both nodes).
//
// In place: an op whose output aliases an input (op_list.h, GGFLOW_IR_ALIASES) writes into that
// input's buffer. The evaluator hands it over as is when no one else can see the buffer: a
// parameter the caller marked writable (a runtime's cache) or a kernel's fresh output, used by that
// op alone (views of such a value included). Anything else is copied first, so a caller's tensors
// are never written behind its back.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/model.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace ggflow::ir {

struct EvalOptions {
  bool check_shapes = true;
  // Called after each node with its outputs (debugging, layer-by-layer comparisons).
  std::function<void(const Node&, const std::vector<Tensor>&)> on_node;
};

class Evaluator {
 public:
  // Errors: a cycle, a node whose shape inference failed.
  static Result<Evaluator> create(const Model& model, EvalOptions options = {});

  // Variable ids (ReadValue/Assign), in order of first appearance: the layout of `state` in run().
  const std::vector<std::string>& variable_ids() const { return var_ids_; }

  // `parameters` in model order. `state` (optional): one tensor per variable, an empty handle
  // when unset; updated with the Assigns when the run succeeds. `writable` (optional, one flag
  // per parameter): the parameter's buffer is the caller's to update in place (its caches).
  // Returns the Results' values in model order.
  Result<std::vector<Tensor>> run(std::span<const Tensor> parameters, std::vector<Tensor>* state = nullptr,
                                  std::span<const uint8_t> writable = {}) const;

 private:
  struct Input {
    uint32_t step, output;  // the producing step and its output index
  };
  struct Step {
    const Node* node;
    std::vector<Input> inputs;
    int param = -1, variable = -1;      // Parameter index; ReadValue/Assign variable index
    std::span<const OutputAlias> aliases;
    std::vector<uint32_t> release;      // steps whose values die after this one
    std::vector<uint32_t> consumers;    // per output: how many inputs read it
  };
  const Model* model_ = nullptr;
  EvalOptions opt_;
  std::vector<Step> steps_;
  std::vector<uint32_t> result_steps_;  // the Result nodes' steps, model order
  std::vector<std::string> var_ids_;
};

// One-shot runs. Variables live in a StateStore keyed by variable id.
struct StateStore {
  std::map<std::string, Tensor> values;  // variable id -> current value
};
Result<std::vector<Tensor>> evaluate(const Model& model, const std::vector<Tensor>& parameters,
                                     StateStore* state = nullptr, const EvalOptions& options = {});
// Parameters by friendly name.
Result<std::vector<Tensor>> evaluate_named(const Model& model, const std::map<std::string, Tensor>& parameters,
                                           StateStore* state = nullptr, const EvalOptions& options = {});

}  // namespace ggflow::ir
