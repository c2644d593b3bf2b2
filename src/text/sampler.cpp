// Sampler (see sampler.h for the order of application).
#include "text/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ggflow::text {

Status SamplingParams::validate(int64_t vocab_size) const {
  auto bad = [](const std::string& what, const std::string& hint) { return make_error("invalid sampling parameter: " + what, hint); };
  if (!std::isfinite(temperature) || temperature < 0)
    return bad("temperature = " + std::to_string(temperature) + " must be >= 0", "use 0 for greedy decoding");
  if (top_k < 0) return bad("top_k = " + std::to_string(top_k) + " must be >= 0", "use 0 to disable top-k");
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p = " + std::to_string(top_p) + " must be in (0, 1]", "use 1 to disable top-p");
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p = " + std::to_string(min_p) + " must be in [0, 1]", "use 0 to disable min-p");
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty = " + std::to_string(repetition_penalty) + " must be > 0", "use 1 to disable it");
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    return bad("presence_penalty = " + std::to_string(presence_penalty) + " must be in [-2, 2]", "use 0 to disable it");
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    return bad("frequency_penalty = " + std::to_string(frequency_penalty) + " must be in [-2, 2]", "use 0 to disable it");
  for (const auto& [tok, bias] : logit_bias) {
    if (tok < 0 || (vocab_size > 0 && tok >= vocab_size))
      return bad("logit_bias token id " + std::to_string(tok) + " is outside the vocabulary (" +
                     std::to_string(vocab_size) + " tokens)", "use ids from the model's tokenizer");
    if (!(bias >= -100 && bias <= 100))
      return bad("logit_bias for token " + std::to_string(tok) + " = " + std::to_string(bias) + " must be in [-100, 100]", "");
  }
  for (int32_t tok : stop_token_ids)
    if (tok < 0 || (vocab_size > 0 && tok >= vocab_size))
      return bad("stop token id " + std::to_string(tok) + " is outside the vocabulary", "use ids from the model's tokenizer");
  for (const auto& s : stop)
    if (s.empty()) return bad("stop strings must not be empty", "remove the empty string from `stop`");
  if (prompt_logprobs < -1 || prompt_logprobs > 20)
    return bad("prompt_logprobs = " + std::to_string(prompt_logprobs) + " must be in [0, 20] (or -1 for none)",
               "ask for at most 20 top tokens");
  if (logprobs < -1 || logprobs > 20)
    return bad("logprobs = " + std::to_string(logprobs) + " must be in [0, 20] (or -1 for none)", "ask for at most 20 top tokens");
  if (max_tokens < -1 || max_tokens == 0)
    return bad("max_tokens = " + std::to_string(max_tokens) + " must be >= 1", "omit it (or -1) for no limit");
  return {};
}

Sampler::Sampler(SamplingParams params, std::span<const int32_t> prompt) : p_(std::move(params)) {
  rng_.seed(p_.seed ? *p_.seed : (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  for (int32_t t : prompt) ++prompt_counts_[t];
}

void Sampler::accept(int32_t token) { ++generated_counts_[token]; }

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = logits.size();
  work_.assign(logits.begin(), logits.end());  // f64 [n_vocab]
  // A NaN logit (a damaged model's row) counts as -inf: it would break the ordering of every
  // step below (and std::sort's preconditions), and such a token is never worth choosing.
  for (double& x : work_)
    if (std::isnan(x)) x = -INFINITY;
  // 1. logit_bias
  for (const auto& [tok, bias] : p_.logit_bias)
    if (size_t(tok) < n) work_[size_t(tok)] += bias;
  // 2. penalties
  if (p_.repetition_penalty != 1.0) {
    auto penalize = [&](int32_t tok) {
      double& l = work_[size_t(tok)];
      l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    };
    for (const auto& [tok, c] : prompt_counts_)
      if (size_t(tok) < n) penalize(tok);
    for (const auto& [tok, c] : generated_counts_)
      if (size_t(tok) < n && !prompt_counts_.count(tok)) penalize(tok);
  }
  for (const auto& [tok, c] : generated_counts_) {
    if (size_t(tok) >= n) continue;
    work_[size_t(tok)] -= p_.presence_penalty + p_.frequency_penalty * c;
  }
  // 3. greedy
  if (p_.temperature == 0) {
    size_t best = 0;
    for (size_t k = 1; k < n; ++k)
      if (work_[k] > work_[best]) best = k;
    accept(int32_t(best));
    return int32_t(best);
  }
  // Candidates sorted by logit, descending, lowest id first on ties (the order of steps 4-9).
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return work_[size_t(a)] > work_[size_t(b)] || (work_[size_t(a)] == work_[size_t(b)] && a < b);
  };
  // 4. top-k
  size_t keep = n;
  if (p_.top_k > 0 && size_t(p_.top_k) < n) {
    keep = size_t(p_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + long(keep), ids.end(), by_logit);
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  // drop -inf candidates (e.g. banned by logit_bias = -100 is finite, but logits may carry -inf)
  while (ids.size() > 1 && std::isinf(work_[size_t(ids.back())]) && work_[size_t(ids.back())] < 0) ids.pop_back();
  // 5-6. temperature, softmax (f64)
  std::vector<double> prob(ids.size());
  const double top = work_[size_t(ids[0])] / p_.temperature;
  double sum = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    prob[k] = std::exp(work_[size_t(ids[k])] / p_.temperature - top);
    sum += prob[k];
  }
  for (double& q : prob) q /= sum;
  // 7. top-p: smallest prefix whose mass reaches top_p
  if (p_.top_p < 1.0) {
    double mass = 0;
    size_t k = 0;
    while (k < prob.size()) {
      mass += prob[k++];
      if (mass >= p_.top_p) break;
    }
    prob.resize(k);
  }
  // 8. min-p, relative to the most likely token
  if (p_.min_p > 0) {
    const double floor_p = p_.min_p * prob[0];
    size_t k = 1;
    while (k < prob.size() && prob[k] >= floor_p) ++k;
    prob.resize(k);
  }
  double total = std::accumulate(prob.begin(), prob.end(), 0.0);
  // 9. draw
  const double u = double(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  size_t pick = prob.size() - 1;
  for (size_t k = 0; k < prob.size(); ++k) {
    acc += prob[k];
    if (u < acc) { pick = k; break; }
  }
  int32_t tok = ids[pick];
  accept(tok);
  return tok;
}

}  // namespace ggflow::text
