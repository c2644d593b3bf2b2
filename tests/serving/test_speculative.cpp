// Speculative decoding over the fake paged runner: greedy output with drafts equals plain greedy
// output (any proposer, any accept lengths, batches, budgets, preemption, prefix caching); the
// block manager's invariants hold after every rollback (the harness checks each step); seeded
// sampled output equals plain seeded output, and keeps the target's distribution (chi-square
// against the exact marginal); the n-gram
// proposer and the adaptive length; the draft-model proposer over a second fake model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "runtime/greedy.h"
#include "serving/draft_proposer.h"
#include "serving/speculative.h"
#include "test_scheduler_harness.h"

using namespace ggflow::serving;
using namespace ggflow::text;
using namespace ggflow::serving::testing;

namespace {

// Proposes the fake model's greedy continuation, each token replaced by a random one with
// probability `noise`, and a random length in [0, max_tokens]: random accept lengths.
class NoisyOracle final : public Proposer {
 public:
  NoisyOracle(double noise, uint64_t seed) : noise_(noise), rng_(seed) {}
  std::string name() const override { return "oracle"; }
  double cost_per_token() const override { return 0; }
  ggflow::Status propose(std::span<DraftRequest> requests) override {
    for (DraftRequest& r : requests) {
      r.draft->clear();
      std::vector<int32_t> ctx(r.tokens.begin(), r.tokens.end());
      const int32_t n = int32_t(rng_() % uint64_t(r.max_tokens + 1));
      for (int32_t j = 0; j < n; ++j) {
        std::vector<float> row;
        fake_logits(ctx, kVocab, row);
        int32_t tok = ggflow::runtime::argmax(row);
        if (std::uniform_real_distribution<double>(0, 1)(rng_) < noise_) tok = int32_t(rng_() % uint64_t(kVocab));
        r.draft->push_back(tok);
        ctx.push_back(tok);
      }
      ++calls;
    }
    return {};
  }
  int64_t calls = 0;

 private:
  double noise_;
  std::mt19937_64 rng_;
};

EngineConfig spec_config(int32_t num_blocks, int32_t max_seqs, int32_t budget, bool caching, int32_t k) {
  EngineConfig c = config(num_blocks, max_seqs, budget, caching);
  c.spec.num_spec_tokens = k;
  c.spec.max_step_tokens = 4096;
  c.spec.adaptive = false;
  return c;
}

RequestParams sampled(int64_t n, uint64_t seed, double temperature) {
  SamplingParams sp;
  sp.temperature = temperature;
  sp.seed = seed;
  RequestParams p = max_tokens(n);
  set_sampler(p, sp, {});
  return p;
}

}  // namespace

TEST(Speculative, GreedyOutputEqualsPlainDecodingUnderRandomAcceptLengths) {
  struct Case {
    int32_t blocks, seqs, budget;
    bool caching;
    int32_t k;
    double noise;
  };
  // Roomy and tight pools (preemption), small budgets (drafts cut), caching on and off.
  for (const Case c : {Case{256, 8, 256, true, 4, 0.2}, Case{256, 8, 256, false, 7, 0.5}, Case{12, 4, 64, true, 5, 0.3},
                       Case{64, 8, 12, true, 8, 0.1}, Case{9, 3, 32, false, 3, 0.0}}) {
    SCOPED_TRACE("blocks " + std::to_string(c.blocks) + " budget " + std::to_string(c.budget) + " k " + std::to_string(c.k));
    Harness h(spec_config(c.blocks, c.seqs, c.budget, c.caching, c.k));
    NoisyOracle oracle(c.noise, 7);
    h.engine->set_proposer(&oracle);
    std::vector<RequestId> ids;
    std::vector<std::vector<int32_t>> prompts;
    for (uint64_t s = 1; s <= 10; ++s) {
      // shared prefixes every other request: prefix hits meet rollbacks
      prompts.push_back(s % 2 ? concat(tokens(40, 100), tokens(int(3 + s), s)) : tokens(int(20 + s), s));
      ids.push_back(h.add(prompts.back(), max_tokens(int64_t(30 + 3 * s))));
    }
    h.run();
    if (HasFailure()) return;
    int64_t drafts = 0, accepted = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const RequestOutput o = h.out(ids[i]);
      EXPECT_EQ(o.tokens, run_alone(prompts[i], max_tokens(int64_t(30 + 3 * (i + 1))))) << "request " << i;
      drafts += o.usage.spec.draft_tokens;
      accepted += o.usage.spec.accepted_tokens;
    }
    EXPECT_GT(drafts, 0);
    EXPECT_LE(accepted, drafts);
    if (c.noise > 0) EXPECT_LT(accepted, drafts);
    EXPECT_GT(accepted, 0);
    EXPECT_TRUE(h.all_free());
  }
}

TEST(Speculative, StopTokenAmongAcceptedDraftsEndsThereAndLengthIsExact) {
  // The plain run's 5th token becomes a stop token: speculation must stop at it, not after.
  const auto prompt = tokens(30, 5);
  const auto plain = run_alone(prompt, max_tokens(20));
  RequestParams p = max_tokens(20);
  p.stop_token_ids = {plain[4]};
  const auto expected = run_alone(prompt, p);
  Harness h(spec_config(64, 4, 256, true, 8));
  NoisyOracle oracle(0.0, 1);
  h.engine->set_proposer(&oracle);
  RequestId id = h.add(prompt, p);
  RequestId len_id = h.add(tokens(30, 6), max_tokens(13));
  h.run();
  EXPECT_EQ(h.out(id).tokens, expected);
  EXPECT_EQ(h.out(id).end, FinishReason::Stop);
  EXPECT_EQ(h.out(len_id).tokens.size(), 13u);
  EXPECT_EQ(h.out(len_id).tokens, run_alone(tokens(30, 6), max_tokens(13)));
  EXPECT_TRUE(h.all_free());
}

TEST(Speculative, SeededSamplingEqualsPlainSeededSampling) {
  // Whatever the drafts (random lengths, some right, some wrong), a seed gives plain decoding's
  // tokens: one draw of the request's generator per emitted token, on the same rows.
  for (int32_t k : {1, 3, 8}) {
    Harness h(spec_config(256, 8, 256, true, k));
    NoisyOracle oracle(0.3, uint64_t(k));
    h.engine->set_proposer(&oracle);
    std::vector<RequestId> ids;
    for (uint64_t seed = 1; seed <= 8; ++seed) ids.push_back(h.add(tokens(20, seed), sampled(40, seed, 0.3)));
    h.run();
    int64_t accepted = 0;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const RequestOutput o = h.out(ids[seed - 1]);
      EXPECT_EQ(o.tokens, run_alone(tokens(20, seed), sampled(40, seed, 0.3))) << "k " << k << " seed " << seed;
      accepted += o.usage.spec.accepted_tokens;
    }
    EXPECT_GT(accepted, 0);
  }
}

namespace {

// Chi-square statistic of observed counts against expected probabilities (bins with an expected
// count under 5 pooled), and its critical value at p = 1e-4 (Wilson-Hilferty).
std::pair<double, double> chi_square(const std::map<int32_t, int64_t>& counts, const std::vector<double>& expect, int64_t n) {
  double stat = 0, pooled_e = 0, pooled_o = 0;
  int bins = 0;
  for (size_t t = 0; t < expect.size(); ++t) {
    const double e = expect[t] * double(n);
    const double o = counts.count(int32_t(t)) ? double(counts.at(int32_t(t))) : 0.0;
    if (e < 5) {
      pooled_e += e, pooled_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e, ++bins;
  }
  if (pooled_e > 0) stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9), ++bins;
  const double dof = bins - 1, z = 3.719;
  const double crit = dof * std::pow(1 - 2 / (9 * dof) + z * std::sqrt(2 / (9 * dof)), 3);
  return {stat, crit};
}

std::vector<double> softmax_row(std::span<const int32_t> ctx, double temperature) {
  std::vector<float> row;
  fake_logits(ctx, kVocab, row);
  std::vector<double> p(row.size());
  double sum = 0;
  for (size_t i = 0; i < row.size(); ++i) sum += p[i] = std::exp(double(row[i]) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

TEST(Speculative, SampledOutputKeepsTheTargetDistribution) {
  // The exact marginal of the 2nd and 3rd generated tokens, from the fake model's rows.
  const double temperature = 0.08;
  const auto prompt = tokens(12, 3);
  std::vector<double> second(kVocab, 0.0), third(kVocab, 0.0);
  const auto p1 = softmax_row(prompt, temperature);
  for (int32_t a = 0; a < kVocab; ++a) {
    auto ctx = concat(prompt, {a});
    const auto p2 = softmax_row(ctx, temperature);
    for (int32_t b = 0; b < kVocab; ++b) {
      second[size_t(b)] += p1[size_t(a)] * p2[size_t(b)];
      if (p1[size_t(a)] * p2[size_t(b)] < 1e-7) continue;  // negligible paths
      const auto p3 = softmax_row(concat(ctx, {b}), temperature);
      for (int32_t c = 0; c < kVocab; ++c) third[size_t(c)] += p1[size_t(a)] * p2[size_t(b)] * p3[size_t(c)];
    }
  }
  const int64_t n = 4000;
  for (bool speculate : {false, true}) {
    SCOPED_TRACE(speculate ? "speculative" : "plain");
    EngineConfig cfg = spec_config(4096, 64, 1024, true, speculate ? 3 : 0);
    Harness h(cfg);
    NoisyOracle oracle(0.3, 5);  // most drafts are the argmax, some random
    if (speculate) h.engine->set_proposer(&oracle);
    std::vector<RequestId> ids;
    for (int64_t i = 0; i < n; ++i) ids.push_back(h.add(prompt, sampled(6, uint64_t(1000 + i), temperature)));
    h.run();
    std::map<int32_t, int64_t> c2, c3;
    int64_t drafts = 0, accepted = 0;
    for (RequestId id : ids) {
      const RequestOutput o = h.out(id);
      ASSERT_EQ(o.tokens.size(), 6u);
      ++c2[o.tokens[1]], ++c3[o.tokens[2]];
      drafts += o.usage.spec.draft_tokens, accepted += o.usage.spec.accepted_tokens;
    }
    if (speculate) {  // both branches of the rule run often
      EXPECT_GT(accepted, n / 20) << drafts;
      EXPECT_GT(drafts - accepted, n / 2) << drafts;
    }
    const auto [s2, crit2] = chi_square(c2, second, n);
    const auto [s3, crit3] = chi_square(c3, third, n);
    EXPECT_LT(s2, crit2);
    EXPECT_LT(s3, crit3);
  }
}

TEST(Speculative, RequestsThatOptOutAreNeverSpeculated) {
  Harness h(spec_config(64, 4, 256, true, 4));
  NoisyOracle oracle(0.0, 1);
  h.engine->set_proposer(&oracle);
  RequestParams p = max_tokens(10);
  p.speculate = false;
  RequestId id = h.add(tokens(20, 2), p);
  h.run();
  EXPECT_EQ(h.out(id).usage.spec.draft_tokens, 0);
  EXPECT_EQ(oracle.calls, 0);
}

TEST(NgramProposer, LongestRecentSuffixMatch) {
  NgramProposer p(3, 1);
  std::vector<int32_t> d;
  // ... 5 6 7 8 9 ... 5 6 7 -> 8 9 (3-gram), capped at max_tokens
  p.propose_one(std::vector<int32_t>{1, 5, 6, 7, 8, 9, 2, 5, 6, 7}, 4, d);
  EXPECT_EQ(d, (std::vector<int32_t>{8, 9, 2, 5}));
  p.propose_one(std::vector<int32_t>{1, 5, 6, 7, 8, 9, 2, 5, 6, 7}, 1, d);
  EXPECT_EQ(d, (std::vector<int32_t>{8}));
  // the most recent occurrence wins: 4 after "1 2" at the end
  p.propose_one(std::vector<int32_t>{1, 2, 3, 1, 2, 4, 0, 1, 2}, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{4, 0}));
  // nothing repeats: no draft; a 1-gram falls back when longer ones fail
  p.propose_one(std::vector<int32_t>{1, 2, 3, 4}, 3, d);
  EXPECT_TRUE(d.empty());
  p.propose_one(std::vector<int32_t>{9, 1, 7, 2, 3, 1}, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{7, 2}));
  NgramProposer strict(3, 2);  // 1-grams not allowed
  strict.propose_one(std::vector<int32_t>{9, 1, 7, 2, 3, 1}, 2, d);
  EXPECT_TRUE(d.empty());
}

TEST(Speculative, AdaptiveLengthFollowsAcceptanceAndCost) {
  EXPECT_EQ(best_spec_length(0.0, 8, 0.08, 0.0), 0);
  EXPECT_EQ(best_spec_length(0.99, 8, 0.02, 0.0), 8);
  const int32_t mid = best_spec_length(0.7, 16, 0.08, 0.0);
  EXPECT_GT(mid, 1);
  EXPECT_LT(mid, 16);
  EXPECT_LT(best_spec_length(0.7, 16, 0.08, 0.4), mid);  // a costly proposer speculates less
  EXPECT_EQ(best_spec_length(0.3, 8, 0.08, 0.4), 0);      // and not at all when it does not pay
}

TEST(Speculative, AcceptanceIsTrackedDepthByDepth) {
  DraftAcceptance a;
  EXPECT_DOUBLE_EQ(a.rate(1), 0.75);  // the prior
  // All-or-nothing drafts (prompt lookup): half stand whole, half fail at the first token.
  for (int i = 0; i < 60; ++i) a.observe(7, i % 2 ? 7 : 0);
  EXPECT_NEAR(a.rate(1), 0.5, 0.1);
  for (int32_t j = 2; j <= 7; ++j) EXPECT_GT(a.rate(j), 0.9) << j;
  // One rate for every token (pooled: about 7 of 8 stand) and, by depth, 1 + 0.5 * 7 = 4.5
  // tokens for 7 drafts: both pay for a step that costs 1.6x, the pooled rate overestimates.
  EXPECT_GT(a.pooled(), 0.85);
  auto cost = [](int32_t k) { return 1.0 + 0.085 * k; };
  EXPECT_EQ(best_spec_length([&](int32_t j) { return a.rate(j); }, 7, cost), 7);
  // Drafts that always break at the third token: two drafts, not more (a per-token rate of 2/3
  // would ask for more).
  DraftAcceptance b;
  for (int i = 0; i < 60; ++i) b.observe(7, 2);
  EXPECT_GT(b.rate(1), 0.9);
  EXPECT_GT(b.rate(2), 0.9);
  EXPECT_LT(b.rate(3), 0.2);
  EXPECT_EQ(best_spec_length([&](int32_t j) { return b.rate(j); }, 7, cost), 2);
  EXPECT_GT(best_spec_length([&](int32_t) { return b.pooled(); }, 7, cost), 2);
  // A depth never proposed starts from the pooled rate: one-draft steps that always stand (a
  // draft model's first steps) make deeper drafts look as good.
  DraftAcceptance c;
  for (int i = 0; i < 30; ++i) c.observe(1, 1);
  EXPECT_GT(c.rate(5), 0.95);
  EXPECT_EQ(best_spec_length([&](int32_t j) { return c.rate(j); }, 7, cost), 7);
  // Out-of-range arguments are clamped, not undefined.
  b.observe(1000, -5);
  EXPECT_GE(b.rate(0), 0.0);
  EXPECT_LE(b.rate(1000), 1.0);
}

TEST(Speculative, CostModelRetriesAStepSizeWhoseFirstSampleWasSlow) {
  SpecCostModel m(16, 0.05);
  for (int i = 0; i < 5; ++i) m.observe_step(1, 0.045), m.observe_step(6, 0.070);
  m.observe_step(8, 0.200);  // one cold first sample
  // Estimated from 6 tokens with the prior (0.070 * 1.35 / 1.25), not the outlier: it gets tried.
  EXPECT_NEAR(m.step_seconds(8), 0.0756, 1e-4);
  m.observe_step(8, 0.080), m.observe_step(8, 0.080);  // settled: its own mean from now on
  EXPECT_NEAR(m.step_seconds(8), 0.120, 1e-9);
  EXPECT_NEAR(m.step_seconds(1), 0.045, 1e-9);
  // Unmeasured sizes scale from the nearest settled one.
  EXPECT_NEAR(m.step_seconds(7), 0.070 * 1.30 / 1.25, 1e-9);
  EXPECT_NEAR(SpecCostModel(16, 0.05).step_seconds(3), 1.10, 1e-9);  // nothing measured: units of a step
}

TEST(Speculative, AdaptiveSpeculationShrinksAsTheBatchGrows) {
  EngineConfig cfg = spec_config(512, 32, 512, true, 6);
  cfg.spec.max_step_tokens = 16;
  cfg.spec.adaptive = true;
  Harness h(cfg);
  NoisyOracle oracle(0.0, 1);
  h.engine->set_proposer(&oracle);
  for (uint64_t s = 1; s <= 20; ++s) h.add(tokens(10, s), max_tokens(6));
  StepStats st = h.step();  // prefill of all 20
  st = h.step();            // 20 decoding sequences >= 16: no drafts
  EXPECT_EQ(st.num_draft_tokens, 0);
  h.run();
  for (uint64_t s = 1; s <= 4; ++s) h.add(tokens(10, 50 + s), max_tokens(12));
  h.step();
  st = h.step();  // 4 decoding sequences: at most 16 - 4 drafts in all
  EXPECT_GT(st.num_draft_tokens, 0);
  EXPECT_LE(st.num_draft_tokens, 16 - 4);
  h.run();
}

// A draft whose LM head is cut to `width` rows that always ranks id 1 first.
class CutHeadRunner : public ggflow::runtime::BatchRunner {
 public:
  explicit CutHeadRunner(int64_t width) : width_(width) {}
  ggflow::Result<ggflow::runtime::LogitsRows> forward(const ggflow::runtime::ScheduledBatch& b) override {
    rows_.assign(b.sampled_tokens_indices.size() * size_t(width_), 0.0f);
    for (size_t r = 0; r < b.sampled_tokens_indices.size(); ++r) rows_[r * size_t(width_) + 1] = 1.0f;
    return ggflow::runtime::LogitsRows{width_, rows_};
  }

 private:
  int64_t width_;
  std::vector<float> rows_;
};

TEST(DraftModelProposer, LookupGivesTheIdsACutHeadCannotPropose) {
  // "7 900 8 ... 7" : lookup continues with 900, beyond a 64-row head; then with 8, inside it.
  const std::vector<int32_t> seq = {3, 7, 900, 8, 5, 6, 3, 7};
  for (bool fill : {false, true}) {
    CutHeadRunner runner(64);
    DraftModelProposer p(runner, 16, 0.3);
    if (fill) p.set_lookup_beyond_head(3);
    std::vector<int32_t> draft;
    std::vector<DraftRequest> reqs = {{1, seq, 3, &draft}};
    ASSERT_TRUE(p.propose(reqs).ok());
    // The head's argmax (1) where lookup has nothing beyond the head to offer.
    EXPECT_EQ(draft, fill ? std::vector<int32_t>({900, 1, 1}) : std::vector<int32_t>({1, 1, 1}));
    // The draft's cache holds what it ran on: the prompt and the drafts but the last.
    std::vector<int32_t> want = seq;
    want.insert(want.end(), draft.begin(), draft.end() - 1);
    EXPECT_EQ(p.cached_tokens(1), want);
  }
}

TEST(DraftModelProposer, ProposesTheDraftModelsGreedyTokensAndRollsBack) {
  // The draft model is a second fake model: the target's logits with every 3rd row perturbed, so
  // some drafts are rejected. Target greedy output must equal plain decoding.
  const int32_t blocks = 128;
  FakePagedRunner draft_runner(blocks, kVocab);
  draft_runner.edit_logits = [](const ggflow::runtime::ScheduledBatch& b, std::span<float> rows, int64_t vocab) {
    for (size_t r = 0; r < b.sampled_tokens_indices.size(); ++r)
      if (b.position_ids[size_t(b.sampled_tokens_indices[r])] % 3 == 0) rows[r * size_t(vocab) + 1] = 2.0f;
  };
  DraftModelProposer proposer(draft_runner, blocks, 0.3, /*max_chunk=*/4096);
  draft_runner.set_truth([&](RequestId id) { return proposer.cached_tokens(id); });
  Harness h(spec_config(blocks, 4, 256, true, 4));
  h.engine->set_proposer(&proposer);
  std::vector<RequestId> ids;
  for (uint64_t s = 1; s <= 4; ++s) ids.push_back(h.add(tokens(int(30 + s), s), max_tokens(40)));
  h.run();
  EXPECT_EQ(draft_runner.failure, "");
  int64_t drafts = 0, accepted = 0;
  for (uint64_t s = 1; s <= 4; ++s) {
    const RequestOutput o = h.out(ids[s - 1]);
    EXPECT_EQ(o.tokens, run_alone(tokens(int(30 + s), s), max_tokens(40)));
    drafts += o.usage.spec.draft_tokens, accepted += o.usage.spec.accepted_tokens;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafts);
  // Finished requests leave nothing in the draft's pool.
  EXPECT_EQ(proposer.blocks().num_free(), blocks);
  EXPECT_TRUE(proposer.blocks().check_invariants().ok());
}
