// Printers for `ggflow graph` and pass dumps.
// Text: one line per node in topological order:
//   embd = Gather(token_embd, inp_tokens_sq) -> f32[?T,576] {axis=0, batch_dims=0} names={inp_embd} rt={k=v}
// an input is written as the producer's friendly name, with ":i" when it reads output i > 0.
// DOT: one box per node (name, op, attributes), edges labelled with the tensor type and shape.
#pragma once

#include <string>

#include "ir/model.h"

namespace ggflow::ir {

struct PrintOptions {
  bool constants_values = true;  // print small constant values
  bool rt_info = true;
};

std::string to_text(const Model& model, const PrintOptions& options = {});
std::string to_dot(const Model& model, const PrintOptions& options = {});
std::string node_line(const Node& node, const PrintOptions& options = {});
// "{axis=0, batch_dims=0}" or "" when the op has no attributes. `symbols`: dynamic dims of
// shape attributes print with their symbol name ("?T") or just as "?".
std::string attrs_text(const Node& node, bool symbols = true);

}  // namespace ggflow::ir
