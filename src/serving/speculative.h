// Speculative decoding: proposers of draft tokens, and how many to ask for.
//
// Model. Before a step, the engine asks a Proposer for up to k draft tokens to follow each
// decoding sequence (its tokens end with the pending token, the one sampled last). The scheduler
// runs the pending token and its drafts as one verification chunk, every row sampled; the engine
// then walks the rows in order: row i's token is chosen exactly as plain decoding chooses it (the
// request's own sampler: the argmax at temperature 0, else one draw of its seeded generator), and
// draft i stands iff it equals that token. The first draft that does not is replaced by it; when
// all stand, the last row gives one more. The K/V of the pending token and the accepted drafts is
// committed; the rejected drafts' is dropped (BlockManager::truncate), so the block manager and
// the prefix cache only ever hold what plain decoding would hold.
//
// Exactness. The paged model's rows do not depend on the batch they run in (batch invariance,
// tested by memcmp): the verification chunk's row for a position equals the decode row plain
// decoding would compute there, bit for bit. And the sampler sees the same rows in the same order
// and draws once per emitted token, as in plain decoding. So the output is plain decoding's, token
// for token, for greedy and for seeded sampling alike, whatever the proposer proposes.
// For sampling this is the rejection rule of Leviathan et al. / Chen et al. for proposals that put
// all their mass on one token (ours are deterministic: prompt lookup, a draft model's argmax): it
// accepts draft d with probability min(1, p(d) / q(d)) = p(d) and otherwise draws from
// max(0, p - q) normalized = p without d. Accepting iff the target's own draw equals d has exactly
// these probabilities; it realizes the rule with the target's draw, which is why a seed gives the
// same text with or without speculation.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "serving/draft_acceptance.h"
#include "serving/sequence.h"

namespace ggflow::serving {

struct SpecConfig {
  int32_t num_spec_tokens = 0;  // k at most per sequence and step; 0: speculation off
  // Tokens of a step's decode rows and verification chunks together at most: speculation is off
  // with this many decoding sequences (and SpecCostModel shrinks it well before, as the batch's
  // step stops being bandwidth-bound).
  int32_t max_step_tokens = 32;
  // SpecCostModel's prior for a step size not measured yet: each token past the first costs this
  // fraction of a one-token step (the weights are read once per step).
  double prior_token_cost = 0.05;
  bool adaptive = true;         // false: always ask for num_spec_tokens (tests, benchmarks)
};

// One sequence's draft request.
struct DraftRequest {
  RequestId id = 0;
  std::span<const int32_t> tokens;  // the sequence so far, ending with the pending token
  int32_t max_tokens = 0;           // propose at most this many (>= 1)
  std::vector<int32_t>* draft = nullptr;  // out: the proposals (possibly none)
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  // Time to propose one more token, as a fraction of the target's decode step: the adaptive k's
  // prior until seconds_per_token() is measured.
  virtual double cost_per_token() const = 0;
  // Measured seconds per further draft token (a draft model's decode pass), < 0 until measured.
  virtual double seconds_per_token() const { return cost_per_token() == 0 ? 0.0 : -1.0; }
  // Fills each request's draft. An error drops every proposal of the step (decoding goes on
  // without them).
  virtual Status propose(std::span<DraftRequest> requests) = 0;
  // The request ended: drop what is kept for it.
  virtual void forget(RequestId) {}
};

// Prompt lookup (n-gram) proposals: the longest suffix of the sequence, of `max_ngram` tokens down
// to `min_ngram`, that occurred before; its most recent earlier occurrence's continuation is the
// draft. No model: strong where the answer copies the prompt (code editing, summaries, RAG).
class NgramProposer final : public Proposer {
 public:
  NgramProposer(int32_t max_ngram, int32_t min_ngram = 1);
  std::string name() const override { return "lookup"; }
  double cost_per_token() const override { return 0.0; }
  Status propose(std::span<DraftRequest> requests) override;
  // The draft for one sequence (the tests' and the bench's entry point).
  void propose_one(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>& draft) const;

 private:
  int32_t max_ngram_, min_ngram_;
};

// Adaptive speculation length: with acceptance a(j) at depth j (DraftAcceptance::rate), k drafts
// emit 1 + sum_{j<=k} a(1)...a(j) tokens per step at a cost of cost(k) (cost(0): a plain step);
// the k in [0, max_k] with the most tokens per unit of cost (the smaller k on a tie).
int32_t best_spec_length(const std::function<double(int32_t)>& accept_at, int32_t max_k,
                         const std::function<double(int32_t)>& cost);
// One rate at every depth, cost(k) = 1 + k * (verify_cost + propose_cost).
int32_t best_spec_length(double accept_rate, int32_t max_k, double verify_cost, double propose_cost);

// A running mean over the first 20 samples, then an exponential one (the host drifts: bandwidth,
// neighbours). `n` counts the samples.
void update_mean(double& mean, int64_t& n, double x);

// What speculation costs on this host, learned from the engine's own steps rather than constants:
// the target's time for a step of T tokens made only of decode rows and verification chunks (a
// running mean per T; the proposer measures its own time per draft token). A step size not
// measured yet is estimated from the nearest measured one with the prior (prior_token_cost per
// token); one with fewer than kSettled samples by the lower of its mean and that estimate.
class SpecCostModel {
 public:
  SpecCostModel(int32_t max_tokens, double prior_token_cost);
  void observe_step(int64_t tokens, double seconds);
  double step_seconds(int64_t tokens) const;
  // Drafts for one more sequence (its acceptance `a`), with `planned` tokens already in the step and
  // `decoding` sequences in it: the k with the most tokens per second of its share of the step.
  int32_t best_length(const DraftAcceptance& a, int32_t max_k, int64_t planned, int64_t decoding, double draft_pass_s) const;

 private:
  static constexpr int64_t kSettled = 3;
  std::vector<double> t_;       // [max_tokens + 1] seconds per step of T tokens
  std::vector<int64_t> n_;      // samples behind each
  double prior_;
};

}  // namespace ggflow::serving
