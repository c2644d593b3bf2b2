// The compile-once model interface (runtime/compiled_model.h): what each layout's signature is,
// set-up lookups with errors that name what exists, caches written in place (never copied), and
// a paged step whose cost does not depend on the size of the block pool.
#include <gtest/gtest.h>

#include "require_file.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "runtime/greedy.h"
#include "runtime/paged_runner.h"
#include "runtime/raw_runner.h"

namespace ggflow::runtime {
namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

std::shared_ptr<const ModelFile> stories() {
  static auto f = ModelFile::open(kStories);
  if (!f) ADD_FAILURE() << f.error().str();
  return f ? *f : nullptr;
}

class CompiledModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " is missing"));
    file = stories();
    ASSERT_TRUE(file);
  }
  std::shared_ptr<const ModelFile> file;
};

TEST_F(CompiledModelTest, SignatureOfEachLayout) {
  const int64_t L = file->hparams().n_layer;
  auto raw = file->layout_model(transforms::Layout::raw);
  ASSERT_TRUE(raw.ok()) << raw.error().str();
  auto sig = read_signature(*raw);
  ASSERT_TRUE(sig.ok()) << sig.error().str();
  ASSERT_EQ(static_cast<int64_t>(sig->caches.size()), 2 * L) << "cache_k_lN and cache_v_lN";
  for (const auto& c : sig->caches) {
    EXPECT_EQ(c.dynamic_axis, 2) << c.name << ": [1, 1, rows, n_embd_kv] grows along the rows";
    EXPECT_EQ(raw->results()[c.result]->name(), c.name + "_out");
  }
  EXPECT_TRUE(sig->input(*raw, "inp_tokens").ok());
  EXPECT_FALSE(sig->input(*raw, "cache_k_l0").ok()) << "a cache is not a step input";

  auto paged = file->layout_model(transforms::Layout::paged);
  ASSERT_TRUE(paged.ok()) << paged.error().str();
  sig = read_signature(*paged);
  ASSERT_TRUE(sig.ok()) << sig.error().str();
  ASSERT_EQ(static_cast<int64_t>(sig->caches.size()), 2 * L) << "key_cache.N and value_cache.N";
  for (const auto& c : sig->caches) EXPECT_EQ(c.dynamic_axis, 0) << c.name << ": [blocks, kv_heads, 32, head_size]";
  ASSERT_EQ(sig->outputs.size(), 1u);
  EXPECT_EQ(paged->results()[sig->outputs[0]]->name(), "logits");

  auto sdpa = file->layout_model(transforms::Layout::sdpa);
  ASSERT_TRUE(sdpa.ok()) << sdpa.error().str();
  sig = read_signature(*sdpa);
  ASSERT_TRUE(sig.ok()) << sig.error().str();
  EXPECT_TRUE(sig->caches.empty()) << "SDPA keeps its KV in variables";
}

TEST_F(CompiledModelTest, LookupsNameWhatExists) {
  auto m = file->layout_model(transforms::Layout::paged);
  ASSERT_TRUE(m.ok());
  auto cm = compile(std::move(*m));
  ASSERT_TRUE(cm.ok()) << cm.error().str();
  auto bad = (*cm)->input("inp_tokens");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().str().find("input_ids"), std::string::npos) << bad.error().str();
  auto out = (*cm)->output("nope");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().str().find("logits"), std::string::npos) << out.error().str();
  EXPECT_FALSE(executor_from_name("gpu").ok());
  // A step before the caches exist, or with the wrong number of inputs, is an error, not a crash.
  auto cm2 = compile(*file->layout_model(transforms::Layout::paged));
  ASSERT_TRUE(cm2.ok());
  std::vector<ir::Tensor> none;
  EXPECT_FALSE((*cm2)->run(none).ok());
}

// Every layout writes its caches in place, also while they grow (raw: 256 rows, then doubled;
// paged: 4 blocks, then 8): after a prompt and 250 decode steps no step copied a cache, and the
// two layouts still agree bit for bit.
TEST_F(CompiledModelTest, CachesAreWrittenInPlaceWhileTheyGrow) {
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 108, 260, 203, 290, 6, 11, 25, 60, 19, 21, 33, 41};
  const int n = 250;
  ASSERT_LE(static_cast<int64_t>(prompt.size()) + n, file->n_ctx_train());
  auto raw = RawRunner::create(*file);
  ASSERT_TRUE(raw.ok()) << raw.error().str();
  std::vector<float> raw_rows;
  auto g = generate_greedy(**raw, prompt, n, &raw_rows);
  ASSERT_TRUE(g.ok()) << g.error().str();
  EXPECT_GT((*raw)->compiled().cache_rows(), 256) << "the raw caches grew";
  EXPECT_EQ((*raw)->compiled().cache_copies(), 0);

  auto paged = PagedRunner::create(*file, 4);
  ASSERT_TRUE(paged.ok()) << paged.error().str();
  int seq = (*paged)->add_sequence();
  std::vector<float> paged_rows;
  auto r = (*paged)->step({{seq, prompt}});
  for (int i = 0; i < n && r.ok(); ++i) {
    paged_rows.insert(paged_rows.end(), r->row(0).begin(), r->row(0).end());
    if (i + 1 < n) r = (*paged)->step({{seq, {argmax(r->row(0))}}});
  }
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_GE((*paged)->num_blocks(), 8) << "the pool grew";
  EXPECT_EQ((*paged)->compiled().cache_copies(), 0);
  ASSERT_EQ(raw_rows.size(), paged_rows.size());
  EXPECT_EQ(std::memcmp(raw_rows.data(), paged_rows.data(), raw_rows.size() * sizeof(float)), 0);
}

// BuildOptions::logit_rows: the LM head cut to its first rows gives those rows' logits bit for bit
// (a draft model's head; the rows are a prefix of the weight's bytes, computed by the same kernel).
TEST_F(CompiledModelTest, CutHeadGivesTheFirstLogitsOfTheWholeHead) {
  const int64_t V = file->n_vocab(), R = 200;  // not a multiple of the packed kernels' 16 rows
  ASSERT_GT(V, R);
  auto cut = ModelFile::open(kStories, builder::BuildOptions{.logit_rows = R});
  ASSERT_TRUE(cut.ok()) << cut.error().str();
  EXPECT_EQ((*cut)->n_logits(), R);
  EXPECT_EQ((*cut)->n_vocab(), V);
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 108, 260, 203, 290, 6, 11, 25};
  auto whole = PagedRunner::create(*file, 4), part = PagedRunner::create(**cut, 4);
  ASSERT_TRUE(whole.ok() && part.ok());
  const int sw = (*whole)->add_sequence(), sp = (*part)->add_sequence();
  auto rw = (*whole)->step({{sw, prompt}});
  auto rp = (*part)->step({{sp, prompt}});
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(rw.ok() && rp.ok());
    ASSERT_EQ(rw->row(0).size(), size_t(V));
    ASSERT_EQ(rp->row(0).size(), size_t(R));
    EXPECT_EQ(std::memcmp(rw->row(0).data(), rp->row(0).data(), size_t(R) * sizeof(float)), 0) << "step " << i;
    const int32_t next = argmax(rw->row(0));
    rw = (*whole)->step({{sw, {next}}});
    rp = (*part)->step({{sp, {next}}});
  }
  auto all = ModelFile::open(kStories, builder::BuildOptions{.logit_rows = V + 5});  // more than there are: all
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)->n_logits(), V);
}

// A paged step costs its tokens, not the pool: the same steps with 64 and 4,096 blocks take
// about the same time. A guard against copying the caches per step (which would make the large
// pool ~64x slower), not a speed target; the best of five alternating runs is compared. It runs
// the reference executor, whose steps are long enough (~1 ms) for the ratio to stand above the
// noise of a loaded machine; the cpu executor's in-place writes are checked by cache_copies().
TEST_F(CompiledModelTest, PagedStepTimeDoesNotGrowWithThePool) {
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 108, 260, 203, 290, 6, 11, 25};
  auto time_run = [&](int32_t blocks) -> double {
    CompileOptions ref;
    ref.executor = Executor::ref;
    auto p = PagedRunner::create(*file, blocks, ref);
    EXPECT_TRUE(p.ok()) << p.error().str();
    if (!p) return 0;
    int seq = (*p)->add_sequence();
    auto t0 = std::chrono::steady_clock::now();
    auto r = (*p)->step({{seq, prompt}});
    for (int i = 0; i < 24 && r.ok(); ++i) r = (*p)->step({{seq, {argmax(r->row(0))}}});
    EXPECT_TRUE(r.ok()) << r.error().str();
    EXPECT_EQ((*p)->compiled().cache_copies(), 0);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double small = 1e9, large = 1e9;
  for (int k = 0; k < 5; ++k) {
    small = std::min(small, time_run(64));
    large = std::min(large, time_run(4096));
  }
  std::printf("paged steps: 64 blocks %.4f s, 4096 blocks %.4f s, ratio %.2f\n", small, large, large / small);
  EXPECT_LT(large / small, 1.5) << "a step with a 64x larger pool must not take longer: are the caches copied?";
}

}  // namespace
}  // namespace ggflow::runtime
