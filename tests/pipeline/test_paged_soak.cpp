// Soak (issue #7): 200 requests with random lengths and random cancellations through the paged
// pipeline (the real PagedAttention model of stories260K) with a small block pool. Every request
// completes or is cancelled, the block manager's invariants hold after every step, every block is
// free at the end, and completed requests give the same tokens as when run alone.
#include <gtest/gtest.h>

#include "require_file.h"

#include <random>

#include "paged_fixture.h"
#include "pipeline/llm_pipeline.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;

TEST(PagedSoak, TwoHundredRequestsRandomCancellationsSmallPool) {
  GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " not found"));
  constexpr int32_t kBlocks = 10;
  auto runner = runtime::PagedRunner::create(**model_file(kStories), kBlocks);
  ASSERT_TRUE(runner.ok()) << runner.error().str();
  serving::EngineConfig cfg;
  cfg.num_blocks = kBlocks;
  cfg.max_num_batched_tokens = 48;
  cfg.max_num_seqs = 6;
  auto pipe = ContinuousBatchingPipeline::create(**model_file(kStories), **runner, cfg);
  ASSERT_TRUE(pipe.ok()) << pipe.error().str();

  static const char* kWords[] = {"the", "dog", "little", "girl", "ran", "happy", "tree", "ball", "and", "sun",
                                 "Once", "upon", "a", "time", "she", "played", "big", "red", "park", "mom"};
  std::mt19937 rng(2026);
  std::vector<std::string> prompts;
  std::vector<int> max_tokens;
  std::vector<RequestId> ids;
  std::vector<bool> cancelled;
  auto add = [&](size_t k) {
    auto id = (*pipe)->add_request(prompts[k], greedy(max_tokens[k]));
    ASSERT_TRUE(id.ok()) << id.error().str();
    ids.push_back(*id);
  };
  for (int i = 0; i < 200; ++i) {
    std::string p;
    for (int w = 0, n = 1 + static_cast<int>(rng() % 40); w < n; ++w) p += std::string(w ? " " : "") + kWords[rng() % 20];
    prompts.push_back(p);
    max_tokens.push_back(1 + static_cast<int>(rng() % 16));
    cancelled.push_back(false);
  }
  size_t next = 0;
  int steps = 0;
  while (next < prompts.size() || (*pipe)->engine().has_unfinished()) {
    for (int k = 0; k < 3 && next < prompts.size(); ++k) add(next++);  // requests keep arriving
    auto s = (*pipe)->step();
    ASSERT_TRUE(s.ok()) << s.error().str();
    ASSERT_TRUE((*pipe)->engine().blocks().check_invariants().ok()) << "after step " << steps;
    if (rng() % 4 == 0 && !ids.empty()) {  // cancel a random earlier request (finished ones: no-op)
      const size_t k = rng() % ids.size();
      ASSERT_TRUE((*pipe)->cancel(ids[k]).ok());
      auto out = (*pipe)->engine().output(ids[k]);
      cancelled[k] = out.ok() && out->end == text::FinishReason::Cancelled;
    }
    ++steps;
  }
  int done = 0, n_cancelled = 0, preemptions = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    auto out = (*pipe)->engine().output(ids[k]);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(out->end == text::FinishReason::Length || out->end == text::FinishReason::Stop ||
                out->end == text::FinishReason::Cancelled)
        << "request " << k << " ended with " << text::to_string(out->end) << " " << out->error;
    (out->end == text::FinishReason::Cancelled ? n_cancelled : done)++;
    preemptions += out->usage.preemptions;
  }
  EXPECT_EQ(done + n_cancelled, 200);
  EXPECT_GT(n_cancelled, 0);
  EXPECT_GT(done, 0);
  EXPECT_GT(preemptions, 0) << "the pool was meant to be small enough to force preemptions";
  EXPECT_EQ((*pipe)->engine().blocks().num_free(), kBlocks) << "no block leaked";

  // Completed requests equal the same request alone (SDPA), for a sample of them.
  auto alone = open_llm(kStories, transforms::Layout::sdpa);
  ASSERT_TRUE(alone.ok()) << alone.error().str();
  int compared = 0;
  for (size_t k = 0; k < ids.size() && compared < 25; ++k) {
    auto out = (*pipe)->engine().output(ids[k]);
    if (out->end == text::FinishReason::Cancelled) continue;
    auto want = (*alone)->generate(prompts[k], greedy(max_tokens[k]));
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(out->tokens, want->tokens) << "request " << k << ": " << prompts[k];
    ++compared;
  }
  EXPECT_EQ(compared, 25);
  std::printf("soak: %d steps, %d completed, %d cancelled, %d preemptions\n", steps, done, n_cancelled, preemptions);
}
