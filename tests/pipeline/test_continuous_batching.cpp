// ContinuousBatchingPipeline with the RecomputeRunner reference on stories260K: batched text
// equals each request run alone through LLMPipeline; stop strings, cancellation and bad requests.
#include <gtest/gtest.h>

#include "require_file.h"

#include <filesystem>

#include "pipeline/continuous_batching.h"
#include "model_files.h"
#include "runtime/recompute_runner.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;

namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

text::SamplingParams greedy(int64_t n) {
  text::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

const std::vector<std::string> kPrompts = {
    "Once upon a time", "Once upon a time, there was a little girl", "The dog", "Lily and Tom went to the park",
    "Once upon a time, there was a little boy named Tim. Tim liked to play"};

class CB : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " not found"));
    auto r = runtime::RecomputeRunner::create(**model_file(kStories), kBlocks);
    ASSERT_TRUE(r.ok()) << r.error().str();
    runner = std::move(*r);
  }
  std::unique_ptr<ContinuousBatchingPipeline> make(int32_t budget, bool prefix = true) {
    serving::EngineConfig cfg;
    cfg.num_blocks = kBlocks;
    cfg.max_num_batched_tokens = budget;
    cfg.max_num_seqs = std::min(budget, 8);
    cfg.enable_prefix_caching = prefix;
    auto p = ContinuousBatchingPipeline::create(**model_file(kStories), *runner, cfg);
    if (!p.ok()) {
      ADD_FAILURE() << p.error().str();
      return nullptr;
    }
    return std::move(*p);
  }
  static constexpr int32_t kBlocks = 16;
  std::unique_ptr<runtime::RecomputeRunner> runner;
};

std::vector<GenerationResult> alone(const std::vector<std::string>& prompts, const text::SamplingParams& p) {
  auto pipe = open_llm(kStories, transforms::Layout::raw);
  EXPECT_TRUE(pipe.ok()) << (pipe.ok() ? "" : pipe.error().str());
  if (!pipe) return {};
  std::vector<GenerationResult> out;
  for (const auto& s : prompts) {
    auto r = (*pipe)->generate(s, p);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().str());
    out.push_back(r.ok() ? std::move(*r) : GenerationResult{});
  }
  return out;
}

}  // namespace

TEST_F(CB, BatchedTextEqualsEachRequestAlone) {
  const auto want = alone(kPrompts, greedy(24));
  for (int32_t budget : {7, 32, 512}) {
    for (bool prefix : {true, false}) {
      SCOPED_TRACE("budget " + std::to_string(budget) + (prefix ? " prefix cache" : " no prefix cache"));
      auto pipe = make(budget, prefix);
      ASSERT_NE(pipe, nullptr);
      auto got = pipe->generate(kPrompts, greedy(24));
      ASSERT_TRUE(got.ok()) << got.error().str();
      ASSERT_EQ(got->size(), kPrompts.size());
      for (size_t i = 0; i < kPrompts.size(); ++i) {
        EXPECT_EQ((*got)[i].tokens, want[i].tokens) << kPrompts[i];
        EXPECT_EQ((*got)[i].text, want[i].text) << kPrompts[i];
        EXPECT_EQ((*got)[i].usage.prompt_tokens, want[i].usage.prompt_tokens);
      }
      EXPECT_EQ(pipe->engine().blocks().num_free(), kBlocks) << "every block is free after the batch drains";
    }
  }
}

TEST_F(CB, StreamsStopStringsAndCancels) {
  auto pipe = make(64);
  ASSERT_NE(pipe, nullptr);
  auto p = greedy(40);
  p.stop = {"girl"};
  std::map<RequestId, std::string> streamed;
  auto collect = [&](RequestId id, std::string_view s) { streamed[id] += s; return true; };
  auto a = pipe->add_request("Once upon a time", p, collect);
  auto b = pipe->add_request("The dog", greedy(40), collect);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(pipe->step().ok());
  ASSERT_TRUE(pipe->cancel(*b).ok());
  ASSERT_TRUE(pipe->run_until_done().ok());
  auto ra = pipe->result(*a);
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(ra->finish, text::FinishReason::Stop);
  EXPECT_EQ(ra->text.find("girl"), std::string::npos) << ra->text;
  EXPECT_EQ(streamed[*a], ra->text);
  auto rb = pipe->engine().output(*b);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->end, text::FinishReason::Cancelled);
  EXPECT_EQ(pipe->engine().blocks().num_free(), kBlocks);
}

TEST_F(CB, BadRequestsAreRefusedWhileOthersGoOn) {
  auto pipe = make(64);
  ASSERT_NE(pipe, nullptr);
  auto good = pipe->add_request("Once upon a time", greedy(8));
  ASSERT_TRUE(good.ok());
  EXPECT_FALSE(pipe->add_request("", greedy(8)).ok());
  auto bad = greedy(8);
  bad.top_p = 2;
  EXPECT_FALSE(pipe->add_request("Once", bad).ok());
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += "Once upon a time ";
  auto too_long = pipe->add_request(huge, greedy(8));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().what.find("context"), std::string::npos) << too_long.error().what;
  ASSERT_TRUE(pipe->run_until_done().ok());
  auto r = pipe->result(*good);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usage.completion_tokens, 8);
  EXPECT_EQ(r->finish, text::FinishReason::Length);
}
