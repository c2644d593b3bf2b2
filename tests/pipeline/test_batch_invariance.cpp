// Batch invariance (issue #7): with greedy sampling, each of 8 requests (prompts of different
// lengths, some sharing a prefix longer than a block) gives exactly the same tokens whether it runs
// alone through LLMPipeline (SDPA), alone through the paged pipeline, or together with the other 7:
// at several token budgets (chunked prefill), with prefix caching on and off, and under memory
// pressure that forces preemption. The logits of the first steps are compared with memcmp against
// the SDPA model's.
#include <gtest/gtest.h>

#include "require_file.h"

#include <cstring>

#include "paged_fixture.h"
#include "pipeline/llm_pipeline.h"
#include "runtime/sequence_runner.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;

namespace {

constexpr int kTokens = 12;
constexpr int kLogitSteps = 3;  // logits rows compared bit for bit per request

struct Reference {
  std::vector<std::vector<int32_t>> tokens;           // per prompt, SDPA alone
  std::vector<std::vector<std::vector<float>>> rows;  // per prompt, first kLogitSteps rows
  std::string error;                                  // why it could not be computed ("" = fine)
};

// Each prompt alone through LLMPipeline over SDPA (tokens) and the SDPA runner (first rows).
Reference compute_reference() {
  Reference r;
  auto fail = [&](const std::string& what, const Error& e) {
    r.error = what + ": " + e.str();
    return r;
  };
  auto pipe = open_llm(kStories, transforms::Layout::sdpa);
  if (!pipe) return fail("LLMPipeline over SDPA", pipe.error());
  auto file = model_file(kStories);
  if (!file) return fail("model file", file.error());
  auto runner = runtime::open_sequence_runner(**file, transforms::Layout::sdpa);
  if (!runner) return fail("SDPA runner", runner.error());
  for (const auto& prompt : eight_prompts()) {
    auto g = (*pipe)->generate(prompt, greedy(kTokens));
    if (!g) return fail("generate '" + prompt + "'", g.error());
    if (static_cast<int>(g->tokens.size()) < kLogitSteps) {
      r.error = "'" + prompt + "' generated " + std::to_string(g->tokens.size()) + " tokens, fewer than the rows compared";
      return r;
    }
    r.tokens.push_back(g->tokens);
    auto ids = (*pipe)->format().encode(prompt);
    if (!ids) return fail("encode '" + prompt + "'", ids.error());
    (*runner)->reset();
    std::vector<std::vector<float>> rows;
    auto l = (*runner)->step(*ids);
    for (int i = 0; i < kLogitSteps; ++i) {
      if (!l) return fail("SDPA step", l.error());
      rows.emplace_back(l->begin(), l->end());
      l = (*runner)->step(std::span(&g->tokens[i], 1));
    }
    r.rows.push_back(rows);
  }
  return r;
}

const Reference& reference() {
  static const Reference ref = compute_reference();
  return ref;
}

struct Config {
  int32_t blocks, budget, max_seqs;
  bool prefix;
  std::string name() const {
    return "blocks " + std::to_string(blocks) + ", budget " + std::to_string(budget) + ", seqs " +
           std::to_string(max_seqs) + (prefix ? ", prefix cache" : ", no prefix cache");
  }
};

class BatchInvariance : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " not found"));
  }

  // Runs `which` prompts together; checks tokens and first logits rows against the reference.
  // Returns the total number of preemptions.
  int run(const Config& c, const std::vector<size_t>& which) {
    SCOPED_TRACE(c.name());
    auto runner = runtime::PagedRunner::create(**model_file(kStories), c.blocks);
    EXPECT_TRUE(runner.ok());
    if (!runner.ok()) return 0;
    RecordingRunner rec(**runner);
    serving::EngineConfig cfg;
    cfg.num_blocks = c.blocks;
    cfg.max_num_batched_tokens = c.budget;
    cfg.max_num_seqs = c.max_seqs;
    cfg.enable_prefix_caching = c.prefix;
    auto pipe = ContinuousBatchingPipeline::create(**model_file(kStories), rec, cfg);
    EXPECT_TRUE(pipe.ok()) << (pipe.ok() ? "" : pipe.error().str());
    if (!pipe.ok()) return 0;
    std::vector<RequestId> ids;
    for (size_t i : which) ids.push_back(*(*pipe)->add_request(eight_prompts()[i], greedy(kTokens)));
    EXPECT_TRUE((*pipe)->run_until_done().ok());
    const Reference& ref = reference();
    EXPECT_EQ(ref.error, "") << "the reference could not be computed";
    if (!ref.error.empty()) return 0;
    int preemptions = 0;
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = which[k];
      auto out = (*pipe)->engine().output(ids[k]);
      EXPECT_TRUE(out.ok());
      EXPECT_EQ(out->tokens, ref.tokens[i]) << "prompt " << i;
      preemptions += out->usage.preemptions;
      const auto& rows = rec.rows[ids[k]];
      EXPECT_GE(rows.size(), static_cast<size_t>(kLogitSteps));
      for (int s = 0; s < kLogitSteps && s < static_cast<int>(rows.size()); ++s) {
        EXPECT_EQ(rows[s].size(), ref.rows[i][s].size());
        if (rows[s].size() != ref.rows[i][s].size()) continue;
        EXPECT_EQ(std::memcmp(rows[s].data(), ref.rows[i][s].data(), rows[s].size() * sizeof(float)), 0)
            << "prompt " << i << ", step " << s << ": paged logits differ from SDPA's";
      }
    }
    EXPECT_EQ((*pipe)->engine().blocks().num_free(), c.blocks) << "every block is free after draining";
    return preemptions;
  }

  std::vector<size_t> all() const {
    std::vector<size_t> v(eight_prompts().size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }
};

}  // namespace

TEST_F(BatchInvariance, ReferenceIsLlmPipelineOverSdpa) {
  const Reference& ref = reference();
  ASSERT_EQ(ref.error, "");
  ASSERT_EQ(ref.tokens.size(), 8u);
  for (const auto& t : ref.tokens) EXPECT_FALSE(t.empty());
  // The raw layout agrees too (LLMPipeline over the raw runner).
  auto pipe = open_llm(kStories, transforms::Layout::raw);
  ASSERT_TRUE(pipe.ok()) << pipe.error().str();
  for (size_t i = 0; i < ref.tokens.size(); ++i) EXPECT_EQ((*pipe)->generate(eight_prompts()[i], greedy(kTokens))->tokens, ref.tokens[i]);
}

TEST_F(BatchInvariance, EachRequestAloneThroughThePagedPipeline) {
  for (size_t i = 0; i < eight_prompts().size(); ++i) run({16, 512, 8, true}, {i});
}

TEST_F(BatchInvariance, AllTogetherAtSeveralBudgetsWithAndWithoutPrefixCache) {
  for (int32_t budget : {8, 19, 64, 512})
    for (bool prefix : {true, false}) run({32, budget, 8, prefix}, all());
}

TEST_F(BatchInvariance, PrefixCacheHitsTheSharedPrompt) {
  auto runner = runtime::PagedRunner::create(**model_file(kStories), 32);
  ASSERT_TRUE(runner.ok());
  serving::EngineConfig cfg;
  cfg.num_blocks = 32;
  auto pipe = ContinuousBatchingPipeline::create(**model_file(kStories), **runner, cfg);
  ASSERT_TRUE(pipe.ok());
  auto first = (*pipe)->add_request(eight_prompts()[1], greedy(kTokens));
  ASSERT_TRUE((*pipe)->run_until_done().ok());
  auto second = (*pipe)->add_request(eight_prompts()[3], greedy(kTokens));
  ASSERT_TRUE((*pipe)->run_until_done().ok());
  auto r = (*pipe)->result(*second);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->usage.cached_tokens, 32) << "the shared prefix is longer than one block";
  ASSERT_EQ(reference().error, "");
  EXPECT_EQ(r->tokens, reference().tokens[3]) << "a prefix hit does not change the output";
  auto r1 = (*pipe)->result(*first);
  ASSERT_TRUE(r1.ok()) << r1.error().str();
  EXPECT_EQ(r1->tokens, reference().tokens[1]);
}

TEST_F(BatchInvariance, MemoryPressureForcesPreemptionWithoutChangingOutputs) {
  // 6 blocks = 192 tokens for 8 requests of up to ~50 tokens each: some must be preempted.
  const int preempted = run({6, 64, 8, true}, all()) + run({6, 64, 8, false}, all());
  EXPECT_GT(preempted, 0) << "the pool was meant to be too small for all requests at once";
}
