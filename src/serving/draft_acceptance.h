// How far a sequence's drafts tend to stand, depth by depth: the adaptive speculation length's
// evidence (speculative.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace ggflow::serving {

// a_j = P(draft j stands | drafts 1..j-1 stood and draft j was proposed), from decayed counts of
// one sequence's verifications (each new one weighs 1, older ones 0.9 per verification since).
// One rate per depth rather than one per token: prompt-lookup drafts are all or nothing (a copied
// run matches for many tokens, new text not at all), which a single per-token rate reads as
// "each token stands with p" and so stops at 3-5 drafts where 7 pay (bench/spec_prompts.json).
// A depth's counts are shrunk towards the pooled per-token rate (accepted drafts over drafts
// tried, all depths, starting at 3 of 4) with the weight of kPooledWeight verifications, so a depth
// never proposed yet (a draft model's first steps ask for few) starts from what the others show.
class DraftAcceptance {
 public:
  static constexpr int32_t kMaxDepth = 32;  // pipeline's --spec-tokens bound
  // A verification of `proposed` drafts of which the first `accepted` stood.
  void observe(int32_t proposed, int32_t accepted) {
    proposed = std::clamp(proposed, 0, kMaxDepth);
    accepted = std::clamp(accepted, 0, proposed);
    if (proposed == 0) return;
    for (int32_t j = 1; j <= proposed && j <= accepted + 1; ++j) {
      hits_[size_t(j)] = kDecay * hits_[size_t(j)] + (j <= accepted ? 1.0 : 0.0);
      trials_[size_t(j)] = kDecay * trials_[size_t(j)] + 1.0;
    }
    pooled_hits_ = kDecay * pooled_hits_ + accepted;
    pooled_trials_ = kDecay * pooled_trials_ + accepted + (accepted < proposed ? 1.0 : 0.0);
  }
  // a_j for depth j in [1, kMaxDepth] (clamped).
  double rate(int32_t j) const {
    const auto i = size_t(std::clamp(j, 1, kMaxDepth));
    return (hits_[i] + kPooledWeight * pooled()) / (trials_[i] + kPooledWeight);
  }
  // Accepted drafts over drafts tried, every depth together.
  double pooled() const { return pooled_hits_ / pooled_trials_; }

 private:
  static constexpr double kDecay = 0.9, kPooledWeight = 2.0;
  std::array<double, kMaxDepth + 1> hits_{}, trials_{};  // index 0 unused
  double pooled_hits_ = 3.0, pooled_trials_ = 4.0;
};

}  // namespace ggflow::serving
