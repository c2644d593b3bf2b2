// LLMPipeline end to end on real files: text in, text out, against llama.cpp's greedy tokens,
// with the stop rules, streaming, seeds and bad requests.
#include <gtest/gtest.h>

#include "require_file.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pipeline/llm_pipeline.h"

using namespace ggflow;
using namespace ggflow::pipeline;
namespace fs = std::filesystem;

namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

std::unique_ptr<LLMPipeline> open_pipeline(const std::string& path, int64_t n_ctx = 0) {
  auto file = runtime::ModelFile::open(path);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().str());
  if (!file) return nullptr;
  runtime::RunnerOptions o;
  o.n_ctx = n_ctx;
  auto p = LLMPipeline::open(**file, transforms::Layout::raw, o);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().str());
  return p ? std::move(*p) : nullptr;
}

text::SamplingParams greedy(int64_t n) {
  text::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

}  // namespace

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " not found"));
    pipe = open_pipeline(kStories);
  }
  std::unique_ptr<LLMPipeline> pipe;
};

// The golden was written by python/gen_model_goldens.py with llama-cpp-python from the same text:
// tokenizer + pipeline + raw runner together must give llama.cpp's 32 greedy tokens.
TEST_F(Stories, GreedyTextMatchesLlamaCpp) {
  std::ifstream in(std::string(GGFLOW_ROOT) + "/tests/conformance/goldens/stories260K.json");
  const auto g = nlohmann::json::parse(in);
  auto r = pipe->generate(g["prompt_text"].get<std::string>(), greedy(32));
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(r->usage.prompt_tokens, g["n_prompt"].get<int64_t>());
  EXPECT_EQ(r->tokens, g["greedy"].get<std::vector<int32_t>>());
  EXPECT_EQ(r->finish, text::FinishReason::Length);
  auto text = pipe->tokenizer().decode(r->tokens);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(r->text, *text);
}

TEST_F(Stories, StreamedTextIsTheResultAndCanBeStopped) {
  std::string streamed;
  auto r = pipe->generate("Once upon a time", greedy(24), [&](std::string_view s) { streamed += s; return true; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->usage.completion_tokens, 24);
  int calls = 0;
  auto cut = pipe->generate("Once upon a time", greedy(24), [&](std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_LT(cut->tokens.size(), 24u);
}

TEST_F(Stories, StopStringEndsBeforeItAndIsNeverEmitted) {
  auto full = pipe->generate("Once upon a time", greedy(40));
  ASSERT_TRUE(full.ok());
  const std::string word = "girl";
  const size_t at = full->text.find(word);
  ASSERT_NE(at, std::string::npos) << full->text;
  auto p = greedy(40);
  p.stop = {word};
  auto r = pipe->generate("Once upon a time", p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, full->text.substr(0, at));
  EXPECT_EQ(r->finish, text::FinishReason::Stop);
}

TEST_F(Stories, SameSeedSameTokens) {
  text::SamplingParams p;
  p.temperature = 1.0;
  p.seed = 7;
  p.max_tokens = 20;
  auto a = pipe->generate("Once upon a time", p);
  auto b = pipe->generate("Once upon a time", p);
  p.seed = 8;
  auto c = pipe->generate("Once upon a time", p);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens) << "the KV state is reset between requests and the seed fixes the draw";
  EXPECT_NE(a->tokens, c->tokens);
}

TEST_F(Stories, BadRequestsAreRefused) {
  auto empty = pipe->generate("", greedy(4));
  EXPECT_FALSE(empty.ok());
  auto p = greedy(4);
  p.temperature = -1;
  auto bad = pipe->generate("Once", p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("temperature"), std::string::npos) << bad.error().what;
  auto chat = pipe->chat(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}), greedy(4));
  ASSERT_FALSE(chat.ok()) << "stories260K has no chat template";
  EXPECT_NE(chat.error().what.find("chat template"), std::string::npos);
  auto small = open_pipeline(kStories, 8);
  auto long_prompt = small->generate("Once upon a time, there was a little girl named Lily", greedy(4));
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_NE(long_prompt.error().what.find("context"), std::string::npos) << long_prompt.error().what;
  auto fills = small->generate("Once upon", greedy(100));
  ASSERT_TRUE(fills.ok()) << fills.error().str();
  EXPECT_EQ(fills->finish, text::FinishReason::Length) << "the context ends the generation";
  EXPECT_LE(fills->usage.prompt_tokens + fills->usage.completion_tokens, 9);
}

TEST(SmolLM2, ChatAnswersThroughTheTemplate) {
  const fs::path p = fs::path(GGFLOW_ROOT) / "models/smollm2-135m-instruct-q4_1.gguf";
  GGFLOW_REQUIRE_FILE(p, "model not available (see models/*.missing)");
  auto pipe = open_pipeline(p.string());
  auto r = pipe->chat(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}}),
                      greedy(24));
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_NE(r->text.find("Paris"), std::string::npos) << r->text;
  EXPECT_EQ(r->finish, text::FinishReason::Stop) << "ends on <|im_end|>, which is not printed";
  EXPECT_EQ(r->text.find("<|im_end|>"), std::string::npos);
}
