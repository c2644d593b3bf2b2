// Rotary position embedding over [T, H, S] rows (the IR's RoPE, ir/ops/rope.cpp, GGML's formula).
//
// Per token, one table of 2*n_dims floats is computed once (rope_cache, scalar, shared by every
// ISA) and then applied to all heads of that token (rope_apply, the SIMD part):
//   theta_scale = float(pow(double(freq_base), double(-2.0f / float(n_dims))))
//   theta_0 = float(pos); theta_{i+1} = theta_i * theta_scale        (f32, GGML's repeated product)
//   th_i = freq_scale * (theta_i / ff_i)        (ff_i = freq_factors[i], or 1)
//   c_i = float(cos(double(th_i))) * attn_factor,  s_i = float(sin(double(th_i))) * attn_factor
// (pow, cos and sin in double and rounded once, so the table does not depend on libm's float
// functions. GGML and the IR use powf/cosf/sinf, which round differently in rare cases: cos/sin by
// an ulp now and then; theta_scale for 4 of 4608 (base, n_dims) pairs tried, none of them a
// common head size, where the kernel's value is the correctly rounded one.)
// The table holds, for each output dim k < n_dims, C[k] and S[k] such that
//   y[k] = x[k] * C[k] + x[partner(k)] * S[k]          (two products and one sum, each rounded)
//   normal: pairs (2i, 2i+1):     C = c_i for both, S[2i] = -s_i, S[2i+1] = s_i
//   neox:   pairs (i, i+n_dims/2): C = c_i for both, S[i] = -s_i, S[i+n_dims/2] = s_i
// which is exactly the IR's x0*c - x1*s and x0*s + x1*c. Dims >= n_dims pass through.
// Positions are int32 (GGML's inp_pos).
#pragma once

#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"

namespace ggflow::cpu {

enum class RopeMode { normal, neox };

struct RopeParams {
  int64_t n_dims = 0;  // rotated dims, even; 0 = the whole head
  RopeMode mode = RopeMode::normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;
  const float* freq_factors = nullptr;  // [n_dims/2] or nullptr
};

inline constexpr int64_t kRopeMaxDims = 1024;  // the largest n_dims rope() handles (stack table)

// n_dims resolved against the head size.
inline int64_t rope_dims(const RopeParams& p, int64_t head_size) { return p.n_dims == 0 ? head_size : p.n_dims; }
// Checks n_dims (even, <= head_size, <= kRopeMaxDims) and the head size.
Status rope_check(const RopeParams& p, int64_t head_size);

// The table for one position: cache[0, nd) = C, cache[nd, 2nd) = S, nd = rope_dims(p, head_size).
void rope_cache(const RopeParams& p, int64_t head_size, int32_t pos, float* cache);
// One token: `heads` rows of head_size, row h at x + h*head_size (y likewise). y may equal x.
void rope_apply(Isa isa, const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y,
                int64_t heads);
// Tokens [t0, t1) of x [T, heads, head_size] with token stride xs (y: ys), positions pos[T].
Status rope(Isa isa, const RopeParams& p, const float* x, int64_t xs, float* y, int64_t ys, const int32_t* pos,
            int64_t heads, int64_t head_size, int64_t t0, int64_t t1);

namespace detail {
void rope_apply_avx2(const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y, int64_t heads);
void rope_apply_avx512(const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y,
                       int64_t heads);
}  // namespace detail

}  // namespace ggflow::cpu
