// Scheduling policy over the fake paged runner: admission, chunked prefill at several budgets,
// decode-first order, preemption (newest first, same outputs, also with random sampling), prefix
// hits (cached tokens, shared ref-counted blocks, never a partial block). Every step is checked by
// the harness (batch structure, simulated KV reads, block-manager invariants).
#include <gtest/gtest.h>

#include "test_scheduler_harness.h"

using namespace ggflow::serving;
using namespace ggflow::text;
using namespace ggflow::serving::testing;

TEST(Scheduler, AdmissionLimitedByMaxNumSeqs) {
  Harness h(config(64, /*max_seqs=*/2));
  h.runner.keep_log = true;
  RequestId a = h.add(tokens(10, 1), max_tokens(5));
  RequestId b = h.add(tokens(10, 2), max_tokens(5));
  RequestId c = h.add(tokens(10, 3), max_tokens(5));
  h.step();
  EXPECT_EQ(h.runner.log[0].seq_ids, (std::vector<RequestId>{a, b}));
  EXPECT_EQ(h.engine->scheduler().waiting().size(), 1u);
  h.run();
  size_t first_c = 0;
  for (size_t i = 0; i < h.runner.log.size(); ++i) {
    EXPECT_LE(h.runner.log[i].num_seqs(), 2);
    if (!first_c && h.runner.log[i].seq_ids[0] == c) first_c = i;
  }
  EXPECT_EQ(first_c, 5u);  // a and b: 1 prefill step + 4 decode steps, then c
  for (RequestId id : {a, b, c}) EXPECT_EQ(h.out(id).tokens.size(), 5u);
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, AdmissionLimitedByFreeBlocks) {
  Harness h(config(5));
  h.runner.keep_log = true;
  RequestId a = h.add(tokens(64, 1), max_tokens(3));
  RequestId b = h.add(tokens(64, 2), max_tokens(3));
  RequestId c = h.add(tokens(64, 3), max_tokens(3));
  StepStats st = h.step();
  EXPECT_EQ(st.num_seqs, 2);  // a and b take 4 of 5 blocks; c needs 2
  EXPECT_EQ(st.num_tokens, 128);
  EXPECT_EQ(h.engine->scheduler().waiting().front()->id, c);
  h.run();
  uint64_t seed = 1;
  for (RequestId id : {a, b, c}) {
    EXPECT_EQ(h.out(id).end, FinishReason::Length);
    EXPECT_EQ(h.out(id).tokens, run_alone(tokens(64, seed++), max_tokens(3)));
  }
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, ChunkedPrefillAtSeveralBudgets) {
  const auto prompt = tokens(100, 9);
  const auto expected = run_alone(prompt, max_tokens(6));
  ASSERT_EQ(expected.size(), 6u);
  for (int32_t budget : {8, 16, 32, 40, 99, 100, 512}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    Harness h(config(16, 4, budget));
    h.runner.keep_log = true;
    RequestId id = h.add(prompt, max_tokens(6));
    h.run();
    EXPECT_EQ(h.out(id).tokens, expected);
    const int64_t chunks = (100 + budget - 1) / budget;
    ASSERT_EQ(int64_t(h.runner.log.size()), chunks + 5);
    for (int64_t k = 0; k < chunks; ++k) {
      const ScheduledBatch& b = h.runner.log[size_t(k)];
      EXPECT_EQ(b.past_lens[0], k * budget);
      EXPECT_EQ(b.num_tokens(), std::min<int64_t>(budget, 100 - k * budget));
      EXPECT_EQ(b.sampled_tokens_indices.size(), k + 1 == chunks ? 1u : 0u);  // logits only when the prompt is done
    }
    for (size_t k = size_t(chunks); k < h.runner.log.size(); ++k) EXPECT_EQ(h.runner.log[k].num_tokens(), 1);
  }
}

TEST(Scheduler, DecodeRowsComeFirstAndBudgetHolds) {
  Harness h(config(32, 4, /*budget=*/40));
  h.runner.keep_log = true;
  RequestId a = h.add(tokens(8, 1), max_tokens(12));
  h.step();  // a prefills and samples
  RequestId b = h.add(tokens(100, 2), max_tokens(4));
  StepStats st = h.step();
  EXPECT_EQ(st.num_decode_seqs, 1);
  EXPECT_EQ(st.num_tokens, 40);
  const ScheduledBatch& b2 = h.runner.log.back();
  EXPECT_EQ(b2.seq_ids, (std::vector<RequestId>{a, b}));
  EXPECT_EQ(b2.subsequence_begins, (std::vector<int32_t>{0, 1, 40}));
  EXPECT_EQ(b2.sampled_tokens_indices, (std::vector<int32_t>{0}));  // only a's decode row
  h.run();
  bool saw_two_decodes = false;
  for (const ScheduledBatch& batch : h.runner.log) {
    EXPECT_LE(batch.num_tokens(), 40);
    saw_two_decodes |= batch.num_decode_seqs == 2;
  }
  EXPECT_TRUE(saw_two_decodes);
  EXPECT_EQ(h.out(a).tokens, run_alone(tokens(8, 1), max_tokens(12)));
  EXPECT_EQ(h.out(b).tokens, run_alone(tokens(100, 2), max_tokens(4)));
}

TEST(Scheduler, PreemptsNewestFirstAndOutputsAreUnchanged) {
  // 6 blocks; three 40-token prompts (2 blocks each) that grow to 80 tokens (3 blocks each).
  Harness h(config(6, 4, 256));
  std::vector<RequestId> ids;
  for (uint64_t s = 1; s <= 3; ++s) ids.push_back(h.add(tokens(40, s), max_tokens(40)));
  int preempted_steps = 0;
  bool first_was_newest = false;
  while (h.engine->has_unfinished()) {
    std::vector<int32_t> before;
    for (RequestId id : ids) before.push_back(h.engine->sequence(id)->usage.preemptions);
    StepStats st = h.step();
    ASSERT_FALSE(st.idle());
    if (st.num_preempted > 0 && preempted_steps++ == 0)
      first_was_newest = h.engine->sequence(ids[2])->usage.preemptions > before[2] &&
                         h.engine->sequence(ids[0])->usage.preemptions == before[0];
    // The waiting queue stays in arrival order (a preempted request goes ahead of later ones).
    const auto& w = h.engine->scheduler().waiting();
    for (size_t i = 1; i < w.size(); ++i) EXPECT_LT(w[i - 1]->id, w[i]->id);
  }
  EXPECT_GT(preempted_steps, 0);
  EXPECT_TRUE(first_was_newest);
  EXPECT_EQ(h.out(ids[0]).usage.preemptions, 0);  // the oldest request is never the victim
  EXPECT_GT(h.out(ids[2]).usage.preemptions, 0);
  EXPECT_GT(h.out(ids[2]).usage.recomputed_tokens, 0);
  for (uint64_t s = 1; s <= 3; ++s) {
    EXPECT_EQ(h.out(ids[s - 1]).tokens, run_alone(tokens(40, s), max_tokens(40))) << "request " << s;
    EXPECT_EQ(h.out(ids[s - 1]).tokens.size(), 40u);
  }
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, PreemptionKeepsRandomSamplingIdentical) {
  // With a seeded text::Sampler per request, recompute must not redraw or skip random numbers.
  auto params = [](uint64_t seed) {
    SamplingParams sp;
    sp.temperature = 1.0;
    sp.seed = seed;
    RequestParams p = max_tokens(40);
    set_sampler(p, sp, {});
    return p;
  };
  Harness h(config(6, 4, 256));
  std::vector<RequestId> ids;
  for (uint64_t s = 1; s <= 3; ++s) ids.push_back(h.add(tokens(40, s), params(s)));
  h.run();
  int preemptions = 0;
  for (uint64_t s = 1; s <= 3; ++s) {
    preemptions += h.out(ids[s - 1]).usage.preemptions;
    EXPECT_EQ(h.out(ids[s - 1]).tokens, run_alone(tokens(40, s), params(s))) << "request " << s;
  }
  EXPECT_GT(preemptions, 0);
}

TEST(Scheduler, PrefixHitsCountCachedTokensAndKeepOutputs) {
  Harness h(config(32));
  const auto p = tokens(100, 5);
  RequestId a = h.add(p, max_tokens(4));
  h.run();
  EXPECT_EQ(h.out(a).usage.cached_tokens, 0);
  // Same 100-token prefix + 20 more: the 3 full blocks (96 tokens) are reused.
  const auto p2 = concat(p, tokens(20, 6));
  RequestId b = h.add(p2, max_tokens(4));
  h.run();
  EXPECT_EQ(h.out(b).usage.cached_tokens, 96);
  EXPECT_EQ(h.out(b).usage.prompt_tokens, 120);
  EXPECT_EQ(h.out(b).tokens, run_alone(p2, max_tokens(4)));
  // A prompt that is exactly 3 blocks: the last block is computed again for its logits.
  const std::vector<int32_t> p3(p.begin(), p.begin() + 96);
  RequestId c = h.add(p3, max_tokens(2));
  h.run();
  EXPECT_EQ(h.out(c).usage.cached_tokens, 64);
  EXPECT_EQ(h.out(c).tokens, run_alone(p3, max_tokens(2)));
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, HitNeverReusesAPartiallyFilledBlock) {
  Harness h(config(32));
  const auto q = tokens(40, 7);  // one full block + 8 tokens
  RequestId a = h.add(q, max_tokens(1));
  h.run();
  RequestId b = h.add(concat(q, tokens(10, 8)), max_tokens(3));
  h.run();
  EXPECT_EQ(h.out(a).usage.cached_tokens, 0);
  EXPECT_EQ(h.out(b).usage.cached_tokens, 32);  // not 40: the second block was partial
  EXPECT_EQ(h.out(b).tokens, run_alone(concat(q, tokens(10, 8)), max_tokens(3)));
}

TEST(Scheduler, ConcurrentRequestsShareCachedBlocks) {
  Harness h(config(32));
  const auto shared = tokens(70, 11);
  RequestId a = h.add(concat(shared, tokens(5, 12)), max_tokens(6));
  h.step();  // a's prompt is computed; its two full blocks are cached
  RequestId b = h.add(concat(shared, tokens(9, 13)), max_tokens(6));
  h.step();
  const auto& ta = h.engine->blocks().table(a);
  const auto& tb = h.engine->blocks().table(b);
  ASSERT_GE(tb.size(), 3u);
  EXPECT_EQ(ta[0], tb[0]);
  EXPECT_EQ(ta[1], tb[1]);
  EXPECT_NE(ta[2], tb[2]);  // the partial third block is private
  EXPECT_EQ(h.engine->blocks().ref_count(ta[0]), 2);
  EXPECT_EQ(h.engine->blocks().ref_count(ta[2]), 1);
  h.run();
  EXPECT_EQ(h.out(b).usage.cached_tokens, 64);
  EXPECT_EQ(h.out(a).tokens, run_alone(concat(shared, tokens(5, 12)), max_tokens(6)));
  EXPECT_EQ(h.out(b).tokens, run_alone(concat(shared, tokens(9, 13)), max_tokens(6)));
  EXPECT_TRUE(h.all_free());
}

TEST(Scheduler, PrefixCachingCanBeTurnedOff) {
  Harness h(config(32, 8, 256, /*caching=*/false));
  const auto p = tokens(100, 5);
  h.add(p, max_tokens(2));
  h.run();
  RequestId b = h.add(p, max_tokens(2));
  h.run();
  EXPECT_EQ(h.out(b).usage.cached_tokens, 0);
  EXPECT_EQ(h.engine->blocks().prefix_cache().num_cached(), 0u);
}

TEST(Scheduler, PreemptsNewestFirstWithinOneStep) {
  // Four 32-token prompts fill a 4-block pool; each needs a second block for its first decode.
  Scheduler sched(SchedulerConfig{8, 256}, 4, true);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (RequestId id = 1; id <= 4; ++id) {
    auto s = std::make_unique<Sequence>();
    s->id = id;
    s->tokens = tokens(32, id);
    s->prompt_len = 32;
    s->max_len = 100;
    sched.add(s.get());
    seqs.push_back(std::move(s));
  }
  SchedulerOutput o1 = sched.schedule();
  ASSERT_EQ(o1.batch.seq_ids, (std::vector<RequestId>{1, 2, 3, 4}));
  EXPECT_EQ(o1.batch.sampled_tokens_indices, (std::vector<int32_t>{31, 63, 95, 127}));
  EXPECT_EQ(o1.batch.block_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  sched.commit(o1);
  for (auto& s : seqs) s->tokens.push_back(1);  // the sampled token
  SchedulerOutput o2 = sched.schedule();
  EXPECT_EQ(o2.preempted, (std::vector<RequestId>{4, 3}));  // 1 takes 4's block, 2 takes 3's
  EXPECT_EQ(o2.batch.seq_ids, (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(o2.batch.num_decode_seqs, 2);
  EXPECT_EQ(o2.batch.past_lens, (std::vector<int32_t>{32, 32}));
  EXPECT_EQ(o2.batch.block_indices_begins, (std::vector<int32_t>{0, 2, 4}));
  ASSERT_EQ(sched.waiting().size(), 2u);
  EXPECT_EQ(sched.waiting()[0]->id, 3u);  // queue stays in arrival order
  EXPECT_EQ(seqs[3]->num_computed, 0);
  EXPECT_EQ(seqs[3]->usage.preemptions, 1);
  EXPECT_TRUE(sched.blocks().check_invariants().ok());
}
