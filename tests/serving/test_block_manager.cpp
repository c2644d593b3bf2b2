// Block manager and prefix cache: allocation, reference counts, free-list and LRU order, freeing,
// and the invariants (checked after every operation).
#include <gtest/gtest.h>

#include <numeric>

#include "serving/block_manager.h"

using namespace ggflow::serving;
using namespace ggflow::text;

namespace {

std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

#define EXPECT_INVARIANTS(bm)                                  \
  do {                                                         \
    auto st_ = (bm).check_invariants();                        \
    EXPECT_TRUE(st_.ok()) << (st_.ok() ? "" : st_.error().str()); \
  } while (0)

}  // namespace

TEST(BlockManager, FreshBlocksInIdOrderAndTablesCoverTokens) {
  BlockManager bm(8, true);
  EXPECT_EQ(bm.num_free(), 8);
  ASSERT_TRUE(bm.allocate(1, 33));  // 33 tokens -> 2 blocks
  EXPECT_EQ(bm.table(1), (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(bm.allocate(2, 1));
  EXPECT_EQ(bm.table(2), (std::vector<int32_t>{2}));
  ASSERT_TRUE(bm.allocate(1, 64));  // still 2 blocks
  EXPECT_EQ(bm.table(1).size(), 2u);
  ASSERT_TRUE(bm.allocate(1, 65));  // grows by one
  EXPECT_EQ(bm.table(1), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(bm.num_free(), 4);
  EXPECT_EQ(bm.ref_count(0), 1);
  EXPECT_EQ(bm.ref_count(7), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, AllocationFailureChangesNothing) {
  BlockManager bm(3, false);
  ASSERT_TRUE(bm.allocate(1, 40));
  EXPECT_EQ(bm.blocks_needed(2, 64), 2);
  EXPECT_FALSE(bm.allocate(2, 65));  // needs 3, only 1 free
  EXPECT_FALSE(bm.has(2));
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_FALSE(bm.allocate(1, 97));  // needs 2 more
  EXPECT_EQ(bm.table(1).size(), 2u);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, FreeReturnsBlocksLifo) {
  BlockManager bm(6, false);
  ASSERT_TRUE(bm.allocate(1, 96));  // 0 1 2
  ASSERT_TRUE(bm.allocate(2, 32));  // 3
  bm.free(1);                       // released back to front: 2, 1, 0 pushed; 0 is on top
  EXPECT_FALSE(bm.has(1));
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_EQ(bm.free_stack_order(), (std::vector<int32_t>{0, 1, 2, 4, 5}));
  ASSERT_TRUE(bm.allocate(3, 64));
  EXPECT_EQ(bm.table(3), (std::vector<int32_t>{0, 1}));
  EXPECT_INVARIANTS(bm);
  bm.free(2);
  bm.free(3);
  bm.free(3);  // freeing twice is a no-op
  EXPECT_EQ(bm.num_free(), 6);
  EXPECT_EQ(bm.num_sequences(), 0u);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, PrefixHitSharesFullBlocksWithRefCounts) {
  BlockManager bm(8, true);
  auto toks = iota_tokens(80);  // 2 full blocks + 16
  ASSERT_TRUE(bm.allocate(1, 80));
  bm.commit(1, toks, 80);
  EXPECT_TRUE(bm.prefix_cache().is_cached(0));
  EXPECT_TRUE(bm.prefix_cache().is_cached(1));
  EXPECT_FALSE(bm.prefix_cache().is_cached(2));  // partial: never cached

  PrefixMatch m = bm.match_prefix(toks);
  ASSERT_EQ(m.blocks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.num_tokens(), 64);
  EXPECT_EQ(bm.blocks_needed(2, 80, &m), 1);  // only the partial block is new
  ASSERT_TRUE(bm.allocate(2, 80, &m));
  EXPECT_EQ(bm.table(2), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(bm.ref_count(0), 2);
  EXPECT_EQ(bm.ref_count(1), 2);
  EXPECT_EQ(bm.ref_count(2), 1);
  EXPECT_INVARIANTS(bm);

  bm.free(1);
  EXPECT_EQ(bm.ref_count(0), 1);
  EXPECT_FALSE(bm.prefix_cache().is_evictable(0));  // still owned by 2
  EXPECT_EQ(bm.num_free(), 5);                      // block 2 back on the stack
  bm.free(2);
  // Blocks 0 and 1 are evictable, deeper block first in LRU order.
  EXPECT_EQ(bm.prefix_cache().evictable_in_lru_order(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(bm.num_free(), 8);
  EXPECT_INVARIANTS(bm);

  // A hit on evictable blocks takes them out of the free count.
  PrefixMatch m2 = bm.match_prefix(toks);
  ASSERT_EQ(m2.blocks.size(), 2u);
  EXPECT_EQ(bm.blocks_needed(3, 80, &m2), 3);  // 2 revived + 1 fresh
  ASSERT_TRUE(bm.allocate(3, 80, &m2));
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_EQ(bm.prefix_cache().num_evictable(), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, MatchLeavesOneTokenAndStopsAtFirstMiss) {
  BlockManager bm(8, true);
  auto toks = iota_tokens(96);
  ASSERT_TRUE(bm.allocate(1, 96));
  bm.commit(1, toks, 96);
  EXPECT_EQ(bm.match_prefix(toks).blocks.size(), 2u);  // 96 tokens: the last block must be computed
  auto longer = toks;
  longer.push_back(7);
  EXPECT_EQ(bm.match_prefix(longer).blocks.size(), 3u);
  auto changed = longer;
  changed[40] = 1;  // second block differs: only the first matches, and nothing after the miss
  EXPECT_EQ(bm.match_prefix(changed).blocks, (std::vector<int32_t>{0}));
  auto first_changed = longer;
  first_changed[0] = 1;  // same later blocks, different prefix: the chain hash misses everything
  EXPECT_TRUE(bm.match_prefix(first_changed).blocks.empty());
}

TEST(BlockManager, EvictionTakesFreeStackFirstThenLeastRecentlyUsed) {
  BlockManager bm(4, true);
  auto a = iota_tokens(64, 0), b = iota_tokens(64, 1000);
  ASSERT_TRUE(bm.allocate(1, 64));
  bm.commit(1, a, 64);  // blocks 0, 1 cached
  ASSERT_TRUE(bm.allocate(2, 64));
  bm.commit(2, b, 64);  // blocks 2, 3 cached
  bm.free(1);           // LRU: 1, 0
  bm.free(2);           // LRU: 1, 0, 3, 2
  EXPECT_EQ(bm.prefix_cache().evictable_in_lru_order(), (std::vector<int32_t>{1, 0, 3, 2}));
  EXPECT_EQ(bm.num_free(), 4);
  ASSERT_TRUE(bm.allocate(3, 32));  // evicts block 1 (a's second block)
  EXPECT_EQ(bm.table(3), (std::vector<int32_t>{1}));
  EXPECT_FALSE(bm.prefix_cache().is_cached(1));
  auto a1 = a;
  a1.push_back(5);
  EXPECT_EQ(bm.match_prefix(a1).blocks, (std::vector<int32_t>{0}));  // a's first block survives
  bm.free(3);  // uncached: goes to the free stack, used before any evictable block
  ASSERT_TRUE(bm.allocate(4, 32));
  EXPECT_EQ(bm.table(4), (std::vector<int32_t>{1}));
  EXPECT_EQ(bm.prefix_cache().num_evictable(), 3);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, DuplicateContentStaysUncachedAndFreesToStack) {
  BlockManager bm(4, true);
  auto t = iota_tokens(32);
  ASSERT_TRUE(bm.allocate(1, 32));
  ASSERT_TRUE(bm.allocate(2, 32));  // same content computed concurrently (no hit yet)
  bm.commit(1, t, 32);
  bm.commit(2, t, 32);
  EXPECT_TRUE(bm.prefix_cache().is_cached(0));
  EXPECT_FALSE(bm.prefix_cache().is_cached(1));
  bm.free(2);
  EXPECT_EQ(bm.free_stack_order().front(), 1);
  bm.free(1);
  EXPECT_EQ(bm.prefix_cache().evictable_in_lru_order(), (std::vector<int32_t>{0}));
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, CachingOffNeverCaches) {
  BlockManager bm(4, false);
  auto t = iota_tokens(65);
  ASSERT_TRUE(bm.allocate(1, 65));
  bm.commit(1, t, 65);
  EXPECT_EQ(bm.prefix_cache().num_cached(), 0u);
  EXPECT_TRUE(bm.match_prefix(t).blocks.empty());
  bm.free(1);
  EXPECT_EQ(bm.prefix_cache().num_evictable(), 0);
  EXPECT_EQ(bm.num_free(), 4);
  EXPECT_INVARIANTS(bm);
}

TEST(PrefixCache, LookupComparesContentNotJustHash) {
  PrefixCache pc(2, 32);
  auto t = iota_tokens(32);
  ASSERT_TRUE(pc.insert(0, 42, PrefixCache::kRootHash, t));
  EXPECT_FALSE(pc.insert(1, 42, PrefixCache::kRootHash, t));  // hash taken
  EXPECT_EQ(pc.lookup(42, PrefixCache::kRootHash, t), std::optional<int32_t>(0));
  auto other = t;
  other[3] = -5;
  EXPECT_FALSE(pc.lookup(42, PrefixCache::kRootHash, other).has_value());  // a forged collision
  EXPECT_FALSE(pc.lookup(42, 7, t).has_value());                          // another parent
  EXPECT_NE(PrefixCache::hash_block(1, t), PrefixCache::hash_block(2, t));
}

TEST(BlockManager, SizingFromMemoryBudget) {
  // smollm2-135m: 30 layers, 3 kv heads, head size 64, f32 cache.
  const int64_t per_block = BlockManager::kv_bytes_per_block(2 * 30 * 3 * 64, ggflow::gguf::GgmlType::F32);
  EXPECT_EQ(per_block, 2 * 30 * 3 * 32 * 64 * 4);
  // f16: 2 bytes a value; q8_0: a 34-byte block per 32 values (one block per head row of 64: 2)
  EXPECT_EQ(BlockManager::kv_bytes_per_block(2 * 30 * 3 * 64, ggflow::gguf::GgmlType::F16), 2 * 30 * 3 * 32 * 64 * 2);
  EXPECT_EQ(BlockManager::kv_bytes_per_block(2 * 30 * 3 * 64, ggflow::gguf::GgmlType::Q8_0), 2 * 30 * 3 * 32 * 2 * 34);
  auto n = BlockManager::blocks_for_budget(64ll << 20, per_block);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, int32_t((64ll << 20) / per_block));
  EXPECT_FALSE(BlockManager::blocks_for_budget(per_block - 1, per_block).ok());
  EXPECT_FALSE(BlockManager::blocks_for_budget(1 << 20, 0).ok());
}
