// SOFT_MAX and FLASH_ATTN_EXT.
//   SOFT_MAX(x [KV, T, H], mask? [KV, T], scale): softmax over ne0 of x*scale + mask. ALiBi
//     (max_bias != 0) is not supported.
//   FLASH_ATTN_EXT(q [D, T, H], k [D, KV, Hkv], v [Dv, KV, Hkv], mask? [KV, T], scale)
//     -> [Dv, H, T]: in IR order q [B, H, T, D], k, v [B, Hkv, KV, D] are exactly what
//     ScaledDotProductAttention takes (GQA included); its [B, H, T, Dv] output is transposed to
//     [B, T, H, Dv], GGML's result layout. logit_softcap c != 0 (Gemma 2) travels as
//     SdpaAttrs::logit_softcap: each score is c * tanh(q·k * (scale / c)) before the mask is added,
//     as ggml computes it. ALiBi (max_bias != 0) is not supported. An f16 k / v (an f16 KV
//     cache) is converted to f32 first (exactly), so the attention arithmetic is the f32 one; a
//     q8_0 k (a q8_0 cache) too, with SdpaAttrs::q8_0_scores (llama.cpp's q8_0 dot products).
#include <cmath>
#include <string>

#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

Result<ir::Value> translate_SOFT_MAX(TranslateContext& c) {
  const auto& p = c.tensor().p<SoftMaxParams>();
  if (p.max_bias != 0.0f) return c.error("ALiBi (max_bias) is not supported");
  ir::NodePtr x = ir::ops::multiply(c.in(0), ir::ops::scalar_f32(p.scale));
  if (c.n_src() == 2) x = ir::ops::add(x, c.in(1));
  return ir::Value(ir::ops::softmax(x, -1));
}

Result<ir::Value> translate_FLASH_ATTN_EXT(TranslateContext& c) {
  const auto& p = c.tensor().p<FlashAttnParams>();
  if (p.max_bias != 0.0f) return c.error("ALiBi (max_bias) is not supported");
  if (!std::isfinite(p.logit_softcap))
    return c.error("logit_softcap " + std::to_string(p.logit_softcap) + " is not finite",
                   "0 turns soft-capping off; Gemma 2 uses attn_logit_softcapping = 50");
  std::optional<ir::Value> mask;
  if (c.n_src() >= 4) mask = c.in(3);
  float scale = p.scale;
  if (scale == 0.0f) return c.error("scale 0 is not supported (the IR reads 0 as 1/sqrt(D))");
  // an f16 KV cache (builder::BuildOptions::kv_type) is read as f32: exact, and the attention the
  // same; a q8_0 k too, its scores then in q8_0 arithmetic (llama.cpp's FLASH_ATTN_EXT on a q8_0 k)
  auto f32 = [](ir::Value x) { return x.type() == ir::ElementType::f32 ? x : ir::Value(ir::ops::convert(x, ir::ElementType::f32)); };
  const bool q8_0_scores = c.in(1).type() == ir::ElementType::q8_0;
  auto o = ir::ops::sdpa(f32(c.in(0)), f32(c.in(1)), f32(c.in(2)), mask, false, scale, p.logit_softcap, q8_0_scores);  // [B, H, T, Dv]
  return ir::Value(ir::ops::transpose(o, {0, 2, 1, 3}));                           // [B, T, H, Dv]
}

}  // namespace ggflow::frontend
