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
  const int32_t greedy = adjust(logits);
  if (greedy >= 0) {
    accept(greedy);
    return greedy;
  }
  distribution();
  const int32_t tok = draw(-1);
  accept(tok);
  return tok;
}

int32_t Sampler::verify(std::span<const float> logits, int32_t draft) {
  const int32_t greedy = adjust(logits);
  if (greedy >= 0) {  // temperature 0: the draft stands iff it is the argmax
    accept(greedy);
    return greedy;
  }
  distribution();
  // Rejection sampling with a proposal that puts all its mass on `draft` (q = δ_draft):
  // accept with probability min(1, p(draft) / q(draft)) = p(draft); otherwise draw from the
  // residual max(0, p - q) renormalized, which is p without `draft`. The emitted token is then
  // distributed exactly as p (Leviathan et al. 2023, Chen et al. 2023).
  double p_draft = 0;
  for (size_t k = 0; k < prob_.size(); ++k)
    if (ids_[k] == draft) p_draft = prob_[k] / total_;
  if (p_draft > 0) {
    const double u = double(rng_() >> 11) * 0x1.0p-53;
    if (u < p_draft) {
      accept(draft);
      return draft;
    }
  }
  const int32_t tok = draw(draft);
  accept(tok);
  return tok;
}

int32_t Sampler::adjust(std::span<const float> logits) {
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
  if (p_.temperature != 0) return -1;
  size_t best = 0;
  for (size_t k = 1; k < n; ++k)
    if (work_[k] > work_[best]) best = k;
  return int32_t(best);
}

void Sampler::distribution() {
  const size_t n = work_.size();
  // Candidates sorted by logit, descending, lowest id first on ties (the order of steps 4-9).
  ids_.resize(n);
  std::iota(ids_.begin(), ids_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return work_[size_t(a)] > work_[size_t(b)] || (work_[size_t(a)] == work_[size_t(b)] && a < b);
  };
  // 4. top-k
  if (p_.top_k > 0 && size_t(p_.top_k) < n) {
    const size_t keep = size_t(p_.top_k);
    std::partial_sort(ids_.begin(), ids_.begin() + long(keep), ids_.end(), by_logit);
    ids_.resize(keep);
  } else {
    std::sort(ids_.begin(), ids_.end(), by_logit);
  }
  // drop -inf candidates (e.g. banned by logit_bias = -100 is finite, but logits may carry -inf)
  while (ids_.size() > 1 && std::isinf(work_[size_t(ids_.back())]) && work_[size_t(ids_.back())] < 0) ids_.pop_back();
  // 5-6. temperature, softmax (f64)
  prob_.resize(ids_.size());
  const double top = work_[size_t(ids_[0])] / p_.temperature;
  double sum = 0;
  for (size_t k = 0; k < ids_.size(); ++k) {
    prob_[k] = std::exp(work_[size_t(ids_[k])] / p_.temperature - top);
    sum += prob_[k];
  }
  for (double& q : prob_) q /= sum;
  // 7. top-p: smallest prefix whose mass reaches top_p
  if (p_.top_p < 1.0) {
    double mass = 0;
    size_t k = 0;
    while (k < prob_.size()) {
      mass += prob_[k++];
      if (mass >= p_.top_p) break;
    }
    prob_.resize(k);
  }
  // 8. min-p, relative to the most likely token
  if (p_.min_p > 0) {
    const double floor_p = p_.min_p * prob_[0];
    size_t k = 1;
    while (k < prob_.size() && prob_[k] >= floor_p) ++k;
    prob_.resize(k);
  }
  ids_.resize(prob_.size());
  total_ = std::accumulate(prob_.begin(), prob_.end(), 0.0);
}

int32_t Sampler::draw(int32_t excluded) {
  // 9. draw, over the candidates but `excluded` (the rejected draft: the residual distribution).
  double total = total_;
  for (size_t k = 0; k < prob_.size(); ++k)
    if (ids_[k] == excluded) total -= prob_[k];
  const double u = double(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  size_t pick = prob_.size();
  for (size_t k = 0; k < prob_.size(); ++k) {
    if (ids_[k] == excluded) continue;
    pick = k;  // the last allowed candidate if rounding leaves u beyond every partial sum
    acc += prob_[k];
    if (u < acc) break;
  }
  if (pick == prob_.size()) return ids_[0];  // only `excluded` had mass (cannot happen: it was rejected)
  return ids_[pick];
}

}  // namespace ggflow::text
