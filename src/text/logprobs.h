// Log-probabilities of one step's distribution, as the OpenAI API reports them (`logprobs`,
// `top_logprobs`): the log-softmax of the model's raw logits row, before any sampling adjustment
// (logit_bias, penalties, temperature, truncation), computed in float64. A NaN logit counts as
// -inf (log-probability -inf, listed after every other token).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ggflow::text {

struct TokenLogprob {
  int32_t token = 0;
  double logprob = 0;  // <= 0
};

struct StepLogprobs {
  TokenLogprob chosen;              // the token that was generated
  std::vector<TokenLogprob> top;    // the most likely tokens, descending (lowest id first on ties)
};

// `logits`: f32 [n_vocab]; `chosen` in [0, n_vocab); `top_n` >= 0 (clamped to n_vocab).
StepLogprobs step_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n);

}  // namespace ggflow::text
