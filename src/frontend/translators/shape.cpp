// Data movement: VIEW, RESHAPE, PERMUTE, TRANSPOSE, CONT, CPY, CONCAT. IR values are always
// dense, so CONT is the identity and a VIEW is read relative to its (dense) source.
//   RESHAPE:  TranslateContext::reshape_to (special_zero copies, -1 for the run-time length)
//   VIEW:     offset 0, contiguous, same element count -> a reshape; a column range of every row
//             of a matrix -> a Slice (dynamic rows allowed); otherwise (static shapes only) a
//             Gather of the flattened source at the element offsets the strides name
//   PERMUTE:  Transpose with the IR permutation of layout.h; TRANSPOSE swaps the last two axes
//   CPY:      Convert to the destination type (+ reshape to the destination's shape)
//   CONCAT:   Concat on the IR axis of the GGML dim
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_RESHAPE(TranslateContext& c) {
  auto r = c.reshape_to(c.in(0), c.out_shape());
  if (!r) return r.error();
  return ir::Value(*r);
}

Result<ir::Value> translate_VIEW(TranslateContext& c) {
  const auto& p = c.tensor().p<ViewParams>();
  const Ne &ne = c.tensor().ne, &sne = c.src(0).ne;
  const auto& tr = gguf::traits(c.src(0).type);
  if (tr.quantized) return c.error("views of block-quantized tensors are not supported");
  const int64_t es = tr.type_size;
  bool contiguous = p.nb[0] == es;
  Ext run = Ext(es);  // the dense stride of the next dim (static part only)
  for (int i = 1; i < 4 && contiguous; ++i) {
    if (!ne[i - 1].is_static()) { run = Ext::symbol(ne[i - 1].sym); }
    else if (run.is_static()) run = run.n * ne[i - 1].n;
    if (ne[i].is(1)) continue;
    contiguous = run.is_static() && p.nb[i] == run.n;
  }
  int64_t vn = 1, sn = 1;
  bool all_static = true;
  for (int i = 0; i < 4; ++i) {
    all_static = all_static && ne[i].is_static() && sne[i].is_static();
    vn *= ne[i].is_static() ? ne[i].n : 1;
    sn *= sne[i].is_static() ? sne[i].n : 1;
  }
  if (p.offset == 0 && contiguous && (!all_static || vn == sn)) {
    auto r = c.reshape_to(c.in(0), c.out_shape());
    if (!r) return r.error();
    return ir::Value(*r);
  }
  // A column range of every row of a matrix [R, rows] (gemma4's per-layer inputs: layer il's
  // slice of each token's row): a Slice on the innermost IR axis, rows may be dynamic.
  const bool whole_rows = ne[1] == sne[1] && ne[2].is(1) && ne[3].is(1) && sne[2].is(1) && sne[3].is(1);
  if (whole_rows && p.nb[0] == es && sne[0].is_static() && ne[0].is_static() && p.nb[1] == sne[0].n * es &&
      p.offset % es == 0 && p.offset / es + ne[0].n <= sne[0].n) {
    const int64_t b = p.offset / es;
    return ir::Value(ir::ops::slice(c.in(0), {b}, {b + ne[0].n}, {1}, {3}));                  // [1, 1, rows, ne0]
  }
  if (!all_static) return c.error("a strided or offset view needs static shapes");
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(vn));
  for (int64_t i3 = 0; i3 < ne[3].n; ++i3)
    for (int64_t i2 = 0; i2 < ne[2].n; ++i2)
      for (int64_t i1 = 0; i1 < ne[1].n; ++i1)
        for (int64_t i0 = 0; i0 < ne[0].n; ++i0) {
          int64_t byte = p.offset + i0 * p.nb[0] + i1 * p.nb[1] + i2 * p.nb[2] + i3 * p.nb[3];
          if (byte % es != 0 || byte / es >= sn) return c.error("view element at byte " + std::to_string(byte) + " is outside the source");
          idx.push_back(byte / es);
        }
  auto flat = ir::ops::reshape(c.in(0), std::vector<int64_t>{-1});
  auto shape = c.out_shape().to_vector();
  return ir::Value(ir::ops::gather(flat, ir::ops::const_i64(idx, shape), 0));
}

Result<ir::Value> translate_PERMUTE(TranslateContext& c) {
  auto perm = ir_perm_of_ggml_permute(c.tensor().p<PermuteParams>().axes);
  return ir::Value(ir::ops::transpose(c.in(0), {perm.begin(), perm.end()}));
}

Result<ir::Value> translate_TRANSPOSE(TranslateContext& c) {
  return ir::Value(ir::ops::transpose(c.in(0), {0, 1, 3, 2}));
}

Result<ir::Value> translate_CONT(TranslateContext& c) { return c.in(0); }

Result<ir::Value> translate_CPY(TranslateContext& c) {
  ir::Value v = c.in(0);
  auto ty = ir_type(c.tensor().type);
  if (!ty || (ir::is_block(*ty) && !(*ty == ir::ElementType::q8_0 && v.type() == ir::ElementType::f32)))
    return c.error("copies into " + std::string(gguf::traits(c.tensor().type).name) + " are not supported",
                   "the one block type a copy makes is q8_0, from f32 (the KV cache's rounding)");
  if (v.type() != *ty) v = ir::ops::convert(v, *ty);
  ir::Shape want = c.out_shape();
  if (!(v.shape() == want)) {
    auto r = c.reshape_to(v, want);
    if (!r) return r.error();
    v = *r;
  }
  return v;
}

Result<ir::Value> translate_CONCAT(TranslateContext& c) {
  int d = c.tensor().p<ConcatParams>().dim;
  return ir::Value(ir::ops::concat({c.in(0), c.in(1)}, ir_axis(d, 4)));
}

}  // namespace ggflow::frontend
