// Log-probabilities of a logits row (see logprobs.h).
#include "text/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ggflow::text {

namespace {
// A NaN logit (a damaged model's row) counts as -inf, as in the sampler: probability 0, listed
// after every number. Without this one NaN would make every log-probability NaN and the order of
// the top tokens arbitrary.
double logit(std::span<const float> logits, size_t i) {
  const float x = logits[i];
  return std::isnan(x) ? -INFINITY : double(x);
}
}  // namespace

StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  const size_t n = logits.size();
  double max = -INFINITY;
  for (size_t i = 0; i < n; ++i) max = std::max(max, logit(logits, i));
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(logit(logits, i) - max);
  const double log_z = max + std::log(sum);  // log of the partition function

  StepLogprobs out;
  out.chosen = {chosen, logit(logits, size_t(chosen)) - log_z};
  const size_t k = std::min(n, size_t(std::max(top_n, 0)));
  if (k == 0) return out;
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  auto higher = [&](int32_t a, int32_t b) {
    const double x = logit(logits, size_t(a)), y = logit(logits, size_t(b));
    return x > y || (x == y && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), higher);
  out.top.reserve(k);
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], logit(logits, size_t(ids[i])) - log_z});
  return out;
}

}  // namespace ggflow::text
