// Every edit of a graph goes through a Rewriter, so that what rewrites must preserve is
// preserved by default:
//  - make(..., like): the new node takes the friendly name and rt_info of `like`;
//    (a generated "<Op>_<id>" name is not copied: the new node gets its own)
//  - replace_node(old, new): every consumer of old's output i reads new's output i, the tensor
//    names of old's outputs move to new, new takes old's friendly name and old's rt_info entries
//    (keys new already has are kept), and the model's parameter/result/sink lists follow.
// After a pass, the PassManager re-infers shapes and verifies.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ir/model.h"

namespace ggflow::pattern {

struct ReplaceOptions {
  bool copy_name = true;
  bool copy_rt_info = true;
  bool move_tensor_names = true;
};

class Rewriter {
 public:
  explicit Rewriter(ir::Model& model) : model_(model) {}
  ir::Model& model() { return model_; }

  // A new node; with `like`, named after it (friendly name) and carrying its rt_info.
  ir::NodePtr make(ir::OpType type, std::vector<ir::Value> inputs, ir::AnyAttrs attrs = ir::NoAttrs{},
                   const ir::NodePtr& like = nullptr);
  Status replace_node(const ir::NodePtr& old_node, const ir::NodePtr& replacement, const ReplaceOptions& options = {});
  // Consumers of `from` read `to` instead (consumers that are `to`'s own node are left alone).
  Status replace_value(const ir::Value& from, const ir::Value& to, bool move_tensor_names = true);
  void set_input(const ir::NodePtr& node, size_t i, ir::Value v);
  static void copy_rt_info(const ir::Node& from, ir::Node& to);  // entries `to` lacks

  void add_parameter(const ir::NodePtr& p);
  void remove_parameter(const ir::NodePtr& p);
  void add_result(const ir::NodePtr& r);
  void add_sink(const ir::NodePtr& s);
  void remove_sink(const ir::NodePtr& s);

  size_t edits() const { return edits_; }

 private:
  ir::Model& model_;
  size_t edits_ = 0;
};

}  // namespace ggflow::pattern
