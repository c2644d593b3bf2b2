// Test harness: an engine over the fake paged runner, with every step checked (batch structure,
// simulated KV reads, block-manager invariants), and a reference "run alone" for output equality.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "serving/scheduler_engine.h"
#include "test_scheduler_fake_runner.h"

namespace ggflow::serving::testing {

inline constexpr int64_t kVocab = 64;

struct Harness {
  FakePagedRunner runner;
  std::unique_ptr<ContinuousBatchingEngine> engine;

  explicit Harness(EngineConfig cfg, int32_t runner_blocks = 0)
      : runner(runner_blocks > 0 ? runner_blocks : cfg.num_blocks, kVocab) {
    if (cfg.vocab_size == 0) cfg.vocab_size = kVocab;
    auto e = ContinuousBatchingEngine::create(cfg, runner);
    if (!e) ADD_FAILURE() << e.error().str();
    engine = std::move(*e);
    runner.set_truth([this](RequestId id) { return engine->sequence(id)->tokens; },
                     [this](RequestId id) { return engine->sequence(id)->draft; },
                     [this](RequestId id) {
                       const Sequence& s = *engine->sequence(id);
                       return s.wants_prompt_rows() ? std::pair<int64_t, int64_t>{int64_t(s.prompt_logprobs.size()), s.prompt_len - 1}
                                                    : std::pair<int64_t, int64_t>{0, 0};
                     });
  }

  RequestId add(std::vector<int32_t> prompt, RequestParams p = {}) {
    auto id = engine->add_request(std::move(prompt), std::move(p));
    if (!id) ADD_FAILURE() << id.error().str();
    return id ? *id : 0;
  }

  // One step, then every check. Returns the step's stats.
  StepStats step() {
    auto st = engine->step();
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().str());
    check();
    return st.ok() ? *st : StepStats{};
  }
  void check() {
    EXPECT_EQ(runner.failure, "");
    auto inv = engine->blocks().check_invariants();
    EXPECT_TRUE(inv.ok()) << (inv.ok() ? "" : inv.error().str());
  }
  void run(int64_t max_steps = 100000) {
    for (int64_t i = 0; engine->has_unfinished() && i < max_steps; ++i) {
      StepStats st = step();
      ASSERT_FALSE(st.idle()) << "no progress";
      if (::testing::Test::HasFailure()) return;
    }
    ASSERT_FALSE(engine->has_unfinished());
  }
  RequestOutput out(RequestId id) { return *engine->output(id); }
  bool all_free() const {
    return engine->blocks().num_free() == engine->num_blocks() && engine->blocks().num_sequences() == 0;
  }
};

inline EngineConfig config(int32_t num_blocks, int32_t max_seqs = 8, int32_t budget = 256, bool caching = true) {
  EngineConfig c;
  c.num_blocks = num_blocks;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.enable_prefix_caching = caching;
  c.vocab_size = kVocab;
  return c;
}

// The tokens a request generates when it runs alone in a roomy engine without prefix caching.
inline std::vector<int32_t> run_alone(std::vector<int32_t> prompt, RequestParams p, int32_t num_blocks = 256) {
  Harness h(config(num_blocks, 1, 512, false));
  p.on_token = nullptr;
  RequestId id = h.add(std::move(prompt), std::move(p));
  h.run();
  return h.out(id).tokens;
}

// n pseudo-random token ids in [1, kVocab) (0 is left for stop tokens), a function of (seed, i).
inline std::vector<int32_t> tokens(int n, uint64_t seed = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    uint64_t x = (seed * 0x9e3779b97f4a7c15ull) ^ (uint64_t(i) * 0xbf58476d1ce4e5b9ull);
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    t[size_t(i)] = 1 + int32_t(x % uint64_t(kVocab - 1));
  }
  return t;
}
inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline RequestParams max_tokens(int64_t n) {
  RequestParams p;
  p.max_tokens = n;
  return p;
}

}  // namespace ggflow::serving::testing
