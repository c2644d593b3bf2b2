// A decode step allocates nothing (issue "performance lead": low overhead per step). The global
// operator new of this test binary counts what the calling thread and the executor's workers
// allocate while the count is on; a paged decode step of the cpu executor, after its shapes have
// run once, must count zero: views copy no tensors, reference steps with the same small inputs
// reuse their outputs, the results are last step's views, the runner's inputs keep their buffers.
#include <gtest/gtest.h>

#include "require_file.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "runtime/compiled_model.h"
#include "runtime/model_file.h"
#include "runtime/paged_step_inputs.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ggflow::runtime {
namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

TEST(StepAllocations, PagedDecodeStepAllocatesNothing) {
  GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " is missing"));
  auto file = ModelFile::open(kStories);
  ASSERT_TRUE(file.ok()) << file.error().str();
  auto m = (*file)->layout_model(transforms::Layout::paged);
  ASSERT_TRUE(m.ok()) << m.error().str();
  auto cm = compile(std::move(*m), CompileOptions{.executor = Executor::cpu, .threads = 2, .pool = {}});
  ASSERT_TRUE(cm.ok()) << cm.error().str();
  ASSERT_TRUE((*cm)->resize_caches(8).ok());
  const int64_t seqs = 3;
  // The first step of a shape builds the tensors it then reuses.
  PagedStepInputs in(**cm);
  for (int64_t pos = 0; pos < 2; ++pos) {
    ASSERT_TRUE(in.step(seqs, pos).ok());
    auto st = (*cm)->run(in.in);
    ASSERT_TRUE(st.ok()) << st.error().str();
  }
  for (int64_t pos = 2; pos < 6; ++pos) {
    ASSERT_TRUE(in.step(seqs, pos).ok());  // new input values (positions, tokens), same shapes
    g_allocations = 0;
    g_counting = true;
    auto st = (*cm)->run(in.in);
    g_counting = false;
    ASSERT_TRUE(st.ok()) << st.error().str();
    EXPECT_EQ(g_allocations.load(), 0) << "position " << pos << ": the step allocated";
    EXPECT_GT((*cm)->fallbacks(), 0) << "the row selection's shape arithmetic runs on reference kernels (memoized)";
  }
  // A step of another shape may allocate (new buffers, new reference outputs): the counter sees it.
  ASSERT_TRUE(in.step(seqs - 1, 6).ok());
  g_allocations = 0;
  g_counting = true;
  auto st = (*cm)->run(in.in);
  g_counting = false;
  ASSERT_TRUE(st.ok()) << st.error().str();
  EXPECT_GT(g_allocations.load(), 0) << "the counter counts";
}

}  // namespace
}  // namespace ggflow::runtime
