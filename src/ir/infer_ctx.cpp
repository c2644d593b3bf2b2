#include "ir/infer_ctx.h"

#include <algorithm>

namespace ggflow::ir {

std::optional<std::vector<SymInt>> InferCtx::sym_value(size_t i) const {
  return symbolic_value(node_.input(i));
}

std::optional<std::vector<int64_t>> InferCtx::const_value(size_t i) const {
  auto v = symbolic_value(node_.input(i));
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  for (const SymInt& s : *v) {
    if (s.is_sym()) return std::nullopt;
    out.push_back(s.value);
  }
  return out;
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                    std::to_string(rank),
                "axes count from 0 (outermost) or from -1 (innermost)");
  return axis < 0 ? axis + rank : axis;
}

Result<Shape> broadcast_shapes(InferCtx& ctx, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) {
    if (!s.rank_known()) return Shape::dynamic_rank();
    rank = std::max(rank, s.rank());
  }
  std::vector<Dim> out(rank, Dim(1));
  for (size_t a = 0; a < rank; ++a) {
    std::optional<int64_t> fixed;  // a static length other than 1
    std::vector<Dim> dyn;
    for (const Shape& s : shapes) {
      if (a + s.rank() < rank) continue;  // missing leading axis: acts as 1
      const Dim& d = s[a + s.rank() - rank];
      if (d.is_dynamic()) {
        dyn.push_back(d);
      } else if (!d.is(1)) {
        if (fixed && *fixed != d.value()) {
          std::string msg = "cannot broadcast shapes";
          for (const Shape& t : shapes) msg += " " + t.str();
          return fail(msg + ": axis " + std::to_string(a) + " has " + std::to_string(*fixed) +
                          " and " + std::to_string(d.value()),
                      "numpy broadcasting needs equal lengths or 1 on every axis");
        }
        fixed = d.value();
      }
    }
    if (fixed) out[a] = Dim(*fixed);
    else if (dyn.empty()) out[a] = Dim(1);
    else if (std::all_of(dyn.begin(), dyn.end(), [&](const Dim& d) { return d == dyn[0]; })) out[a] = dyn[0];
    else out[a] = ctx.fresh(static_cast<uint32_t>(a));
  }
  return Shape(std::move(out));
}

Result<void> require_rank(const Shape& s, size_t min_rank, const char* what) {
  if (s.rank_known() && s.rank() < min_rank)
    return fail(std::string(what) + " has rank " + std::to_string(s.rank()) + " " + s.str() +
                ", needs at least " + std::to_string(min_rank));
  return {};
}

bool same_or_dynamic(const Dim& a, const Dim& b) {
  return a.is_dynamic() || b.is_dynamic() || a.value() == b.value();
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace ggflow::ir
