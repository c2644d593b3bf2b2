// ROPE(x [D, H, T, B], positions i32 [T], freq_factors?) -> x's shape. The IR's RoPE takes x
// as [B, T, H, D] (IR order of the same tensor) and positions broadcast to its token dims
// [B, T]. The positions are reshaped to exactly those dims, read from x's live shape
// (Reshape(pos, ShapeOf(x)[0:2])), so they follow x wherever a layout puts the tokens.
// YaRN (ext_factor != 0) is not supported.
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_ROPE(TranslateContext& c) {
  const auto& p = c.tensor().p<RopeParams>();
  if (p.ext_factor != 0.0f) return c.error("YaRN RoPE (ext_factor " + std::to_string(p.ext_factor) + ") is not supported");
  if (p.mode != 0 && p.mode != kRopeNeox) return c.error("RoPE mode " + std::to_string(p.mode) + " is not supported", "normal (0) and neox (2) are");
  ir::Value x = c.in(0);                                                           // [B, T, H, D]
  auto tok_dims = ir::ops::slice(ir::ops::shape_of(x), {0}, {2}, {1}, {0});        // [B, T]
  auto pos = ir::ops::reshape(c.in(1), tok_dims, false);                           // i32 [B, T]
  ir::RopeAttrs a;
  a.mode = p.mode == kRopeNeox ? ir::RopeMode::neox : ir::RopeMode::normal;
  a.n_dims = p.n_dims;
  a.freq_base = p.freq_base;
  a.freq_scale = p.freq_scale;
  a.attn_factor = p.attn_factor;
  std::optional<ir::Value> ff;
  if (c.n_src() == 3) ff = c.in(2);
  return ir::Value(ir::ops::rope(x, pos, a, ff));
}

}  // namespace ggflow::frontend
