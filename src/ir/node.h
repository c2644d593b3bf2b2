// Nodes and values of the graph.
//
// A Node is one op application: its OpType, typed attributes, inputs as Values (producer node,
// output index), typed outputs (element type, Shape, tensor names), a friendly name and rt_info
// (string -> small variant) that rewrites copy along. A node holds its producers alive
// (shared_ptr); each output keeps the list of its consumers (node, input index), maintained by
// set_input and the destructor. Output types are inferred when the node is made and again by
// Model::infer(); an inference failure is kept on the node (`error()`), not thrown: the verifier
// reports the first failing node by name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "ir/attrs.h"
#include "ir/dim.h"
#include "ir/element_type.h"
#include "ir/op_list.h"

namespace ggflow::ir {

enum class OpType : uint8_t {
#define X(name, attrs, min_in, max_in) name,
  GGFLOW_IR_OPS(X)
#undef X
};
std::string_view to_string(OpType t);
std::optional<OpType> op_type_from_name(std::string_view name);

using RtValue = std::variant<bool, int64_t, double, std::string>;
using RtInfo = std::map<std::string, RtValue>;
std::string to_string(const RtValue& v);

class Node;
using NodePtr = std::shared_ptr<Node>;

// One output of a node, as an input of another.
struct Value {
  NodePtr node;
  size_t index = 0;
  Value() = default;
  Value(NodePtr n, size_t i = 0) : node(std::move(n)), index(i) {}  // NOLINT(implicit)
  ElementType type() const;
  const Shape& shape() const;
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator<(const Value& o) const {
    return node != o.node ? node.get() < o.node.get() : index < o.index;
  }
};

struct Consumer {
  Node* node;
  size_t input;  // index of the input of `node` that reads this output
};

struct Output {
  ElementType type = ElementType::undefined;
  Shape shape = Shape::dynamic_rank();
  std::set<std::string> names;     // tensor names
  std::vector<Consumer> consumers;
};

struct PortType {  // what a shape rule returns for each output
  ElementType type;
  Shape shape;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  OpType type() const { return type_; }
  std::string_view type_name() const { return to_string(type_); }
  uint64_t id() const { return id_; }  // creation order, unique in the process
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); default_name_ = false; }
  // The name is the generated "<Op>_<id>" (nobody named the node): graph comparisons treat two
  // such names as equal.
  bool has_default_name() const { return default_name_; }
  std::string describe() const;        // "node 'name' (Op)"

  size_t n_inputs() const { return inputs_.size(); }
  const Value& input(size_t i) const { return inputs_[i]; }
  const std::vector<Value>& inputs() const { return inputs_; }
  void set_input(size_t i, Value v);   // rewires consumer lists; call Model::infer() after edits

  size_t n_outputs() const { return outputs_.size(); }
  const Output& output(size_t i) const { return outputs_[i]; }
  ElementType out_type(size_t i = 0) const { return outputs_[i].type; }
  const Shape& out_shape(size_t i = 0) const { return outputs_[i].shape; }
  std::set<std::string>& out_names(size_t i = 0) { return outputs_[i].names; }
  const std::set<std::string>& out_names(size_t i = 0) const { return outputs_[i].names; }
  const std::vector<Consumer>& consumers(size_t out = 0) const { return outputs_[out].consumers; }
  size_t consumer_count() const;       // over all outputs

  RtInfo& rt_info() { return rt_info_; }
  const RtInfo& rt_info() const { return rt_info_; }

  const AnyAttrs& any_attrs() const { return attrs_; }
  template <class A>
  const A& attrs() const { return std::get<A>(attrs_); }

  // Re-run the op's shape/type rule on the current inputs, updating the outputs.
  Status infer();
  // The inference failure of the last infer(), with the node named; nullopt when valid.
  const std::optional<Error>& error() const { return error_; }
  // A fresh symbol owned by this node (stable across re-inference), for dims a rule cannot
  // relate to its inputs: keyed by the rule (e.g. output axis).
  Symbol own_symbol(uint32_t key);

  friend NodePtr make_node(OpType, std::vector<Value>, AnyAttrs, std::string);

 private:
  Node() = default;
  OpType type_ = OpType::Parameter;
  uint64_t id_ = 0;
  std::string name_;
  bool default_name_ = false;
  std::vector<Value> inputs_;
  std::vector<Output> outputs_;
  RtInfo rt_info_;
  AnyAttrs attrs_;
  std::optional<Error> error_;
  std::map<uint32_t, Symbol> own_symbols_;
};

// Make a node and infer its outputs. Never fails: an invalid node carries error().
// The friendly name defaults to "<Op>_<id>".
NodePtr make_node(OpType type, std::vector<Value> inputs, AnyAttrs attrs = NoAttrs{},
                  std::string name = {});

}  // namespace ggflow::ir
