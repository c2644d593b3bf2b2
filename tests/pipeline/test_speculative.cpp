// Speculative decoding on real models (issue #30): greedy output with each proposer is plain greedy
// decoding, token for token and logit for logit: the rows the emitted tokens were chosen from are
// compared with memcmp against the raw, SDPA and paged layouts' plain greedy runs, for requests alone
// and four in a batch, on 1 and 2 threads; seeded sampled output is plain seeded output. SmolLM2-135M (prompt lookup, and itself as the draft),
// Qwen2.5-Coder 0.5B (lookup) and 1.5B with the 0.5B as draft; a draft model of another vocabulary
// is refused with the token that differs.
#include <gtest/gtest.h>

#include "require_file.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "model_files.h"
#include "pipeline/continuous_batching.h"
#include "runtime/greedy.h"
#include "runtime/sequence_runner.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";
const std::string kQwen05 = std::string(GGFLOW_ROOT) + "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const std::string kQwen15 = std::string(GGFLOW_ROOT) + "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";

struct Run {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;  // the logits row each token was chosen from
  serving::SpecUsage spec;
};

// Code-editing prompts (the answer copies much of the prompt: lookup has something to find) and
// one open question.
const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "Add type hints to this function and reply with the whole function:\n\ndef add_all(xs):\n    total = 0\n"
      "    for x in xs:\n        total = total + x\n    return total\n",
      "Rename the variable n to count in this code:\n\nn = 0\nfor line in open('data.txt'):\n    if line.strip():\n"
      "        n += 1\nprint(n)\n",
      "Write a short poem about the sea.",
      "Repeat this list exactly: apples, pears, plums, apples, pears, plums, apples, pears, plums.",
  };
  return p;
}

Result<std::vector<int32_t>> chat_ids(const runtime::ModelFile& file, const std::string& user) {
  auto format = PromptFormat::from_file(file.file());
  if (!format) return format.error();
  auto text = (*format)->apply_chat_template(nlohmann::ordered_json::array({{{"role", "user"}, {"content", user}}}), true);
  if (!text) return text.error();
  return (*format)->encode(*text);
}

// Plain greedy decoding on one layout: the reference.
Result<Run> layout_greedy(const runtime::ModelFile& file, transforms::Layout layout, const std::vector<int32_t>& ids,
                          int n) {
  auto runner = runtime::open_sequence_runner(file, layout);
  if (!runner) return runner.error();
  std::vector<float> rows;
  auto out = runtime::generate_greedy(**runner, ids, n, &rows);
  if (!out) return out.error();
  Run r;
  r.tokens = *out;
  const size_t V = size_t(file.n_vocab());
  for (size_t i = 0; i < out->size(); ++i) r.rows.emplace_back(rows.begin() + long(i * V), rows.begin() + long((i + 1) * V));
  return r;
}

text::SamplingParams greedy_params(int n) {
  text::SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = n;
  sp.ignore_eos = true;  // exactly n tokens, as the reference
  return sp;
}

// The requests together through the continuous-batching pipeline (with speculation if `spec`).
Result<std::vector<Run>> speculative(const runtime::ModelFile& file, const SpeculativeOptions& spec,
                                     const std::vector<std::vector<int32_t>>& ids, int n, int threads,
                                     std::optional<text::SamplingParams> params = std::nullopt) {
  serving::EngineConfig cfg;
  cfg.num_blocks = 64;
  runtime::CompileOptions co;
  co.threads = threads;
  auto pipe = ContinuousBatchingPipeline::open(file, cfg, co, spec);
  if (!pipe) return pipe.error();
  std::map<serving::RequestId, std::vector<std::vector<float>>> rows;
  (*pipe)->set_logits_observer([&](serving::RequestId id, std::span<const float> row) {
    rows[id].emplace_back(row.begin(), row.end());
  });
  const text::SamplingParams sp = params ? *params : greedy_params(n);
  std::vector<serving::RequestId> req;
  for (const auto& p : ids) {
    auto id = (*pipe)->add_request_tokens(p, sp);
    if (!id) return id.error();
    req.push_back(*id);
  }
  if (auto s = (*pipe)->run_until_done(); !s) return s.error();
  std::vector<Run> out;
  for (serving::RequestId id : req) {
    auto o = (*pipe)->engine().output(id);
    if (!o) return o.error();
    out.push_back({o->tokens, rows[id], o->usage.spec});
  }
  return out;
}

bool same_rows(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) return false;
  return true;
}

// Every proposer run of `spec` equals the plain references, alone and batched, on `threads`.
void check_model(const std::string& path, const SpeculativeOptions& spec, int n, size_t num_prompts,
                 const std::vector<transforms::Layout>& layouts, const std::vector<int>& threads) {
  auto file = model_file(path);
  ASSERT_TRUE(file.ok()) << file.error().str();
  std::vector<std::vector<int32_t>> ids;
  std::vector<Run> ref;
  for (size_t i = 0; i < num_prompts; ++i) {
    auto p = chat_ids(**file, prompts()[i]);
    ASSERT_TRUE(p.ok()) << p.error().str();
    ids.push_back(*p);
    std::optional<Run> first;
    for (transforms::Layout layout : layouts) {
      auto r = layout_greedy(**file, layout, *p, n);
      ASSERT_TRUE(r.ok()) << r.error().str();
      if (!first) {
        first = *r;
        continue;
      }
      EXPECT_EQ(r->tokens, first->tokens) << transforms::to_string(layout);
      EXPECT_TRUE(same_rows(r->rows, first->rows)) << transforms::to_string(layout) << ": logits differ from the first layout's";
    }
    ref.push_back(*first);
  }
  int64_t drafts = 0, accepted = 0;
  for (int t : threads) {
    SCOPED_TRACE("threads " + std::to_string(t));
    auto batched = speculative(**file, spec, ids, n, t);  // all prompts in one batch
    ASSERT_TRUE(batched.ok()) << batched.error().str();
    auto alone = speculative(**file, spec, {ids[0]}, n, t);  // the first one alone
    ASSERT_TRUE(alone.ok()) << alone.error().str();
    batched->push_back((*alone)[0]);
    for (size_t i = 0; i < batched->size(); ++i) {
      const Run& got = (*batched)[i];
      const Run& want = ref[i < ids.size() ? i : 0];
      EXPECT_EQ(got.tokens, want.tokens) << "prompt " << i;
      EXPECT_TRUE(same_rows(got.rows, want.rows)) << "prompt " << i << ": logits differ from plain decoding";
      drafts += got.spec.draft_tokens, accepted += got.spec.accepted_tokens;
    }
  }
  // Seeded sampling: the same tokens and rows as plain seeded sampling (one draw per token).
  text::SamplingParams sampled = greedy_params(n);
  sampled.temperature = 0.8;
  sampled.seed = 7;
  auto plain = speculative(**file, SpeculativeOptions{}, ids, n, threads.back(), sampled);
  ASSERT_TRUE(plain.ok()) << plain.error().str();
  auto spec_sampled = speculative(**file, spec, ids, n, threads.back(), sampled);
  ASSERT_TRUE(spec_sampled.ok()) << spec_sampled.error().str();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ((*spec_sampled)[i].tokens, (*plain)[i].tokens) << "sampled, prompt " << i;
    EXPECT_TRUE(same_rows((*spec_sampled)[i].rows, (*plain)[i].rows)) << "sampled, prompt " << i;
    drafts += (*spec_sampled)[i].spec.draft_tokens, accepted += (*spec_sampled)[i].spec.accepted_tokens;
  }
  EXPECT_GT(accepted, 0) << "no draft was ever accepted: the test proves nothing";
  EXPECT_LT(accepted, drafts + 1);
  std::printf("%s, %s: %lld of %lld drafts accepted\n", fs::path(path).filename().c_str(),
              spec.lookup ? "lookup" : "draft model", static_cast<long long>(accepted), static_cast<long long>(drafts));
}

// Not adaptive: every step speculates (the engine's choice of k has its own tests in
// tests/serving; here every draft must be verified exactly).
SpeculativeOptions lookup(int n, int k) {
  SpeculativeOptions s;
  s.adaptive = false;
  s.lookup = n;
  s.num_spec_tokens = k;
  return s;
}

SpeculativeOptions draft(const std::string& path, int k) {
  SpeculativeOptions s;
  s.adaptive = false;
  s.draft_model = path;
  s.num_spec_tokens = k;
  return s;
}

const std::vector<transforms::Layout> kAllLayouts = {transforms::Layout::paged, transforms::Layout::sdpa,
                                                     transforms::Layout::raw};

}  // namespace

TEST(SpeculativeModels, SmolLM2LookupEqualsPlainGreedyOnEveryLayout) {
  GGFLOW_REQUIRE_FILE(kSmol, "models/smollm2-135m-instruct-q4_1.gguf (scripts/setup.sh)");
  check_model(kSmol, lookup(3, 7), 40, 4, kAllLayouts, {1, 2});
}

TEST(SpeculativeModels, SmolLM2AsItsOwnDraftEqualsPlainGreedy) {
  GGFLOW_REQUIRE_FILE(kSmol, "models/smollm2-135m-instruct-q4_1.gguf (scripts/setup.sh)");
  check_model(kSmol, draft(kSmol, 4), 32, 4, {transforms::Layout::paged}, {1, 2});
  // The draft's head cut to the first 4096 of 49152 token ids (--draft-vocab): fewer drafts
  // stand, the output is still plain decoding's.
  SpeculativeOptions cut = draft(kSmol, 4);
  cut.draft_vocab = 4096;
  check_model(kSmol, cut, 32, 2, {transforms::Layout::paged}, {2});
  // The draft's Q4_1 matrices requantized to Q4_0 (--draft-quant): another draft, the same output.
  SpeculativeOptions q4 = draft(kSmol, 4);
  q4.draft_quant = "q4_0";
  check_model(kSmol, q4, 32, 2, {transforms::Layout::paged}, {2});
}

TEST(SpeculativeModels, Qwen05BLookupEqualsPlainGreedy) {
  GGFLOW_REQUIRE_FILE(kQwen05, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (make models)");
  check_model(kQwen05, lookup(3, 7), 24, 4, {transforms::Layout::paged, transforms::Layout::sdpa}, {2});
}

TEST(SpeculativeModels, Qwen15BWithTheHalfBDraftEqualsPlainGreedy) {
  GGFLOW_REQUIRE_FILE(kQwen15, "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (make models)");
  GGFLOW_REQUIRE_FILE(kQwen05, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (make models)");
  check_model(kQwen15, draft(kQwen05, 4), 16, 2, {transforms::Layout::paged}, {2});
  // As make bench-speculative runs it: the draft's head cut, its matrices requantized to Q4_0.
  SpeculativeOptions bench = draft(kQwen05, 4);
  bench.draft_vocab = 16384;
  bench.draft_quant = "q4_0";
  check_model(kQwen15, bench, 16, 2, {transforms::Layout::paged}, {2});
}

TEST(SpeculativeModels, DraftOfAnotherVocabularyIsRefused) {
  GGFLOW_REQUIRE_FILE(kSmol, "models/smollm2-135m-instruct-q4_1.gguf (scripts/setup.sh)");
  GGFLOW_REQUIRE_FILE(kQwen05, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (make models)");
  auto file = model_file(kSmol);
  ASSERT_TRUE(file.ok());
  serving::EngineConfig cfg;
  cfg.num_blocks = 8;
  auto pipe = ContinuousBatchingPipeline::open(**file, cfg, {}, draft(kQwen05, 4));
  ASSERT_FALSE(pipe.ok());
  EXPECT_NE(pipe.error().what.find("vocabulary"), std::string::npos) << pipe.error().str();
  EXPECT_NE(pipe.error().hint.find("same family"), std::string::npos);
  // And bad options say what to change.
  SpeculativeOptions both = lookup(3, 4);
  both.draft_model = kSmol;
  auto p2 = ContinuousBatchingPipeline::open(**file, cfg, {}, both);
  ASSERT_FALSE(p2.ok());
  EXPECT_NE(p2.error().what.find("one proposer"), std::string::npos);
  SpeculativeOptions neg = draft(kSmol, 4);
  neg.draft_vocab = -1;
  auto p4 = ContinuousBatchingPipeline::open(**file, cfg, {}, neg);
  ASSERT_FALSE(p4.ok());
  EXPECT_NE(p4.error().what.find("--draft-vocab"), std::string::npos) << p4.error().str();
  SpeculativeOptions lonely = lookup(3, 4);
  lonely.draft_vocab = 4096;
  auto p5 = ContinuousBatchingPipeline::open(**file, cfg, {}, lonely);
  ASSERT_FALSE(p5.ok());
  EXPECT_NE(p5.error().what.find("needs a draft model"), std::string::npos) << p5.error().str();
  SpeculativeOptions q5 = draft(kSmol, 4);
  q5.draft_quant = "q5_1";
  auto p6 = ContinuousBatchingPipeline::open(**file, cfg, {}, q5);
  ASSERT_FALSE(p6.ok());
  EXPECT_NE(p6.error().what.find("--draft-quant q5_1"), std::string::npos) << p6.error().str();
  EXPECT_NE(p6.error().hint.find("q4_0"), std::string::npos) << p6.error().str();
  SpeculativeOptions quant_alone = lookup(3, 4);
  quant_alone.draft_quant = "q4_0";
  auto p7 = ContinuousBatchingPipeline::open(**file, cfg, {}, quant_alone);
  ASSERT_FALSE(p7.ok());
  EXPECT_NE(p7.error().what.find("needs a draft model"), std::string::npos) << p7.error().str();
  auto p3 = ContinuousBatchingPipeline::open(**file, cfg, {}, draft("/nonexistent.gguf", 4));
  ASSERT_FALSE(p3.ok());
  EXPECT_NE(p3.error().what.find("draft model"), std::string::npos) << p3.error().str();
}
