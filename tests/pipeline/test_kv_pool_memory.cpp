// A large KV pool costs nothing until it is used (issue #36): the paged pool is reserved address
// space whose pages the kernel fills on first write. A pipeline over a 1.25 GiB pool (32768 blocks
// of stories260K) runs a few requests; the process's resident set (/proc/self/statm) grows with
// the blocks the requests used, not with the pool, and the compiled model's own count of resident
// cache bytes (mincore) says the same. Under GGFLOW_KV_POISON=1 (a second ctest entry) the pool and
// every block handed out again are filled with NaN first: the requests still finish normally.
#include <gtest/gtest.h>

#include "require_file.h"

#include <unistd.h>

#include <cstdio>

#include "paged_fixture.h"
#include "serving/block_manager.h"

using namespace ggflow;
using namespace ggflow::pipeline;
using namespace ggflow::testing;

namespace {

int64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? int64_t(resident) * sysconf(_SC_PAGESIZE) : -1;
}

TEST(KvPoolMemory, ResidentMemoryFollowsTheBlocksInUseNotThePool) {
  GGFLOW_REQUIRE_FILE(kStories, cat(kStories, " not found"));
  auto file = model_file(kStories);
  ASSERT_TRUE(file.ok()) << file.error().str();
  const auto& hp = (*file)->hparams();
  const int64_t block_bytes =
      serving::BlockManager::kv_bytes_per_block(hp.kv_elems_per_token(), (*file)->kv_type());
  constexpr int32_t kPool = 32768;
  const int64_t pool_bytes = kPool * block_bytes;
  constexpr int64_t kSlack = int64_t(64) << 20;  // the compiled plan, its arena, the tokenizer
  ASSERT_GT(pool_bytes, 8 * kSlack) << "the pool must dwarf the slack, or the test proves nothing";

  const int64_t before = resident_bytes();
  ASSERT_GT(before, 0);
  serving::EngineConfig cfg;
  cfg.num_blocks = kPool;
  cfg.max_num_batched_tokens = 64;
  auto pipe = ContinuousBatchingPipeline::open(**file, cfg);
  ASSERT_TRUE(pipe.ok()) << pipe.error().str();
  std::vector<RequestId> ids;
  for (const auto& p : eight_prompts()) {
    auto id = (*pipe)->add_request(p, greedy(24));
    ASSERT_TRUE(id.ok()) << id.error().str();
    ids.push_back(*id);
  }
  int32_t peak_used = 0;
  while ((*pipe)->engine().has_unfinished()) {
    auto st = (*pipe)->step();
    ASSERT_TRUE(st.ok()) << st.error().str();
    const auto& blocks = (*pipe)->engine().blocks();
    peak_used = std::max(peak_used, blocks.num_blocks() - blocks.num_free());
  }
  for (auto id : ids) {
    auto r = (*pipe)->result(id);
    ASSERT_TRUE(r.ok()) << r.error().str();
    EXPECT_NE(r->finish, text::FinishReason::Error) << "a poisoned (never written) cache slot was read";
    EXPECT_GT(r->usage.completion_tokens, 0);
  }
  const auto mem = (*pipe)->compiled_model()->cache_memory();
  EXPECT_EQ(mem.reserved_bytes, pool_bytes);
  EXPECT_GT(mem.resident_bytes, 0);
  if (runtime::kv_poison_enabled()) return;  // poisoning writes the whole pool on purpose

  // Blocks ever written: those held at the peak, plus the prefix cache's (free but kept).
  const int64_t written = int64_t(peak_used + (*pipe)->engine().blocks().prefix_cache().num_evictable()) * block_bytes;
  const int64_t grew = resident_bytes() - before;
  EXPECT_LE(grew, written + kSlack) << "resident set grew " << grew << " bytes; blocks written " << written
                                    << " bytes, pool " << pool_bytes << " bytes";
  EXPECT_LE(mem.resident_bytes, written + kSlack) << "resident cache bytes " << mem.resident_bytes;
}

}  // namespace
