// Builders: one function per op, so that graphs read like the math. Each returns the new node
// (shapes inferred; an invalid node carries error(), reported by the verifier).
//   auto x = ops::parameter(ElementType::f32, {1, T, 576}, "x");   // f32 [1, T, 576]
//   auto y = ops::rms_norm(x, w, 1e-5f);                           // f32 [1, T, 576]
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/node.h"

namespace ggflow::ir::ops {

NodePtr parameter(ElementType type, Shape shape, std::string name);
NodePtr constant(Tensor value, std::string name = {});
NodePtr const_i64(std::vector<int64_t> values, std::optional<std::vector<int64_t>> shape = std::nullopt);
NodePtr const_i32(std::vector<int64_t> values, std::optional<std::vector<int64_t>> shape = std::nullopt);
NodePtr const_f32(std::vector<float> values, std::optional<std::vector<int64_t>> shape = std::nullopt);
NodePtr scalar_f32(float v);
NodePtr scalar_i64(int64_t v);
NodePtr result(Value v, std::string name = {});
NodePtr convert(Value v, ElementType to);
NodePtr shape_of(Value v, ElementType type = ElementType::i64);
NodePtr range(Value start, Value stop, Value step, ElementType type = ElementType::i64);
NodePtr read_value(VariableAttrs var, std::optional<Value> init = std::nullopt);
NodePtr assign(Value v, VariableAttrs var);

NodePtr reshape(Value v, Value target, bool special_zero = false);
NodePtr reshape(Value v, std::vector<int64_t> target, bool special_zero = false);
NodePtr squeeze(Value v, std::vector<int64_t> axes = {});
NodePtr unsqueeze(Value v, std::vector<int64_t> axes);
NodePtr transpose(Value v, std::vector<int64_t> perm);
NodePtr concat(std::vector<Value> vs, int64_t axis);
NodePtr broadcast(Value v, Value target_shape);
NodePtr tile(Value v, std::vector<int64_t> repeats);

NodePtr gather(Value data, Value indices, int64_t axis, int64_t batch_dims = 0);
NodePtr slice(Value v, std::vector<int64_t> starts, std::vector<int64_t> ends,
              std::vector<int64_t> steps, std::vector<int64_t> axes);
NodePtr variadic_split(Value v, int64_t axis, std::vector<int64_t> lengths);
NodePtr scatter_update(Value data, Value indices, Value updates, int64_t axis);

NodePtr add(Value a, Value b);
NodePtr subtract(Value a, Value b);
NodePtr multiply(Value a, Value b);
NodePtr divide(Value a, Value b);
NodePtr power(Value a, Value b);
NodePtr maximum(Value a, Value b);
NodePtr equal(Value a, Value b);
NodePtr less(Value a, Value b);
NodePtr less_equal(Value a, Value b);
NodePtr greater_equal(Value a, Value b);
NodePtr logical_and(Value a, Value b);
NodePtr select(Value cond, Value then_v, Value else_v);
NodePtr sqrt(Value v);
NodePtr exp(Value v);
NodePtr tanh(Value v);
NodePtr sin(Value v);
NodePtr cos(Value v);
NodePtr swish(Value v);
inline NodePtr silu(Value v) { return swish(std::move(v)); }
NodePtr gelu(Value v, GeluMode mode = GeluMode::erf);

NodePtr reduce_sum(Value v, std::vector<int64_t> axes, bool keep_dims = false);
NodePtr reduce_mean(Value v, std::vector<int64_t> axes, bool keep_dims = false);
NodePtr reduce_prod(Value v, std::vector<int64_t> axes, bool keep_dims = false);
NodePtr softmax(Value v, int64_t axis);
NodePtr rms_norm(Value v, std::optional<Value> gamma, float eps);
NodePtr layer_norm(Value v, float eps);  // (x - mean) / sqrt(var + eps) over the innermost axis

NodePtr matmul(Value a, Value b, bool transpose_a = false, bool transpose_b = false);
NodePtr rope(Value x, Value positions, RopeAttrs attrs, std::optional<Value> freq_factors = std::nullopt);
// logit_softcap c != 0: scores c · tanh(q·k · (scale / c)) before the mask (Gemma 2).
// q8_0_scores: the scores in q8_0 arithmetic (SdpaAttrs).
NodePtr sdpa(Value q, Value k, Value v, std::optional<Value> mask, bool causal, float scale = 0.0f,
             float logit_softcap = 0.0f, bool q8_0_scores = false);
// PagedAttention (ops/paged_attention.cpp): inputs in DESIGN.md section 4 order; three outputs:
// attention [T, Hq·Sv], key_cache and value_cache with this step's rows written.
struct PagedAttentionInputs {
  Value q, k, v, key_cache, value_cache;                     // [T,Hq·S] [T,Hkv·S] [T,Hkv·Sv] [NB,Hkv,32,S] [NB,Hkv,32,Sv]
  Value past_lens, subsequence_begins, block_indices, block_indices_begins, max_context_len;  // i32
  Value scale, sliding_window, alibi_slopes;                 // f32 [], i32 [], f32 [Hq] or [0]
  std::optional<Value> logit_softcap = std::nullopt;         // f32 [], input 13; absent = 0 (off)
};
NodePtr paged_attention(const PagedAttentionInputs& in);

}  // namespace ggflow::ir::ops
