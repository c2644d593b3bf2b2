// Soak: 200 requests with random prompt lengths (many sharing prefixes), random max_tokens, stop
// tokens, seeded random sampling for some, random arrival and random cancellation, through an
// engine with a small block pool (so preemption and prefix-cache eviction happen all the time).
// Every step is checked (batch structure, simulated KV reads, block-manager invariants, budget);
// at the end every request has completed or been cancelled, every block is free, and each output
// equals the same request run alone (a prefix of it when cancelled).
#include <gtest/gtest.h>

#include <ostream>
#include <random>

#include "test_scheduler_harness.h"

using namespace ggflow::serving;
using namespace ggflow::text;
using namespace ggflow::serving::testing;

namespace {

struct Planned {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 1;
  bool stop_on_zero = false;
  std::optional<uint64_t> sample_seed;  // seeded text::Sampler; greedy when absent
  int64_t cancel_after = -1;            // steps after arrival; -1: never
  RequestParams params() const {
    RequestParams p = max_tokens_params();
    if (sample_seed) {
      SamplingParams sp;
      sp.temperature = 0.9;
      sp.top_k = 20;
      sp.seed = *sample_seed;
      set_sampler(p, sp, prompt);
    }
    return p;
  }
  RequestParams max_tokens_params() const {
    RequestParams p;
    p.max_tokens = max_tokens;
    if (stop_on_zero) p.stop_token_ids = {0};
    return p;
  }
};

struct SoakCase {
  bool caching;
  int32_t num_blocks, max_seqs, budget;
  uint64_t seed;
};

void PrintTo(const SoakCase& c, std::ostream* os) {
  *os << "caching=" << c.caching << " blocks=" << c.num_blocks << " max_seqs=" << c.max_seqs << " budget=" << c.budget
      << " seed=" << c.seed;
}

class Soak : public ::testing::TestWithParam<SoakCase> {};

}  // namespace

TEST_P(Soak, TwoHundredRequestsCompleteOrCancelAndMatchSoloRuns) {
  const SoakCase sc = GetParam();
  const bool caching = sc.caching;
  std::mt19937_64 rng(sc.seed);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };

  std::vector<std::vector<int32_t>> bases;
  for (uint64_t k = 0; k < 4; ++k) bases.push_back(tokens(int(uni(64, 170)), 1000 + k));
  std::vector<Planned> plan(200);
  for (size_t i = 0; i < plan.size(); ++i) {
    Planned& r = plan[i];
    const int64_t len = uni(1, 200);
    if (uni(0, 1)) {  // shares a prefix with other requests
      const auto& base = bases[size_t(uni(0, 3))];
      const int64_t keep = std::min<int64_t>(len, int64_t(base.size()));
      r.prompt.assign(base.begin(), base.begin() + keep);
    }
    r.prompt = concat(r.prompt, tokens(int(len - int64_t(r.prompt.size())), 5000 + i));
    r.max_tokens = uni(1, 48);
    r.stop_on_zero = uni(0, 1);
    if (uni(0, 2) == 0) r.sample_seed = 77 + i;
    if (uni(0, 4) == 0) r.cancel_after = uni(0, 30);
  }

  EngineConfig cfg = config(sc.num_blocks, sc.max_seqs, sc.budget, caching);
  cfg.max_model_len = 256;
  Harness h(cfg);
  std::vector<RequestId> ids(plan.size(), 0);
  std::vector<int64_t> arrival(plan.size(), 0);
  size_t next = 0;
  int64_t step = 0, preemptions = 0, rejected = 0;
  while (next < plan.size() || h.engine->has_unfinished()) {
    for (int64_t k = uni(0, 3); k > 0 && next < plan.size(); --k, ++next) {
      ids[next] = h.add(plan[next].prompt, plan[next].params());
      arrival[next] = step;
      if (uni(0, 9) == 0) {  // a bad request in the stream changes nothing for the others
        EXPECT_FALSE(h.engine->add_request({}, plan[next].params()).ok());
        ++rejected;
      }
    }
    for (size_t i = 0; i < next; ++i)
      if (plan[i].cancel_after >= 0 && step == arrival[i] + plan[i].cancel_after) {
        ASSERT_TRUE(h.engine->cancel(ids[i]).ok());
        EXPECT_FALSE(h.engine->blocks().has(ids[i]));
      }
    if (!h.engine->has_unfinished()) {
      ++step;
      continue;
    }
    StepStats st = h.step();
    ASSERT_FALSE(st.idle()) << "no progress at step " << step;
    EXPECT_LE(st.num_tokens, cfg.max_num_batched_tokens);
    EXPECT_LE(st.num_seqs, cfg.max_num_seqs);
    preemptions += st.num_preempted;
    ++step;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_TRUE(h.all_free());
  EXPECT_EQ(h.engine->blocks().num_free(), sc.num_blocks);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(rejected, 0);

  int64_t cached = 0, cancelled = 0, completed = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    RequestOutput o = h.out(ids[i]);
    cached += o.usage.cached_tokens;
    ASSERT_TRUE(o.end == FinishReason::Stop || o.end == FinishReason::Length || o.end == FinishReason::Cancelled)
        << "request " << i << " ended " << to_string(o.end) << " " << o.error;
    const auto alone = run_alone(plan[i].prompt, plan[i].params());
    if (o.end == FinishReason::Cancelled) {
      ++cancelled;
      ASSERT_LE(o.tokens.size(), alone.size()) << "request " << i;
      EXPECT_TRUE(std::equal(o.tokens.begin(), o.tokens.end(), alone.begin())) << "request " << i;
    } else {
      ++completed;
      EXPECT_EQ(o.tokens, alone) << "request " << i;
      EXPECT_EQ(o.usage.completion_tokens, int64_t(alone.size()));
    }
  }
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(completed, 150);
  if (caching) {
    EXPECT_GT(cached, 0);
  } else {
    EXPECT_EQ(cached, 0);
  }
  std::printf("soak (caching %s, %d blocks, budget %d): %lld steps, %lld preemptions, %lld cancelled, %lld cached prompt tokens\n",
              caching ? "on" : "off", sc.num_blocks, sc.budget, (long long)step, (long long)preemptions, (long long)cancelled, (long long)cached);
}

INSTANTIATE_TEST_SUITE_P(Engine, Soak,
                         ::testing::Values(SoakCase{true, 24, 12, 96, 20240607}, SoakCase{false, 24, 12, 96, 20240607},
                                           SoakCase{true, 12, 4, 32, 7}, SoakCase{false, 12, 4, 32, 7},
                                           SoakCase{true, 40, 16, 512, 99}),
                         [](const auto& info) {
                           const SoakCase& c = info.param;
                           return std::string(c.caching ? "CachingOn" : "CachingOff") + "_" + std::to_string(c.num_blocks) +
                                  "blocks_budget" + std::to_string(c.budget);
                         });
