// Log-probabilities of a logits row (see logprobs.h).
#include "text/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ggflow::text {

StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  const size_t n = logits.size();
  double max = -INFINITY;
  for (float x : logits) max = std::max(max, double(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - max);
  const double log_z = max + std::log(sum);  // log of the partition function

  StepLogprobs out;
  out.chosen = {chosen, double(logits[size_t(chosen)]) - log_z};
  const size_t k = std::min(n, size_t(std::max(top_n, 0)));
  if (k == 0) return out;
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  auto higher = [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), higher);
  out.top.reserve(k);
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], double(logits[size_t(ids[i])]) - log_z});
  return out;
}

}  // namespace ggflow::text
