// The CPU executor's invariance contract on whole models: the same logits, bit for bit (memcmp),
// whatever the instruction set (scalar twin, AVX2, AVX-512: every one this CPU has), the thread
// count (1, 2, 3), the layout (raw, SDPA, paged), the weight layout (packed at load where the
// ISA has packed kernels, or GGUF's with GGFLOW_REPACK=0) and the plan fusions (matmul groups,
// GLU steps; off with GGFLOW_PLAN_FUSION=0). A prompt of 40 tokens (two KV blocks) is
// prefilled, then 3 greedy tokens are decoded; every logits row is compared with the first
// configuration's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "cpu/isa.h"
#include "require_file.h"
#include "runtime/greedy.h"
#include "runtime/sequence_runner.h"

namespace ggflow::runtime {
namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";
const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";
const std::string kGemma = std::string(GGFLOW_ROOT) + "/models/gemma3-270m-q4_k_m.gguf";

struct Config {
  cpu::Isa isa;
  int threads;
  transforms::Layout layout;
  bool repack = true;
  std::string name() const {
    return std::string(cpu::to_string(isa)) + "/" + std::to_string(threads) + "t/" + transforms::to_string(layout) +
           (repack ? "" : "/gguf-weights-unfused");
  }
};

Result<std::vector<float>> rows(const ModelFile& f, const Config& c, const std::vector<int32_t>& prompt) {
  ::setenv("GGFLOW_ISA", std::string(cpu::to_string(c.isa)).c_str(), 1);  // read when the plan is compiled
  if (!c.repack) ::setenv("GGFLOW_REPACK", "0", 1);
  if (!c.repack) ::setenv("GGFLOW_PLAN_FUSION", "0", 1);
  RunnerOptions o;
  o.compile.threads = c.threads;
  auto r = open_sequence_runner(f, c.layout, o);
  ::unsetenv("GGFLOW_ISA");
  ::unsetenv("GGFLOW_REPACK");
  ::unsetenv("GGFLOW_PLAN_FUSION");
  if (!r) return r.error();
  std::vector<float> out;
  auto g = generate_greedy(**r, prompt, 4, &out);
  if (!g) return g.error();
  return out;
}

void check(const std::string& path) {
  GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (run scripts/setup.sh)"));
  auto f = ModelFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().str();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(static_cast<int32_t>(1 + (i * 37 + 11) % std::min<int64_t>((*f)->n_vocab() - 1, 400)));
  std::vector<Config> configs;
  for (cpu::Isa isa : cpu::supported_isas())
    for (int t : {1, 2, 3})
      if (isa != cpu::Isa::scalar || t == 1) configs.push_back({isa, t, transforms::Layout::paged});  // the twin is slow: once
  configs.push_back({cpu::best_isa(), 2, transforms::Layout::sdpa});
  configs.push_back({cpu::best_isa(), 2, transforms::Layout::raw});
  configs.push_back({cpu::best_isa(), 2, transforms::Layout::paged, false});
  std::vector<float> ref;
  for (const Config& c : configs) {
    auto got = rows(**f, c, prompt);
    ASSERT_TRUE(got.ok()) << c.name() << ": " << got.error().str();
    if (ref.empty()) {
      ref = *got;
      continue;
    }
    ASSERT_EQ(got->size(), ref.size()) << c.name();
    EXPECT_EQ(std::memcmp(got->data(), ref.data(), ref.size() * sizeof(float)), 0)
        << c.name() << " differs from " << configs[0].name();
  }
  std::printf("%s: %zu configurations give the same %zu logits bit for bit\n", path.c_str(), configs.size(), ref.size());
}

TEST(ExecutorInvariance, Stories260K) { check(kStories); }
TEST(ExecutorInvariance, SmolLM2) { check(kSmol); }
TEST(ExecutorInvariance, Gemma3) { check(kGemma); }

}  // namespace
}  // namespace ggflow::runtime
