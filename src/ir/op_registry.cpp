#include "ir/op_registry.h"

#include <array>
#include <vector>

namespace ggflow::ir {

namespace {
constexpr size_t kOpCount = 0
#define X(n, a, mi, ma) +1
    GGFLOW_IR_OPS(X)
#undef X
    ;

const std::array<OpDef, kOpCount> kOps = {{
#define X(n, a, mi, ma)                                                  \
  OpDef{OpType::n, #n, mi, ma, &infer_##n, &eval_##n,                    \
        [](const AnyAttrs& v) { return std::holds_alternative<a>(v); }, \
        []() -> AnyAttrs { return a{}; }},
    GGFLOW_IR_OPS(X)
#undef X
}};
}  // namespace

const OpDef& op_def(OpType t) { return kOps[static_cast<size_t>(t)]; }

std::span<const OutputAlias> op_aliases(OpType t) {
  struct Entry {
    OpType op;
    OutputAlias alias;
  };
  static constexpr Entry kAliases[] = {
#define X(op, out, in) Entry{OpType::op, OutputAlias{out, in}},
      GGFLOW_IR_ALIASES(X)
#undef X
  };
  static const auto table = [] {  // per op: its entries, contiguous in kAliases
    std::array<std::vector<OutputAlias>, kOpCount> t{};
    for (const Entry& e : kAliases) t[static_cast<size_t>(e.op)].push_back(e.alias);
    return t;
  }();
  return table[static_cast<size_t>(t)];
}

}  // namespace ggflow::ir
