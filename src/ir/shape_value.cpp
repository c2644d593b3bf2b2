#include "ir/shape_value.h"

namespace ggflow::ir {

namespace {
using Vals = std::vector<SymInt>;

std::optional<Vals> from_constant(const Node& n) {
  const Tensor& t = n.attrs<ConstantAttrs>().value;
  if (t.rank() > 1 || is_block(t.type()) || is_float(t.type()) || t.numel() > 64) return std::nullopt;
  Vals out;
  for (int64_t x : t.to_i64()) out.push_back({x, {}});
  return out;
}

bool all_static(const Vals& v) {
  for (const SymInt& s : v)
    if (s.is_sym()) return false;
  return true;
}
}  // namespace

std::optional<Vals> symbolic_value(const Value& v, int depth) {
  if (depth > 32 || !v.node || v.node->error()) return std::nullopt;
  const Node& n = *v.node;
  auto in = [&](size_t i) { return symbolic_value(n.input(i), depth + 1); };
  switch (n.type()) {
    case OpType::Constant: return from_constant(n);
    case OpType::ShapeOf: {
      const Shape& s = n.input(0).shape();
      if (!s.rank_known()) return std::nullopt;
      Vals out;
      for (const Dim& d : s.dims()) out.push_back(SymInt::of(d));
      return out;
    }
    case OpType::Convert:
      if (!is_integer(n.attrs<TypeAttrs>().type)) return std::nullopt;
      return in(0);
    case OpType::Squeeze: case OpType::Unsqueeze: case OpType::Reshape: return in(0);
    case OpType::Concat: {
      Vals out;
      for (size_t i = 0; i < n.n_inputs(); ++i) {
        auto p = in(i);
        if (!p) return std::nullopt;
        out.insert(out.end(), p->begin(), p->end());
      }
      return out;
    }
    case OpType::Gather: {
      const auto& a = n.attrs<GatherAttrs>();
      if (a.axis != 0 && a.axis != -1) return std::nullopt;
      auto data = in(0);
      auto idx = in(1);
      if (!data || !idx || !all_static(*idx)) return std::nullopt;
      Vals out;
      int64_t size = static_cast<int64_t>(data->size());
      for (const SymInt& i : *idx) {
        int64_t k = i.value < 0 ? i.value + size : i.value;
        if (k < 0 || k >= size) return std::nullopt;
        out.push_back((*data)[k]);
      }
      return out;
    }
    case OpType::Slice: {
      const auto& a = n.attrs<SliceAttrs>();
      auto data = in(0);
      if (!data || a.axes.size() != 1 || a.steps[0] != 1) return std::nullopt;
      int64_t size = static_cast<int64_t>(data->size());
      auto clamp = [&](int64_t x) { x = x < 0 ? x + size : x; return std::max<int64_t>(0, std::min(x, size)); };
      int64_t b = clamp(a.starts[0]), e = clamp(a.ends[0]);
      Vals out;
      for (int64_t k = b; k < e; ++k) out.push_back((*data)[k]);
      return out;
    }
    case OpType::Add: case OpType::Subtract: case OpType::Multiply: {
      auto a = in(0), b = in(1);
      if (!a || !b || !all_static(*a) || !all_static(*b)) return std::nullopt;
      if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return std::nullopt;
      size_t m = std::max(a->size(), b->size());
      Vals out;
      for (size_t k = 0; k < m; ++k) {
        int64_t x = (*a)[a->size() == 1 ? 0 : k].value, y = (*b)[b->size() == 1 ? 0 : k].value;
        int64_t r = n.type() == OpType::Add ? x + y : n.type() == OpType::Subtract ? x - y : x * y;
        out.push_back({r, {}});
      }
      return out;
    }
    default: return std::nullopt;
  }
}

}  // namespace ggflow::ir
