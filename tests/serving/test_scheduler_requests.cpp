// Engine request lifecycle over the fake paged runner: cancellation (blocks freed at once, also
// from a callback), rejection of bad requests while others go on, stop tokens, streaming by
// callback and by polling, usage and timing, runner failure, engine configuration. Every step is
// checked by the harness (batch structure, simulated KV reads, block-manager invariants).
#include <gtest/gtest.h>

#include "test_scheduler_harness.h"

using namespace ggflow::serving;
using namespace ggflow::text;
using namespace ggflow::serving::testing;

TEST(Scheduler, CancelFreesBlocksAtOnce) {
  Harness h(config(16));
  RequestId a = h.add(tokens(70, 1), max_tokens(30));
  RequestId b = h.add(tokens(10, 2), max_tokens(30));
  h.step();
  h.step();
  ASSERT_EQ(h.engine->blocks().table(a).size(), 3u);
  const int32_t free_before = h.engine->blocks().num_free();
  ASSERT_TRUE(h.engine->cancel(a).ok());
  EXPECT_FALSE(h.engine->blocks().has(a));
  EXPECT_EQ(h.engine->blocks().num_free(), free_before + 3);
  h.check();
  RequestOutput oa = h.out(a);
  EXPECT_EQ(oa.end, FinishReason::Cancelled);
  ASSERT_EQ(oa.tokens.size(), 2u);
  auto alone = run_alone(tokens(70, 1), max_tokens(30));
  EXPECT_TRUE(std::equal(oa.tokens.begin(), oa.tokens.end(), alone.begin()));
  // Cancelling a waiting request, a finished one, an unknown one.
  RequestId c = h.add(tokens(5, 3), max_tokens(3));
  ASSERT_TRUE(h.engine->cancel(c).ok());
  EXPECT_EQ(h.out(c).end, FinishReason::Cancelled);
  EXPECT_TRUE(h.out(c).tokens.empty());
  EXPECT_TRUE(h.engine->cancel(a).ok());
  EXPECT_FALSE(h.engine->cancel(12345).ok());
  h.run();
  EXPECT_EQ(h.out(b).tokens, run_alone(tokens(10, 2), max_tokens(30)));
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, RejectsBadRequestsWhileOthersGoOn) {
  EngineConfig cfg = config(16);
  cfg.max_model_len = 100;
  Harness h(cfg);
  RequestId a = h.add(tokens(20, 1), max_tokens(8));
  h.step();
  auto expect_rejected = [&](std::vector<int32_t> prompt, RequestParams p, const char* what) {
    auto r = h.engine->add_request(std::move(prompt), std::move(p));
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.error().what.find("request rejected"), std::string::npos) << r.error().what;
  };
  expect_rejected({}, max_tokens(4), "empty prompt");
  expect_rejected(tokens(10), max_tokens(0), "max_tokens 0");
  expect_rejected(tokens(10), max_tokens(-3), "max_tokens < 0");
  expect_rejected(tokens(100), max_tokens(1), "prompt fills the context");
  expect_rejected(tokens(600), max_tokens(1), "prompt larger than the pool");
  expect_rejected({1, 2, int32_t(kVocab)}, max_tokens(1), "token outside the vocabulary");
  expect_rejected({1, -1}, max_tokens(1), "negative token");
  RequestParams bad_stop = max_tokens(2);
  bad_stop.stop_token_ids = {int32_t(kVocab) + 5};
  expect_rejected(tokens(3), bad_stop, "stop id outside the vocabulary");
  RequestId b = h.add(tokens(99, 2), max_tokens(50));  // fits: 99 + 1 == max_model_len
  h.run();
  EXPECT_EQ(h.out(a).tokens, run_alone(tokens(20, 1), max_tokens(8)));
  EXPECT_EQ(h.out(b).tokens.size(), 1u);  // capped by max_model_len
  EXPECT_EQ(h.out(b).end, FinishReason::Length);
}

TEST(Scheduler, StopTokensCallbacksAndTiming) {
  const auto prompt = tokens(30, 4);
  const auto alone = run_alone(prompt, max_tokens(10));
  ASSERT_EQ(alone.size(), 10u);
  Harness h(config(16));
  // Stop on the token the request would generate third (first occurrence).
  RequestParams p = max_tokens(10);
  p.stop_token_ids = {alone[2]};
  const size_t stop_at = size_t(std::find(alone.begin(), alone.end(), alone[2]) - alone.begin());
  std::vector<int32_t> streamed;
  p.on_token = [&](RequestId, int32_t t) {
    streamed.push_back(t);
    return true;
  };
  RequestId a = h.add(prompt, p);
  // A callback that stops after two tokens.
  RequestParams q = max_tokens(10);
  q.on_token = [n = 0](RequestId, int32_t) mutable { return ++n < 2; };
  RequestId b = h.add(prompt, q);
  h.run();
  RequestOutput oa = h.out(a), ob = h.out(b);
  EXPECT_EQ(oa.end, FinishReason::Stop);
  EXPECT_EQ(oa.tokens, std::vector<int32_t>(alone.begin(), alone.begin() + ptrdiff_t(stop_at + 1)));
  EXPECT_EQ(streamed, oa.tokens);
  EXPECT_EQ(ob.end, FinishReason::Stop);
  EXPECT_EQ(ob.tokens, std::vector<int32_t>(alone.begin(), alone.begin() + 2));
  EXPECT_EQ(oa.usage.completion_tokens, int64_t(oa.tokens.size()));
  EXPECT_EQ(oa.usage.prompt_tokens, 30);
  EXPECT_GT(oa.timing.time_to_first_token_s, 0.0);
  EXPECT_GE(ob.timing.time_per_output_token_s, 0.0);
  EXPECT_GE(oa.timing.total_s, oa.timing.time_to_first_token_s);
}

TEST(Scheduler, RunnerFailureEndsTheBatchOnly) {
  Harness h(config(16));
  RequestId a = h.add(tokens(10, 1), max_tokens(5));
  h.step();
  h.runner.fail_next = true;
  auto st = h.engine->step();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(h.out(a).end, FinishReason::Error);
  EXPECT_NE(h.out(a).error.find("injected"), std::string::npos);
  EXPECT_TRUE(h.all_free());
  RequestId b = h.add(tokens(10, 2), max_tokens(5));
  h.run();
  EXPECT_EQ(h.out(b).tokens, run_alone(tokens(10, 2), max_tokens(5)));
}

TEST(Scheduler, ConfigFromMemoryBudgetAndConfigErrors) {
  FakePagedRunner runner(64, kVocab);
  EngineConfig c;
  c.kv_bytes_per_block = BlockManager::kv_bytes_per_block(2 * 2 * 1 * 8, ggflow::gguf::GgmlType::F32);
  c.kv_cache_bytes = 10 * c.kv_bytes_per_block + 5;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 64;
  auto e = ContinuousBatchingEngine::create(c, runner);
  ASSERT_TRUE(e.ok()) << e.error().str();
  EXPECT_EQ((*e)->num_blocks(), 10);
  EXPECT_EQ((*e)->max_model_len(), 320);
  EngineConfig bad = c;
  bad.max_model_len = 321;
  EXPECT_FALSE(ContinuousBatchingEngine::create(bad, runner).ok());
  bad = c;
  bad.max_num_batched_tokens = 3;
  EXPECT_FALSE(ContinuousBatchingEngine::create(bad, runner).ok());
  bad = c;
  bad.kv_cache_bytes = 0;
  EXPECT_FALSE(ContinuousBatchingEngine::create(bad, runner).ok());
}

TEST(Scheduler, PollingAndDeferredCancelFromCallback) {
  Harness h(config(32));
  RequestId b = 0;
  RequestParams pa = max_tokens(10);
  int seen = 0;
  pa.on_token = [&](RequestId, int32_t) {
    if (++seen == 3) {
      EXPECT_TRUE(h.engine->cancel(b).ok());  // deferred to the end of the step
    }
    return true;
  };
  RequestId a = h.add(tokens(12, 1), pa);
  b = h.add(tokens(12, 2), max_tokens(10));
  std::vector<int32_t> polled;
  while (h.engine->has_unfinished()) {
    h.step();
    auto t = h.engine->take_new_tokens(a);
    ASSERT_TRUE(t.ok());
    EXPECT_LE(t->size(), 1u);
    polled.insert(polled.end(), t->begin(), t->end());
  }
  EXPECT_EQ(polled, h.out(a).tokens);
  EXPECT_EQ(h.out(a).tokens.size(), 10u);
  EXPECT_EQ(h.out(b).end, FinishReason::Cancelled);
  EXPECT_EQ(h.out(b).tokens.size(), 3u);  // b sampled in the same step as a's third token
  EXPECT_TRUE(h.all_free());
}

// RequestParams::prompt_logprobs: every prompt token after the first is scored from the row of the
// position before it, across prefill chunks (budget 16 < the prompt), also when the prompt's blocks
// are in the prefix cache (such a request computes its prompt in full), and the generated tokens
// are the ones the request makes without it.
TEST(Scheduler, PromptLogprobsScoreEveryPromptToken) {
  Harness h(config(32, 8, 16, true));
  const std::vector<int32_t> prompt = tokens(70, 5);
  RequestParams p = max_tokens(4);
  p.prompt_logprobs = 3;
  RequestId a = h.add(prompt, p);
  h.run();
  RequestId b = h.add(prompt, p);              // its blocks are cached now
  RequestId c = h.add(prompt, max_tokens(4));  // without prompt_logprobs: served from the cache
  h.run();
  for (RequestId id : {a, b}) {
    const Sequence& s = *h.engine->sequence(id);
    ASSERT_EQ(s.prompt_logprobs.size(), prompt.size() - 1);
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
      std::vector<float> row;  // the fake model's row after prompt[0..i]
      fake_logits(std::span<const int32_t>(prompt).first(i + 1), kVocab, row);
      const StepLogprobs want = step_logprobs(row, prompt[i + 1], 3);
      const StepLogprobs& got = s.prompt_logprobs[i];
      EXPECT_EQ(got.chosen.token, prompt[i + 1]);
      EXPECT_EQ(got.chosen.logprob, want.chosen.logprob) << "position " << i;
      ASSERT_EQ(got.top.size(), 3u);
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got.top[k].token, want.top[k].token);
    }
    EXPECT_EQ(h.out(id).tokens, run_alone(prompt, max_tokens(4)));
  }
  EXPECT_EQ(h.out(b).usage.cached_tokens, 0);
  EXPECT_GT(h.out(c).usage.cached_tokens, 0);
  EXPECT_TRUE(h.engine->sequence(c)->prompt_logprobs.empty());
  SamplingParams sp;
  sp.prompt_logprobs = 21;
  EXPECT_FALSE(sp.validate().ok());
  EXPECT_TRUE(h.all_free());
}
