// Greedy decoding, the one definition: argmax (lowest id on ties) and the prompt-then-n-tokens
// loop the layout tests, the goldens and `ggflow run --tokens` use; and the NaN/Inf check of a
// logits row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "runtime/sequence_runner.h"

namespace ggflow::runtime {

int32_t argmax(std::span<const float> row);

// "NaN" or "Inf" (the first non-finite value of `row`), nullptr when every value is finite.
// One pass over the bits, cheap enough for every sampled row of every step: a token chosen from a
// NaN row is noise (every comparison with NaN is false), so callers end the request instead.
const char* non_finite(std::span<const float> row);

// The prompt, then `n` greedy tokens. `rows` (optional) receives the logits row each token was
// chosen from: [n, n_vocab] (the prompt's last row, then each decode step's).
Result<std::vector<int32_t>> generate_greedy(SequenceRunner& runner, std::span<const int32_t> prompt, int n,
                                             std::vector<float>* rows = nullptr);

}  // namespace ggflow::runtime
