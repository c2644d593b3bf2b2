// One query row of attention, the arithmetic every attention kernel of the evaluator shares
// (ScaledDotProductAttention and PagedAttention), so that the SDPA and paged layouts give the same
// bits by construction: score_j = (Σ_d q[d]·k_j[d]) · scale, or with logit soft-capping
// (softcap c != 0, Gemma 2; llama.cpp's FLASH_ATTN_EXT logit_softcap)
// score_j = c · tanh((Σ_d q[d]·k_j[d]) · (scale / c)), then + a bias or mask the caller adds,
// then a softmax with max subtraction over the keys in order, then
// out[d] = (Σ_j p_j · v_j[d]) / Σ_j p_j, every sum in key order, in f32. Over a q8_0 key cache
// (SdpaAttrs::q8_0_scores) the dot products are attention_score_q8's instead.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gguf/dequant.h"
#include "gguf/quantize.h"

namespace ggflow::ir {

// (Σ_d q[d]·k[d]) · scale, d in order; with softcap c != 0: c · tanh((Σ_d q[d]·k[d]) · (scale / c)),
// the f32 division once, then f32 multiply, libm tanhf, f32 multiply (ggml's order).
inline float attention_score(const float* q, const float* k, int64_t head_size, float scale, float softcap = 0.0f) {
  float s = 0.0f;
  for (int64_t d = 0; d < head_size; ++d) s += q[d] * k[d];
  if (softcap == 0.0f) return s * scale;
  return softcap * std::tanh(s * (scale / softcap));
}

// A row as q8_0 codes and block scales (gguf::quantize_q8_0), for q8_0 scores; n a multiple of 32.
struct Q8Row {
  std::vector<int8_t> q;
  std::vector<float> d;
  bool finite = true;
};
inline Q8Row q8_row(const float* x, int64_t n) {
  Q8Row r;
  for (int64_t i = 0; i < n; ++i) r.finite = r.finite && std::isfinite(x[i]);
  if (!r.finite) return r;
  std::vector<uint8_t> b(static_cast<size_t>(n / gguf::kQ8_0Block * gguf::kQ8_0Bytes));
  gguf::quantize_q8_0(x, n, b.data());
  for (int64_t k = 0; k < n / gguf::kQ8_0Block; ++k) {
    const uint8_t* blk = b.data() + k * gguf::kQ8_0Bytes;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    r.d.push_back(gguf::f16_to_f32(h));
    for (int t = 0; t < gguf::kQ8_0Block; ++t) r.q.push_back(static_cast<int8_t>(blk[2 + t]));
  }
  return r;
}

// SdpaAttrs::q8_0_scores (and PagedAttention over a q8_0 cache): llama.cpp's q8_0 arithmetic, its
// CPU flash attention over a q8_0 key cache (the query converted to q8_0, ggml_vec_dot_q8_0_q8_0):
// dot = Σ_b (float)(Σ_t q_b[t]·k_b[t]) · (dq_b·dk_b), blocks in order, in f32; then scaled or
// soft-capped as attention_score. NaN when the query row is not finite.
inline float attention_score_q8(const Q8Row& q, const Q8Row& k, float scale, float softcap = 0.0f) {
  if (!q.finite || !k.finite) return std::numeric_limits<float>::quiet_NaN();
  float s = 0.0f;
  for (size_t b = 0; b < q.d.size(); ++b) {
    int32_t i = 0;
    for (int64_t t = 0; t < gguf::kQ8_0Block; ++t) i += q.q[b * gguf::kQ8_0Block + t] * k.q[b * gguf::kQ8_0Block + t];
    s += static_cast<float>(i) * (q.d[b] * k.d[b]);
  }
  if (softcap == 0.0f) return s * scale;
  return softcap * std::tanh(s * (scale / softcap));
}

// Softmax over `scores` (-inf = masked) and the weighted sum of the value rows; `value(j)` points
// at key j's value row of `v_size` floats. A row whose keys are all masked gives zeros.
template <class ValueRow>
void attend_row(std::vector<float>& scores, ValueRow value, int64_t v_size, float* out) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float mx = ninf;
  for (float s : scores) mx = std::max(mx, s);
  float sum = 0.0f;
  for (float& s : scores) {
    s = mx == ninf ? 0.0f : std::exp(s - mx);
    sum += s;
  }
  // out[d] = Σ_j p_j · v_j[d] in key order for every d; V is read row by row (each out[d] sees
  // the same additions in the same order as a loop over j inside a loop over d).
  const int64_t nk = static_cast<int64_t>(scores.size());
  for (int64_t d = 0; d < v_size; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < nk; ++j) {
    const float p = scores[j];
    const float* v = value(j);
    for (int64_t d = 0; d < v_size; ++d) out[d] += p * v[d];
  }
  for (int64_t d = 0; d < v_size; ++d) out[d] = sum > 0.0f ? out[d] / sum : 0.0f;
}

}  // namespace ggflow::ir
