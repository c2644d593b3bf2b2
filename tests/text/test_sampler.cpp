// Sampler: each parameter alone, their combination, validation and determinism by seed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "text/logprobs.h"
#include "text/sampler.h"
#include "text/sampler_stop.h"

using ggflow::text::FinishReason;
using ggflow::text::Sampler;
using ggflow::text::SamplingParams;
using ggflow::text::StopCondition;
using ggflow::text::StopStrings;

namespace {

// Logits whose softmax (at temperature 1) is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

std::map<int32_t, double> frequencies(SamplingParams p, const std::vector<float>& logits, int n) {
  p.seed = p.seed.value_or(1234);
  Sampler s(p);
  std::map<int32_t, double> f;
  for (int k = 0; k < n; ++k) f[s.sample(logits)] += 1.0 / n;
  return f;
}

std::set<int32_t> support(SamplingParams p, const std::vector<float>& logits, int n = 2000) {
  std::set<int32_t> out;
  for (const auto& [tok, f] : frequencies(p, logits, n)) out.insert(tok);
  return out;
}

}  // namespace

TEST(SamplerValidate, AcceptsDefaultsAndRejectsEachInvalidParameter) {
  EXPECT_TRUE(SamplingParams{}.validate(100).ok());
  auto rejects = [](auto edit, const char* word) {
    SamplingParams p;
    edit(p);
    ggflow::Status st = p.validate(100);
    ASSERT_FALSE(st.ok()) << word;
    EXPECT_NE(st.error().what.find(word), std::string::npos) << st.error().str();
  };
  rejects([](SamplingParams& p) { p.temperature = -0.5; }, "temperature");
  rejects([](SamplingParams& p) { p.temperature = NAN; }, "temperature");
  rejects([](SamplingParams& p) { p.top_p = 1.5; }, "top_p");
  rejects([](SamplingParams& p) { p.top_p = 0; }, "top_p");
  rejects([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  rejects([](SamplingParams& p) { p.min_p = 1.1; }, "min_p");
  rejects([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  rejects([](SamplingParams& p) { p.presence_penalty = 2.5; }, "presence_penalty");
  rejects([](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty");
  rejects([](SamplingParams& p) { p.logit_bias = {{100, 1.0}}; }, "logit_bias");
  rejects([](SamplingParams& p) { p.logit_bias = {{3, 150.0}}; }, "logit_bias");
  rejects([](SamplingParams& p) { p.stop_token_ids = {-1}; }, "stop token");
  rejects([](SamplingParams& p) { p.stop = {""}; }, "stop strings");
  rejects([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
}

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 1.0f, 3.0f}), 0);
}

TEST(Sampler, TemperatureOneFollowsSoftmax) {
  auto f = frequencies({}, logits_of({0.5, 0.3, 0.2}), 40000);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.2, 0.015);
}

TEST(Sampler, TemperatureFlattensAndSharpens) {
  SamplingParams hot;
  hot.temperature = 2.0;  // p ~ sqrt(q): 0.5,0.3,0.2 -> 0.4240, 0.3284, 0.2681 (normalized)
  auto f = frequencies(hot, logits_of({0.5, 0.3, 0.2}), 40000);
  double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.2);
  EXPECT_NEAR(f[0], std::sqrt(0.5) / z, 0.015);
  EXPECT_NEAR(f[2], std::sqrt(0.2) / z, 0.015);
  SamplingParams cold;
  cold.temperature = 0.05;
  auto g = frequencies(cold, logits_of({0.5, 0.3, 0.2}), 2000);
  EXPECT_GT(g[0], 0.99);
}

TEST(Sampler, TopKKeepsTheKBest) {
  SamplingParams p;
  p.top_k = 2;
  EXPECT_EQ(support(p, logits_of({0.1, 0.4, 0.2, 0.3})), (std::set<int32_t>{1, 3}));
  p.top_k = 1;
  EXPECT_EQ(support(p, logits_of({0.1, 0.4, 0.2, 0.3})), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p;
  p.top_p = 0.75;  // 0.5 + 0.3 >= 0.75
  EXPECT_EQ(support(p, logits_of({0.5, 0.3, 0.15, 0.05})), (std::set<int32_t>{0, 1}));
  p.top_p = 0.85;
  EXPECT_EQ(support(p, logits_of({0.5, 0.3, 0.15, 0.05})), (std::set<int32_t>{0, 1, 2}));
  p.top_p = 0.85;  // renormalized over the kept tokens: 0.5/0.95
  auto f = frequencies(p, logits_of({0.5, 0.3, 0.15, 0.05}), 40000);
  EXPECT_NEAR(f[0], 0.5 / 0.95, 0.015);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfTheBest) {
  SamplingParams p;
  p.min_p = 0.35;  // floor 0.175
  EXPECT_EQ(support(p, logits_of({0.5, 0.3, 0.15, 0.05})), (std::set<int32_t>{0, 1}));
  p.min_p = 0.25;  // floor 0.125
  EXPECT_EQ(support(p, logits_of({0.5, 0.3, 0.15, 0.05})), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, LogitBiasForcesAndBans) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{2, 5.0}};
  EXPECT_EQ(Sampler(p).sample(std::vector<float>{1.0f, 3.0f, 0.0f}), 2);
  SamplingParams q;
  q.logit_bias = {{1, -100.0}};
  EXPECT_EQ(support(q, std::vector<float>{1.0f, 3.0f, 0.5f}), (std::set<int32_t>{0, 2}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0;
  std::vector<int32_t> prompt = {0};
  Sampler s(p, prompt);  // token 0: 3.0 -> 1.5 < 2.0
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.0f}), 1);
  std::vector<int32_t> prompt2 = {1};
  Sampler t(p, prompt2);  // token 1: -0.5 -> -1.0 < -0.8
  EXPECT_EQ(t.sample(std::vector<float>{-0.8f, -0.5f}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseGeneratedCounts) {
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 1.0;
  Sampler s(p);
  std::vector<float> l = {2.5f, 2.0f};
  EXPECT_EQ(s.sample(l), 0);  // 2.5 vs 2.0
  EXPECT_EQ(s.sample(l), 1);  // 1.5 vs 2.0
  EXPECT_EQ(s.sample(l), 0);  // 1.5 vs 1.0 (presence counts once)
  SamplingParams q;
  q.temperature = 0;
  q.frequency_penalty = 0.4;
  Sampler t(q);
  std::vector<float> m = {3.0f, 2.0f};
  EXPECT_EQ(t.sample(m), 0);  // 3.0
  EXPECT_EQ(t.sample(m), 0);  // 2.6
  EXPECT_EQ(t.sample(m), 0);  // 2.2
  EXPECT_EQ(t.sample(m), 1);  // 1.8 < 2.0
  // The prompt does not count for presence/frequency.
  std::vector<int32_t> prompt = {0, 0, 0};
  Sampler u(q, prompt);
  EXPECT_EQ(u.sample(m), 0);
}

TEST(Sampler, CombinedParametersApplyInTheDocumentedOrder) {
  // bias lifts token 4 to the top; top_k=3 keeps {4, 0, 1}; temperature 1; top_p 0.9 then min_p
  // 0.3 of the best trims the tail: only tokens 4 and 0 can appear.
  SamplingParams p;
  p.logit_bias = {{4, 3.0}};
  p.top_k = 3;
  p.top_p = 0.9;
  p.min_p = 0.3;
  p.repetition_penalty = 1.5;
  std::vector<int32_t> prompt = {1};  // token 1 penalized: 1.0 -> 0.667
  std::vector<float> l = {1.5f, 1.0f, 0.9f, -2.0f, 0.0f};
  // After bias/penalty: [1.5, 0.667, 0.9, -2, 3.0]; top-3: {4, 0, 2}; probs ~ {0.77, 0.17, 0.06}
  // top_p 0.9 -> {4, 0}; min_p 0.3*0.77=0.23 -> {4}.
  // A fresh sampler per draw: the repetition penalty also counts generated tokens.
  auto draw_set = [&](SamplingParams q, int n) {
    std::set<int32_t> seen;
    for (int k = 0; k < n; ++k) {
      q.seed = uint64_t(k);
      Sampler s(q, prompt);
      seen.insert(s.sample(l));
    }
    return seen;
  };
  EXPECT_EQ(draw_set(p, 500), (std::set<int32_t>{4}));
  p.min_p = 0.1;  // keeps {4, 0}
  std::set<int32_t> seen = draw_set(p, 2000);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 4}));
}

TEST(Sampler, SameSeedSameTokensWhateverElseRuns) {
  std::vector<float> l = {0.3f, 0.1f, 0.9f, 0.5f, 0.2f, 0.7f};
  SamplingParams p;
  p.seed = 42;
  p.temperature = 1.3;
  Sampler a(p), b(p);
  SamplingParams other;
  other.seed = 7;
  Sampler noise(other);
  std::vector<int32_t> ta, tb;
  for (int k = 0; k < 200; ++k) {
    ta.push_back(a.sample(l));
    for (int j = 0; j < 3; ++j) noise.sample(l);  // another request in between
    tb.push_back(b.sample(l));
  }
  EXPECT_EQ(ta, tb);
  SamplingParams q = p;
  q.seed = 43;
  Sampler c(q);
  std::vector<int32_t> tc;
  for (int k = 0; k < 200; ++k) tc.push_back(c.sample(l));
  EXPECT_NE(ta, tc);
}

// A NaN logit (a damaged model's row) counts as -inf in the sampler and the log-probabilities:
// never chosen while another token is possible, listed last, and it leaves the other tokens'
// log-probabilities finite and ordered (fuzz/regressions/fuzz_sampler/: one NaN made every
// log-probability NaN and the top tokens' order arbitrary).
TEST(Sampler, NanLogitCountsAsMinusInfinity) {
  const float nan = std::nanf("");
  const std::vector<float> l = {nan, 1.0f, -INFINITY, 3.0f, nan, 3.0f, 0.5f, -INFINITY};
  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(Sampler(greedy).sample(l), 3);
  for (int top_k : {0, 2}) {
    SamplingParams p;
    p.top_k = top_k;
    p.temperature = 1.5;
    EXPECT_EQ(support(p, l), (top_k == 2 ? std::set<int32_t>{3, 5} : std::set<int32_t>{1, 3, 5, 6})) << top_k;
  }
  SamplingParams all_nan;
  all_nan.seed = 1;
  EXPECT_EQ(Sampler(all_nan).sample(std::vector<float>(5, nan)), 0);

  auto lp = ggflow::text::step_logprobs(l, 4, 8);
  EXPECT_EQ(lp.chosen.token, 4);
  EXPECT_EQ(lp.chosen.logprob, -INFINITY);
  std::vector<int32_t> order;
  for (const auto& t : lp.top) order.push_back(t.token);
  EXPECT_EQ(order, (std::vector<int32_t>{3, 5, 1, 6, 0, 2, 4, 7}));
  const double log_z = 3.0 + std::log(2.0 + std::exp(-2.0) + std::exp(-2.5));
  EXPECT_NEAR(lp.top[0].logprob, 3.0 - log_z, 1e-12);
  EXPECT_NEAR(lp.top[3].logprob, 0.5 - log_z, 1e-12);
  for (size_t i = 4; i < lp.top.size(); ++i) EXPECT_EQ(lp.top[i].logprob, -INFINITY) << i;
}

TEST(StopStrings, MatchesAcrossTokenBoundariesAndNeverEmitsTheStop) {
  StopStrings s({"</end>", "STOP"});
  std::string out;
  for (const char* piece : {"Hello <", "/e", "nd> tail"}) out += s.push(piece);
  EXPECT_EQ(out, "Hello ");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "</end>");
  EXPECT_EQ(s.push("more"), "");
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStartAStop) {
  StopStrings s({"abc"});
  EXPECT_EQ(s.push("xxab"), "xx");  // "ab" might become "abc"
  EXPECT_EQ(s.push("d"), "abd");    // it did not
  EXPECT_EQ(s.push("aab"), "a");
  EXPECT_EQ(s.flush(), "ab");
  EXPECT_FALSE(s.stopped());
}

TEST(StopCondition, StopTokenEndsWithoutItsText) {
  SamplingParams p;
  p.stop_token_ids = {2};
  p.stop = {"##"};
  StopCondition c(p);
  EXPECT_EQ(c.push(5, "hi #"), "hi ");
  EXPECT_EQ(c.push(2, "</s>"), "#");  // held-back text released, the stop token's text dropped
  EXPECT_EQ(c.reason(), FinishReason::Stop);
  EXPECT_EQ(c.push(7, "x"), "");
}

TEST(StopCondition, StopStringAndMaxTokens) {
  SamplingParams p;
  p.stop = {"\n\n"};
  StopCondition c(p);
  EXPECT_EQ(c.push(1, "line\n"), "line");
  EXPECT_EQ(c.push(1, "\nnext"), "");
  EXPECT_EQ(c.reason(), FinishReason::Stop);
  SamplingParams q;
  q.max_tokens = 3;
  q.stop = {"zz"};
  StopCondition d(q);
  EXPECT_EQ(d.push(1, "a"), "a");
  EXPECT_EQ(d.push(1, "b"), "b");
  EXPECT_FALSE(d.done());
  EXPECT_EQ(d.push(1, "cz"), "cz");  // the limit releases held-back text
  EXPECT_EQ(d.reason(), FinishReason::Length);
  EXPECT_EQ(d.tokens(), 3);
}
