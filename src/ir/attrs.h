// Typed attribute structs of the ops (op_list.h says which op uses which). Each struct lists
// its fields once in `fields(f)`, which the printers and graph comparison use; equality is
// memberwise. Attributes are immutable once a node exists: a rewrite makes a new node.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ir/dim.h"
#include "ir/element_type.h"
#include "ir/tensor.h"

namespace ggflow::ir {

// erf: 0.5 x (1 + erf(x / sqrt 2)); tanh: its tanh approximation in f32; tanh_f16: GGML's CPU
// GELU, the tanh form read from a table of f16 values at x's f16 rounding (ir/gelu_f16.h).
enum class GeluMode : uint8_t { erf, tanh, tanh_f16 };
enum class RopeMode : uint8_t { normal, neox };  // pairs (2i, 2i+1) | (i, i + n_dims/2)
inline const char* to_string(GeluMode m) {
  return m == GeluMode::erf ? "erf" : m == GeluMode::tanh ? "tanh" : "tanh_f16";
}
inline const char* to_string(RopeMode m) { return m == RopeMode::normal ? "normal" : "neox"; }

struct NoAttrs {
  template <class F> void fields(F&&) const {}
  bool operator==(const NoAttrs&) const = default;
};
struct ParameterAttrs {  // the friendly name of a Parameter is its input name
  ElementType type = ElementType::f32;
  Shape shape;
  template <class F> void fields(F&& f) const { f("type", type); f("shape", shape); }
  bool operator==(const ParameterAttrs&) const = default;
};
struct ConstantAttrs {
  Tensor value;
  template <class F> void fields(F&& f) const { f("value", value); }
  bool operator==(const ConstantAttrs& o) const { return value.same_bytes(o.value); }
};
struct TypeAttrs {  // Convert: destination; ShapeOf, Range: output type
  ElementType type = ElementType::i64;
  template <class F> void fields(F&& f) const { f("type", type); }
  bool operator==(const TypeAttrs&) const = default;
};
struct VariableAttrs {  // ReadValue / Assign of the state variable `id`
  std::string id;
  ElementType type = ElementType::f32;
  Shape shape;
  template <class F> void fields(F&& f) const { f("id", id); f("type", type); f("shape", shape); }
  bool operator==(const VariableAttrs&) const = default;
};
struct ReshapeAttrs {  // special_zero: a 0 in the target copies the input dim at that index
  bool special_zero = false;
  template <class F> void fields(F&& f) const { f("special_zero", special_zero); }
  bool operator==(const ReshapeAttrs&) const = default;
};
struct AxesAttrs {  // Squeeze (empty = every static 1), Unsqueeze (axes of the output)
  std::vector<int64_t> axes;
  template <class F> void fields(F&& f) const { f("axes", axes); }
  bool operator==(const AxesAttrs&) const = default;
};
struct TransposeAttrs {
  std::vector<int64_t> perm;  // output axis i is input axis perm[i]
  template <class F> void fields(F&& f) const { f("perm", perm); }
  bool operator==(const TransposeAttrs&) const = default;
};
struct AxisAttrs {  // Concat, Softmax, ScatterUpdate
  int64_t axis = 0;
  template <class F> void fields(F&& f) const { f("axis", axis); }
  bool operator==(const AxisAttrs&) const = default;
};
struct TileAttrs {
  std::vector<int64_t> repeats;  // one per axis
  template <class F> void fields(F&& f) const { f("repeats", repeats); }
  bool operator==(const TileAttrs&) const = default;
};
struct GatherAttrs {
  int64_t axis = 0;
  int64_t batch_dims = 0;
  template <class F> void fields(F&& f) const { f("axis", axis); f("batch_dims", batch_dims); }
  bool operator==(const GatherAttrs&) const = default;
};
struct SliceAttrs {  // numpy slicing per listed axis; ends clamp, so INT64_MAX means "to the end"
  std::vector<int64_t> starts, ends, steps, axes;
  template <class F> void fields(F&& f) const {
    f("starts", starts); f("ends", ends); f("steps", steps); f("axes", axes);
  }
  bool operator==(const SliceAttrs&) const = default;
};
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> lengths;  // one may be -1 (the rest)
  template <class F> void fields(F&& f) const { f("axis", axis); f("lengths", lengths); }
  bool operator==(const SplitAttrs&) const = default;
};
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keep_dims = false;
  template <class F> void fields(F&& f) const { f("axes", axes); f("keep_dims", keep_dims); }
  bool operator==(const ReduceAttrs&) const = default;
};
struct GeluAttrs {
  GeluMode mode = GeluMode::erf;
  template <class F> void fields(F&& f) const { f("mode", mode); }
  bool operator==(const GeluAttrs&) const = default;
};
struct MatMulAttrs {
  bool transpose_a = false, transpose_b = false;
  template <class F> void fields(F&& f) const {
    f("transpose_a", transpose_a); f("transpose_b", transpose_b);
  }
  bool operator==(const MatMulAttrs&) const = default;
};
struct RMSNormAttrs {  // over the innermost axis; optional input 1 = gamma
  float eps = 1e-6f;
  template <class F> void fields(F&& f) const { f("eps", eps); }
  bool operator==(const RMSNormAttrs&) const = default;
};
struct LayerNormAttrs {  // over the innermost axis, no weights: (x - mean) / sqrt(var + eps)
  float eps = 1e-5f;
  template <class F> void fields(F&& f) const { f("eps", eps); }
  bool operator==(const LayerNormAttrs&) const = default;
};
struct RopeAttrs {  // inputs: x [..., T, H, S], positions (broadcast to [..., T]), freq_factors?
  RopeMode mode = RopeMode::normal;
  int64_t n_dims = 0;           // rotated dims (<= S, even); 0 = all of S
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;      // linear position scaling
  float attn_factor = 1.0f;     // multiplies cos and sin
  template <class F> void fields(F&& f) const {
    f("mode", mode); f("n_dims", n_dims); f("freq_base", freq_base);
    f("freq_scale", freq_scale); f("attn_factor", attn_factor);
  }
  bool operator==(const RopeAttrs&) const = default;
};
struct SdpaAttrs {  // inputs q [..., Hq, Tq, S], k, v [..., Hkv, Tk, S], mask? (additive)
  bool causal = false;
  float scale = 0.0f;          // 0 = 1/sqrt(S)
  float logit_softcap = 0.0f;  // 0 = off; else score = c * tanh(dot * (scale / c)), then the mask (Gemma 2)
  // true: the scores in q8_0 arithmetic (ir/attention_row.h attention_score_q8: q and k quantized
  // to q8_0 per 32 values, integer dots per block), llama.cpp's over a q8_0 key cache; head size a
  // multiple of 32. v is used as given (a q8_0 cache's values are exact in f32).
  bool q8_0_scores = false;
  template <class F> void fields(F&& f) const {
    f("causal", causal);
    f("scale", scale);
    f("logit_softcap", logit_softcap);
    f("q8_0_scores", q8_0_scores);
  }
  bool operator==(const SdpaAttrs&) const = default;
};

using AnyAttrs =
    std::variant<NoAttrs, ParameterAttrs, ConstantAttrs, TypeAttrs, VariableAttrs, ReshapeAttrs,
                 AxesAttrs, TransposeAttrs, AxisAttrs, TileAttrs, GatherAttrs, SliceAttrs,
                 SplitAttrs, ReduceAttrs, GeluAttrs, MatMulAttrs, RMSNormAttrs, LayerNormAttrs, RopeAttrs,
                 SdpaAttrs>;

}  // namespace ggflow::ir
