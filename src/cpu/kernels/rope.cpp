// Scalar twin of RoPE (rope.h): the table, the rotation, the checks and the token loop.
#include "cpu/kernels/rope.h"

#include <cmath>
#include <cstring>
#include <string>

namespace ggflow::cpu {

Status rope_check(const RopeParams& p, int64_t head_size) {
  const int64_t nd = rope_dims(p, head_size);
  if (head_size <= 0) return make_error("rope: head size must be positive, got " + std::to_string(head_size));
  if (nd < 0 || nd % 2 != 0 || nd > head_size)
    return make_error("rope: n_dims " + std::to_string(nd) + " must be even and at most the head size " +
                      std::to_string(head_size));
  if (nd > kRopeMaxDims)
    return make_error("rope: n_dims " + std::to_string(nd) + " exceeds the kernel's limit " + std::to_string(kRopeMaxDims));
  return {};
}

void rope_cache(const RopeParams& p, int64_t head_size, int32_t pos, float* cache) {
  const int64_t nd = rope_dims(p, head_size), half = nd / 2;
  float* C = cache;
  float* S = cache + nd;
  const float theta_scale =
      static_cast<float>(std::pow(static_cast<double>(p.freq_base), static_cast<double>(-2.0f / static_cast<float>(nd))));
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float f = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float th = p.freq_scale * (theta / f);
    const float c = static_cast<float>(std::cos(static_cast<double>(th))) * p.attn_factor;
    const float s = static_cast<float>(std::sin(static_cast<double>(th))) * p.attn_factor;
    theta *= theta_scale;
    const int64_t j0 = p.mode == RopeMode::normal ? 2 * i : i;
    const int64_t j1 = p.mode == RopeMode::normal ? 2 * i + 1 : i + half;
    C[j0] = c, C[j1] = c;
    S[j0] = -s, S[j1] = s;
  }
}

void rope_apply(Isa isa, const RopeParams& p, int64_t head_size, const float* cache, const float* x, float* y,
                int64_t heads) {
  if (isa == Isa::avx512) return detail::rope_apply_avx512(p, head_size, cache, x, y, heads);
  if (isa == Isa::avx2) return detail::rope_apply_avx2(p, head_size, cache, x, y, heads);
  const int64_t nd = rope_dims(p, head_size), half = nd / 2;
  const float* C = cache;
  const float* S = cache + nd;
  for (int64_t h = 0; h < heads; ++h) {
    const float* v = x + h * head_size;
    float* o = y + h * head_size;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t j0 = p.mode == RopeMode::normal ? 2 * i : i;
      const int64_t j1 = p.mode == RopeMode::normal ? 2 * i + 1 : i + half;
      const float x0 = v[j0], x1 = v[j1];
      o[j0] = x0 * C[j0] + x1 * S[j0];
      o[j1] = x1 * C[j1] + x0 * S[j1];
    }
    if (o != v) std::memcpy(o + nd, v + nd, static_cast<size_t>(head_size - nd) * sizeof(float));
  }
}

Status rope(Isa isa, const RopeParams& p, const float* x, int64_t xs, float* y, int64_t ys, const int32_t* pos,
            int64_t heads, int64_t head_size, int64_t t0, int64_t t1) {
  if (auto st = rope_check(p, head_size); !st) return st;
  float cache[2 * kRopeMaxDims];
  for (int64_t t = t0; t < t1; ++t) {
    rope_cache(p, head_size, pos[t], cache);
    rope_apply(isa, p, head_size, cache, x + t * xs, y + t * ys, heads);
  }
  return {};
}

}  // namespace ggflow::cpu
