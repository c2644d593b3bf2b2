// Speculative decoding's proposers and adaptive length (see speculative.h).
#include "serving/speculative.h"

#include <algorithm>
#include <cmath>

namespace ggflow::serving {

NgramProposer::NgramProposer(int32_t max_ngram, int32_t min_ngram)
    : max_ngram_(std::max(1, max_ngram)), min_ngram_(std::clamp(min_ngram, 1, std::max(1, max_ngram))) {}

void NgramProposer::propose_one(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>& draft) const {
  draft.clear();
  const auto len = int64_t(tokens.size());
  for (int64_t n = std::min<int64_t>(max_ngram_, len - 1); n >= min_ngram_; --n) {
    const auto suffix = tokens.subspan(size_t(len - n));  // the last n tokens
    // The most recent earlier occurrence: start i in [0, len - n - 1], so a continuation exists.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (tokens[size_t(i + n - 1)] != suffix.back()) continue;  // cheap first test
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n, to = std::min<int64_t>(len, from + max_tokens);
      draft.assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

Status NgramProposer::propose(std::span<DraftRequest> requests) {
  for (DraftRequest& r : requests) propose_one(r.tokens, r.max_tokens, *r.draft);
  return {};
}

int32_t best_spec_length(const std::function<double(int32_t)>& accept_at, int32_t max_k,
                         const std::function<double(int32_t)>& cost) {
  int32_t best = 0;
  double best_rate = 1.0 / cost(0);  // k = 0: one token per plain step
  double emitted = 1.0, stands = 1.0;
  for (int32_t k = 1; k <= max_k; ++k) {
    stands *= std::clamp(accept_at(k), 0.0, 0.999);  // drafts 1..k all stand
    emitted += stands;
    const double rate = emitted / cost(k);
    if (rate > best_rate * 1.0001) best = k, best_rate = rate;
  }
  return best;
}

int32_t best_spec_length(double a, int32_t max_k, double verify_cost, double propose_cost) {
  return best_spec_length([&](int32_t) { return a; }, max_k,
                          [&](int32_t k) { return 1.0 + k * (verify_cost + propose_cost); });
}

void update_mean(double& mean, int64_t& n, double x) {
  ++n;
  mean += (x - mean) / double(std::min<int64_t>(n, 20));
}

SpecCostModel::SpecCostModel(int32_t max_tokens, double prior_token_cost)
    : t_(size_t(std::max(1, max_tokens)) + 1, 0.0), n_(t_.size(), 0), prior_(prior_token_cost) {}

void SpecCostModel::observe_step(int64_t tokens, double seconds) {
  if (tokens < 1 || tokens >= int64_t(t_.size()) || !(seconds > 0)) return;
  update_mean(t_[size_t(tokens)], n_[size_t(tokens)], seconds);
}

double SpecCostModel::step_seconds(int64_t tokens) const {
  tokens = std::clamp<int64_t>(tokens, 1, int64_t(t_.size()) - 1);
  const auto at = size_t(tokens);
  if (n_[at] >= kSettled) return t_[at];
  // The nearest other size with settled samples (else with any; the smaller one on a tie), scaled
  // by the prior; a size with a few samples of its own takes the lower of its mean and that, so
  // one slow first sample (a cold cache, a neighbour's burst) does not keep it from being tried.
  double est = 1 + prior_ * double(tokens - 1);  // nothing measured: in units of a one-token step
  bool found = false;
  for (int64_t need : {kSettled, int64_t{1}}) {
    for (int64_t d = 1; d < int64_t(t_.size()) && !found; ++d)
      for (int64_t m : {tokens - d, tokens + d})
        if (!found && m >= 1 && m < int64_t(t_.size()) && n_[size_t(m)] >= need) {
          est = t_[size_t(m)] * (1 + prior_ * double(tokens - 1)) / (1 + prior_ * double(m - 1));
          found = true;
        }
    if (found) break;
  }
  return n_[at] > 0 ? std::min(t_[at], est) : est;
}

int32_t SpecCostModel::best_length(const DraftAcceptance& a, int32_t max_k, int64_t planned, int64_t decoding, double draft_pass_s) const {
  const double share = step_seconds(decoding) / double(std::max<int64_t>(1, decoding));  // a plain step's, per sequence
  const double before = step_seconds(planned);
  return best_spec_length([&](int32_t j) { return a.rate(j); }, max_k, [&](int32_t k) {
    return share + (step_seconds(planned + k) - before) + k * draft_pass_s;
  });
}

}  // namespace ggflow::serving
