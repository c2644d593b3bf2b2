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

int32_t best_spec_length(double a, int32_t max_k, double verify_cost, double propose_cost) {
  a = std::clamp(a, 0.0, 0.999);
  int32_t best = 0;
  double best_rate = 1.0;  // k = 0: one token per step at cost 1
  double emitted = 1.0, ak = 1.0;
  for (int32_t k = 1; k <= max_k; ++k) {
    ak *= a;
    emitted += ak;  // 1 + a + ... + a^k
    const double rate = emitted / (1.0 + k * (verify_cost + propose_cost));
    if (rate > best_rate * 1.0001) best = k, best_rate = rate;
  }
  return best;
}

}  // namespace ggflow::serving
