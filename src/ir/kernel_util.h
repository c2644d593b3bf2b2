// Helpers shared by the reference kernels: row-major strides and broadcast index maps.
// Everything here is naive on purpose: the evaluator is the oracle, not the fast path.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/attrs.h"
#include "ir/node.h"
#include "ir/tensor.h"

namespace ggflow::ir {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);  // in elements
// Numpy broadcast of static shapes; error when incompatible.
Result<std::vector<int64_t>> broadcast_static(const std::vector<std::vector<int64_t>>& shapes);
// For each element of `out` (row-major), the index of the element of `in` it reads under numpy
// broadcasting (in is right-aligned against out).
std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out, const std::vector<int64_t>& in);
// Normalized axes of a rank, each in [0, rank), or an error naming the op attribute.
Result<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                            const char* what);
inline Error kernel_error(const Node& n, std::string what, std::string hint = {}) {
  return Error{n.describe() + ": " + std::move(what), std::move(hint)};
}
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace ggflow::ir

namespace ggflow::ir {
// out[e] = in[map[e]] for plain types (byte copies).
Tensor take_elements(const Tensor& in, std::vector<int64_t> out_shape, const std::vector<int64_t>& map);
// Iterate every multi-index of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F&& f) {
  int64_t n = product(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    f(idx, e);
    for (size_t a = shape.size(); a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
}
// numpy slicing of one axis of length d: start, length and step of the result (ends clamp).
struct SliceAxis {
  int64_t start, len, step;
};
SliceAxis slice_axis(int64_t d, int64_t start, int64_t end, int64_t step);
// The axes a Slice's attributes address, normalized; errors on mismatched lengths or a 0 step.
Result<std::vector<int64_t>> slice_axes(const SliceAttrs& a, size_t rank);

}  // namespace ggflow::ir
