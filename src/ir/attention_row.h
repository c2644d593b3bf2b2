// One query row of attention, the arithmetic every attention kernel of the evaluator shares
// (ScaledDotProductAttention and PagedAttention), so that the SDPA and paged layouts give the same
// bits by construction: score_j = (Σ_d q[d]·k_j[d]) · scale, or with logit soft-capping
// (softcap c != 0, Gemma 2; llama.cpp's FLASH_ATTN_EXT logit_softcap)
// score_j = c · tanh((Σ_d q[d]·k_j[d]) · (scale / c)), then + a bias or mask the caller adds,
// then a softmax with max subtraction over the keys in order, then
// out[d] = (Σ_j p_j · v_j[d]) / Σ_j p_j, every sum in key order, in f32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ggflow::ir {

// (Σ_d q[d]·k[d]) · scale, d in order; with softcap c != 0: c · tanh((Σ_d q[d]·k[d]) · (scale / c)),
// the f32 division once, then f32 multiply, libm tanhf, f32 multiply (ggml's order).
inline float attention_score(const float* q, const float* k, int64_t head_size, float scale, float softcap = 0.0f) {
  float s = 0.0f;
  for (int64_t d = 0; d < head_size; ++d) s += q[d] * k[d];
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
