// Grammar-constrained generation (pipeline/constrained_sampler.h) on SmolLM2:
//   - every answer is a sentence of its grammar (a JSON schema's documents parse and have the
//     schema's keys; a GBNF grammar's answers match it), greedy and sampled;
//   - greedy constrained tokens are the same on the raw and SDPA layouts (LLMPipeline), on the
//     paged pipeline alone and in a batch with free and other constrained requests, and with 1 and
//     2 executor threads;
//   - a grammar that cannot start, or a matcher that fails mid-way, ends the request with an
//     error that says so (never a crash).
#include <gtest/gtest.h>

#include "require_file.h"

#include <regex>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "model_files.h"
#include "pipeline/continuous_batching.h"
#include "pipeline/llm_pipeline.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;

namespace {

const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";
const char* kPrompt = "<|im_start|>user\nDescribe a programmer as JSON.<|im_end|>\n<|im_start|>assistant\n";

Constraint schema_constraint() {
  const auto schema = grammar::Json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "skills": {"type": "array", "items": {"enum": ["c++", "python", "rust"]}, "minItems": 1, "maxItems": 3}},
      "required": ["name", "age", "skills"], "additionalProperties": false})");
  auto g = grammar::compile_json_schema(schema);
  EXPECT_TRUE(g) << g.error().str();
  return Constraint{g ? *g : nullptr};
}

text::SamplingParams params(double temperature, uint64_t seed = 0) {
  text::SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  p.max_tokens = 200;
  return p;
}

void expect_programmer(const std::string& text, const std::string& where) {
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << where << ": not JSON: " << text;
  ASSERT_TRUE(doc.is_object()) << where;
  EXPECT_TRUE(doc.contains("name") && doc["name"].is_string()) << where << ": " << text;
  EXPECT_TRUE(doc.contains("age") && doc["age"].is_number_integer()) << where << ": " << text;
  EXPECT_TRUE(doc.contains("skills") && doc["skills"].is_array() && !doc["skills"].empty()) << where << ": " << text;
  EXPECT_EQ(doc.size(), 3u) << where << ": " << text;
}

std::unique_ptr<LLMPipeline> llm(transforms::Layout layout, int threads) {
  auto f = model_file(kSmol);
  EXPECT_TRUE(f) << f.error().str();
  runtime::RunnerOptions o;
  o.n_ctx = 512;
  o.compile.threads = threads;
  auto p = LLMPipeline::open(**f, layout, o);
  EXPECT_TRUE(p) << p.error().str();
  return p ? std::move(*p) : nullptr;
}

std::unique_ptr<ContinuousBatchingPipeline> paged(int threads) {
  auto f = model_file(kSmol);
  EXPECT_TRUE(f) << f.error().str();
  serving::EngineConfig cfg;
  cfg.num_blocks = 96;
  runtime::CompileOptions o;
  o.threads = threads;
  auto p = ContinuousBatchingPipeline::open(**f, cfg, o);
  EXPECT_TRUE(p) << p.error().str();
  return p ? std::move(*p) : nullptr;
}

TEST(Constrained, GreedySameOnEveryLayoutBatchAndThreadCount) {
  GGFLOW_REQUIRE_FILE(kSmol, "SmolLM2 model");
  const Constraint c = schema_constraint();
  ASSERT_TRUE(c);
  auto ref_pipe = llm(transforms::Layout::sdpa, 2);
  ASSERT_TRUE(ref_pipe);
  auto ref = ref_pipe->generate(kPrompt, params(0), {}, c);
  ASSERT_TRUE(ref) << ref.error().str();
  expect_programmer(ref->text, "sdpa, 2 threads");
  EXPECT_EQ(ref->finish, text::FinishReason::Stop);

  for (auto layout : {transforms::Layout::raw, transforms::Layout::sdpa})
    for (int threads : {1, 2}) {
      auto p = llm(layout, threads);
      ASSERT_TRUE(p);
      auto g = p->generate(kPrompt, params(0), {}, c);
      ASSERT_TRUE(g) << g.error().str();
      EXPECT_EQ(g->tokens, ref->tokens) << transforms::to_string(layout) << ", " << threads << " threads";
    }
  for (int threads : {1, 2}) {
    auto p = paged(threads);
    ASSERT_TRUE(p);
    // Alone, then in a batch: free requests and other constrained ones around it.
    auto alone = p->add_request(kPrompt, params(0), {}, c);
    ASSERT_TRUE(alone) << alone.error().str();
    ASSERT_TRUE(p->run_until_done());
    std::vector<RequestId> ids;
    for (int i = 0; i < 6; ++i) {
      auto id = i == 3 ? p->add_request(kPrompt, params(0), {}, c)
                       : p->add_request("<|im_start|>user\nWrite poem " + std::to_string(i) + "<|im_end|>\n<|im_start|>assistant\n",
                                        params(i % 2 ? 0.8 : 0, uint64_t(i)), {}, i % 2 ? c : Constraint{});
      ASSERT_TRUE(id) << id.error().str();
      ids.push_back(*id);
    }
    ASSERT_TRUE(p->run_until_done());
    auto a = p->result(*alone);
    auto b = p->result(ids[3]);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->tokens, ref->tokens) << "paged alone, " << threads << " threads";
    EXPECT_EQ(b->tokens, ref->tokens) << "paged in a batch of 6, " << threads << " threads";
    for (int i : {1, 3, 5}) {  // the sampled constrained ones are valid too
      auto r = p->result(ids[size_t(i)]);
      ASSERT_TRUE(r) << r.error().str();
      if (r->finish == text::FinishReason::Stop) expect_programmer(r->text, "batched, request " + std::to_string(i));
    }
  }
}

TEST(Constrained, SampledAnswersAreSentencesOfTheGrammar) {
  GGFLOW_REQUIRE_FILE(kSmol, "SmolLM2 model");
  auto g = grammar::parse_gbnf(R"(root ::= ("yes" | "no") ", because " [a-z ]{1,40} ".")");
  ASSERT_TRUE(g) << g.error().str();
  auto p = paged(2);
  ASSERT_TRUE(p);
  std::vector<RequestId> ids;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    auto id = p->add_request("<|im_start|>user\nIs the sea salty?<|im_end|>\n<|im_start|>assistant\n", params(1.0, seed), {},
                             Constraint{*g});
    ASSERT_TRUE(id) << id.error().str();
    ids.push_back(*id);
  }
  ASSERT_TRUE(p->run_until_done());
  const std::regex re("(yes|no), because [a-z ]{1,40}\\.");
  for (RequestId id : ids) {
    auto r = p->result(id);
    ASSERT_TRUE(r) << r.error().str();
    EXPECT_EQ(r->finish, text::FinishReason::Stop) << r->text;
    EXPECT_TRUE(std::regex_match(r->text, re)) << r->text;
  }
}

TEST(Constrained, AGrammarThatCannotGoOnEndsTheRequestWithAnError) {
  GGFLOW_REQUIRE_FILE(kSmol, "SmolLM2 model");
  // U+40000 starts with byte F1, which no token of SmolLM2's byte-level vocabulary holds: after
  // "a" nothing can follow.
  auto g = grammar::parse_gbnf("root ::= \"a\" \"\\U00040000\"");
  ASSERT_TRUE(g) << g.error().str();
  auto p = paged(2);
  ASSERT_TRUE(p);
  auto id = p->add_request(kPrompt, params(0), {}, Constraint{*g});
  ASSERT_TRUE(id) << id.error().str();
  ASSERT_TRUE(p->run_until_done());
  auto r = p->result(*id);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("grammar"), std::string::npos) << r.error().str();
  // The pipeline goes on with the next request.
  auto ok = p->add_request(kPrompt, params(0), {}, schema_constraint());
  ASSERT_TRUE(ok);
  ASSERT_TRUE(p->run_until_done());
  auto r2 = p->result(*ok);
  ASSERT_TRUE(r2) << r2.error().str();
  expect_programmer(r2->text, "after the failed request");
}

}  // namespace
