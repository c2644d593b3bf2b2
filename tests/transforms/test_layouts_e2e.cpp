// The test 8: real models, the same prompt in the raw, SDPA and PagedAttention layouts,
// logits identical bit for bit (memcmp): a prefill of >= 20 tokens then 16 greedy decode steps;
// in the PA layout also three sequences of different lengths in one call, and a prompt
// prefilled in chunks of 7. Plus: translate_get_rows is unchanged for the raw consumer.
#include <gtest/gtest.h>

#include "require_file.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "runtime/logits_dump.h"
#include "transforms/layout_checks.h"

namespace ggflow::transforms {
namespace {

using runtime::generate_greedy;
using runtime::PagedRunner;
using runtime::read_logits_dump;
using runtime::write_logits_dump;

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";
const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";
const std::string kGemma = std::string(GGFLOW_ROOT) + "/models/gemma3-270m-q4_k_m.gguf";


using namespace layout_checks;  // single_sequence, paged_batched_and_chunked, open_engine, ...

TEST(LayoutsE2E, Stories260KSingleSequence) { single_sequence(kStories, 24); }
TEST(LayoutsE2E, Stories260KPagedBatchedAndChunked) { paged_batched_and_chunked(kStories, 24, 4); }
TEST(LayoutsE2E, SmolLM2SingleSequence) { single_sequence(kSmol, 20); }
TEST(LayoutsE2E, SmolLM2PagedBatchedAndChunked) { paged_batched_and_chunked(kSmol, 20, 2); }
TEST(LayoutsE2E, Gemma3SingleSequence) { single_sequence(kGemma, 20); }
TEST(LayoutsE2E, Gemma3PagedBatchedAndChunked) { paged_batched_and_chunked(kGemma, 20, 2); }

// reset() forgets the sequence: the same prompt again gives the same bits; the dump round-trips.
TEST(LayoutsE2E, Stories260KResetAndDump) {
  GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " is missing (run scripts/setup.sh)"));
  for (Layout l : {Layout::raw, Layout::sdpa, Layout::paged}) {
    auto e = open_engine(kStories, l);
    ASSERT_TRUE(static_cast<bool>(e)) << e.error().str();
    auto p = prompt(21, 5, (*e)->n_vocab());
    std::vector<float> a, b;
    ASSERT_TRUE(static_cast<bool>(generate_greedy(**e, p, 4, &a)));
    EXPECT_EQ((*e)->n_past(), 21 + 3);
    (*e)->reset();
    EXPECT_EQ((*e)->n_past(), 0);
    ASSERT_TRUE(static_cast<bool>(generate_greedy(**e, p, 4, &b)));
    EXPECT_TRUE(same_bits(a, b)) << to_string(l);
    const std::string path = ::testing::TempDir() + "/logits_" + to_string(l) + ".bin";
    ASSERT_TRUE(write_logits_dump(path, a).ok());
    auto back = read_logits_dump(path);
    ASSERT_TRUE(static_cast<bool>(back));
    EXPECT_TRUE(same_bits(*back, a));
    EXPECT_EQ(static_cast<int64_t>(back->size()), 4 * (*e)->n_vocab()) << "[n, n_vocab] f32, no header";
  }
}

// Gemma 3: the sliding window travels per layer (mask rt_info -> PagedAttention input 11): 512
// on the sliding-window layers, 0 on every 6th (global) layer.
TEST(LayoutsE2E, Gemma3SlidingWindowPerLayer) {
  GGFLOW_REQUIRE_FILE(kGemma, ::ggflow::testing::cat(kGemma, " is missing (run scripts/setup.sh)"));
  auto file = runtime::ModelFile::open(kGemma);
  ASSERT_TRUE(static_cast<bool>(file)) << file.error().str();
  auto m = (*file)->layout_model(Layout::paged);
  ASSERT_TRUE(static_cast<bool>(m)) << m.error().str();
  auto order = m->ordered();
  ASSERT_TRUE(static_cast<bool>(order));
  std::vector<int64_t> windows;
  for (const auto& n : *order)
    if (n->type() == ir::OpType::PagedAttention) windows.push_back(n->input(11).node->attrs<ir::ConstantAttrs>().value.to_i64()[0]);
  ASSERT_EQ(windows.size(), 18u);
  for (size_t il = 0; il < windows.size(); ++il) EXPECT_EQ(windows[il], (il + 1) % 6 == 0 ? 0 : 512) << "layer " << il;
}

// translate_get_rows is not changed: the raw graph keeps Unsqueeze(axis 0) and the raw runner's
// embedding is [1,1,T,E]; the adapted copy has axis 1.
TEST(LayoutsE2E, RawConsumerKeepsOriginalGetRowsLayout) {
  GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " is missing (run scripts/setup.sh)"));
  auto file = runtime::ModelFile::open(kStories);
  ASSERT_TRUE(static_cast<bool>(file)) << file.error().str();
  auto r = runtime::RawRunner::create(**file);
  ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
  const ir::Model& raw = (*r)->compiled().model();
  auto embd_unsqueeze = [](const ir::Model& m) -> ir::NodePtr {
    auto order = m.ordered();
    for (const auto& n : *order)
      if (n->type() == ir::OpType::Unsqueeze && n->input(0).node->type() == ir::OpType::Gather) {
        ir::NodePtr idx = n->input(0).node->input(1).node;
        if (idx->type() == ir::OpType::Squeeze) idx = idx->input(0).node;
        if (idx->name() == "inp_tokens") return n;
      }
    return nullptr;
  };
  ir::NodePtr u = embd_unsqueeze(raw);
  ASSERT_TRUE(u) << "the raw graph has the GET_ROWS Unsqueeze of inp_tokens";
  EXPECT_EQ(u->attrs<ir::AxesAttrs>().axes, std::vector<int64_t>{0});
  auto copy = raw.clone();
  ASSERT_TRUE(static_cast<bool>(copy));
  ASSERT_TRUE(to_layout(*copy, Layout::sdpa, {}).ok());
  EXPECT_EQ(embd_unsqueeze(raw)->attrs<ir::AxesAttrs>().axes, std::vector<int64_t>{0}) << "the raw model is untouched";
  ir::NodePtr fixed = copy->find(u->name());
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->attrs<ir::AxesAttrs>().axes, std::vector<int64_t>{1});
  // the raw runner still computes (its embedding [1,1,T,E] feeds everything)
  auto l = (*r)->step(std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(static_cast<bool>(l)) << l.error().str();
  EXPECT_EQ(static_cast<int64_t>(l->size()), (*r)->hparams().n_vocab);
}

}  // namespace
}  // namespace ggflow::transforms
