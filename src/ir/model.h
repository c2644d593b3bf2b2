// A Model: its Parameters (inputs, in order), Results (outputs, in order) and sinks (Assign
// nodes that write state and have no consumers). Every node is reachable from a Result or a sink;
// nodes are owned through the inputs of their consumers. Edits happen through the pattern
// layer's Rewriter; afterwards infer() re-runs the shape rules in topological order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ir/node.h"

namespace ggflow::ir {

class Model {
 public:
  Model() = default;
  Model(std::vector<NodePtr> results, std::vector<NodePtr> parameters, std::vector<NodePtr> sinks = {},
        std::string name = "model")
      : name_(std::move(name)), results_(std::move(results)), parameters_(std::move(parameters)),
        sinks_(std::move(sinks)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::vector<NodePtr>& parameters() const { return parameters_; }
  const std::vector<NodePtr>& results() const { return results_; }
  const std::vector<NodePtr>& sinks() const { return sinks_; }
  std::vector<NodePtr>& parameters() { return parameters_; }
  std::vector<NodePtr>& results() { return results_; }
  std::vector<NodePtr>& sinks() { return sinks_; }
  RtInfo& rt_info() { return rt_info_; }
  const RtInfo& rt_info() const { return rt_info_; }

  NodePtr parameter(std::string_view friendly_name) const;      // nullptr if absent
  NodePtr find(std::string_view friendly_name) const;           // any node, nullptr if absent
  // The value that feeds the Result with this friendly name or tensor name.
  std::optional<Value> output(std::string_view name) const;

  // Every node reachable from the results and sinks (and the listed parameters), producers
  // before consumers; deterministic (inputs in order). Error when the graph has a cycle.
  Result<std::vector<NodePtr>> ordered() const;
  // Re-run the shape rules of every node in order; the first failure is returned (and every
  // failing node keeps its error()).
  Status infer();
  // A deep copy: new nodes with the same ops, attributes, friendly names, tensor names and
  // rt_info (constants share their bytes). Nodes with generated names get new generated names.
  Result<Model> clone() const;

 private:
  std::string name_ = "model";
  std::vector<NodePtr> results_, parameters_, sinks_;
  RtInfo rt_info_;
};

}  // namespace ggflow::ir
