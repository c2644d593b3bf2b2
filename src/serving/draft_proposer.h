// DraftModelProposer: draft tokens from a smaller model of the same vocabulary (speculative.h).
//
// Model. The draft model runs as its own paged model (any BatchRunner: the PagedRunner of the
// draft file, compiled on the target's thread pool) over its own pool and block manager (no prefix
// caching), so nothing it does can touch the target's cache. For each request it remembers the
// tokens whose K/V its cache holds; a step first catches up on what changed since (the longest
// common prefix with the request's tokens stays: accepted drafts are not computed twice; a
// rejected suffix is dropped and its blocks freed), as one batch over all requests with at most
// `max_chunk` tokens each (a longer catch-up, a new prompt, takes several steps and proposes
// nothing meanwhile), then runs one decode batch per further draft token. Drafts are the draft
// model's argmax: deterministic proposals (speculative.h, Exactness). A draft whose LM head is cut
// (--draft-vocab: rows narrower than the vocabulary) cannot propose the ids beyond it; where
// prompt lookup (`set_lookup_beyond_head`) continues the text with such an id (an identifier of
// the prompt, mostly), that id is the draft instead of the argmax.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "runtime/paged_batch.h"
#include "serving/block_manager.h"
#include "serving/speculative.h"

namespace ggflow::serving {

class DraftModelProposer final : public Proposer {
 public:
  // `runner` (outlives the proposer) uses a pool of `num_blocks` blocks. `cost_per_token`: the
  // draft's decode step over the target's (the adaptive k's model; e.g. the weights' size ratio).
  DraftModelProposer(runtime::BatchRunner& runner, int32_t num_blocks, double cost_per_token, int32_t max_chunk = 512);

  std::string name() const override { return "draft"; }
  double cost_per_token() const override { return cost_; }
  double seconds_per_token() const override { return pass_n_ > 0 ? pass_s_ : -1.0; }
  Status propose(std::span<DraftRequest> requests) override;
  void forget(RequestId id) override;
  // Prompt lookup with n-grams of 2 to max_ngram tokens for the ids a cut head cannot propose.
  void set_lookup_beyond_head(int32_t max_ngram) { lookup_.emplace(max_ngram, std::min(2, max_ngram)); }

  const BlockManager& blocks() const { return blocks_; }
  std::vector<int32_t> cached_tokens(RequestId id) const;  // the tokens of `id` in the draft's cache

 private:
  runtime::BatchRunner& runner_;
  BlockManager blocks_;
  double cost_;
  int32_t max_chunk_;
  double pass_s_ = 0;     // seconds per decode batch after the catch-up (a draft token)
  int64_t pass_n_ = 0;
  std::unordered_map<RequestId, std::vector<int32_t>> cached_;  // tokens whose K/V the cache holds
  std::optional<NgramProposer> lookup_;
  std::vector<int32_t> text_, found_;  // lookup's scratch: a request's tokens and drafts so far
};

}  // namespace ggflow::serving
