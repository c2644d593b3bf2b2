#include "ir/op_registry.h"

#include <array>

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

}  // namespace ggflow::ir
