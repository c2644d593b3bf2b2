// Sampler: turns one step's logits into the next token. Order of application, for a logits row
// over the vocabulary:
//   1. logit_bias          logit[t] += bias[t]
//   2. penalties           repetition (over prompt + generated tokens; logit/r if > 0, logit*r if
//                          <= 0), then presence (-p once per generated token seen) and frequency
//                          (-f * count in the generated tokens)
//   3. greedy              temperature == 0: the argmax (lowest id on ties); steps 4-8 are skipped
//   4. top-k               keep the k highest logits (k == 0: all; ties at the cut are kept in id order)
//   5. temperature         logit /= temperature
//   6. softmax             over the kept tokens (in float64)
//   7. top-p               keep the smallest prefix of tokens sorted by probability (descending,
//                          lowest id first on ties) whose mass reaches top_p
//   8. min-p               drop tokens with p < min_p * p_max; renormalize
//   9. draw                u in [0, 1) from the request's own std::mt19937_64 (53 high bits of one
//                          draw), walk the cumulative distribution in the order of step 7
// A NaN logit counts as -inf (never chosen while another token is possible).
// The generator is per request and seeded from `seed` (or from std::random_device when absent):
// the same seed and the same logits give the same tokens whatever else runs in the process.
// Stopping (stop ids, stop strings, max_tokens) lives in sampler_stop.h.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace ggflow::text {

struct SamplingParams {
  double temperature = 1.0;          // >= 0; 0 selects greedy decoding
  int32_t top_k = 0;                 // >= 0; 0 disables
  double top_p = 1.0;                // (0, 1]
  double min_p = 0.0;                // [0, 1]
  double repetition_penalty = 1.0;   // > 0; 1 disables
  double presence_penalty = 0.0;     // [-2, 2]
  double frequency_penalty = 0.0;    // [-2, 2]
  std::vector<std::pair<int32_t, double>> logit_bias;  // token id -> bias in [-100, 100]
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;     // stop strings, never emitted
  int64_t max_tokens = -1;           // generated tokens at most; -1: no limit
  int32_t logprobs = -1;             // -1: none; n in [0, 20]: record each step's log-probabilities
                                     // (the chosen token and the n most likely; text/logprobs.h)
  int32_t prompt_logprobs = -1;      // -1: none; n in [0, 20]: the same for every prompt token after
                                     // the first (the prompt is then computed in full, not cached)
  bool ignore_eos = false;           // the vocabulary's end-of-generation tokens do not stop it (only
                                     // stop_token_ids, stop and max_tokens do; benchmarks)

  // Rejects invalid values with a message naming the parameter; `vocab_size` bounds token ids
  // (pass 0 to skip that check).
  Status validate(int64_t vocab_size = 0) const;
};

class Sampler {
 public:
  // `params` must have passed validate(); `prompt` feeds the repetition penalty.
  explicit Sampler(SamplingParams params, std::span<const int32_t> prompt = {});

  // Samples the next token from `logits` (f32 [n_vocab]) and records it as generated.
  int32_t sample(std::span<const float> logits);
  // Records a token generated elsewhere (e.g. forced), for the penalties.
  void accept(int32_t token);

  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> prompt_counts_, generated_counts_;
  std::vector<double> work_;  // f64 [n_vocab] adjusted logits of the current step
};

}  // namespace ggflow::text
