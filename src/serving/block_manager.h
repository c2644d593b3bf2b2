// Block manager: the pool of paged KV blocks and each sequence's block table.
//
// Model. The KV cache is `num_blocks` blocks of kBlockSize (32) token slots, the same for every
// layer (`key_cache.N` / `value_cache.N` are [num_blocks, kv_heads, 32, head_size]). A sequence
// owns an ordered block table; its token at position p lives in slot p % 32 of table[p / 32].
// Every block is in exactly one of three states:
//   owned      ref_count > 0: referenced by that many block tables (> 1 only for shared,
//              prefix-cached full blocks, which nobody writes into again);
//   free       ref_count == 0, not cached: on the free stack;
//   evictable  ref_count == 0, cached in the PrefixCache: free memory holding reusable K/V,
//              in LRU order.
// A fresh block comes from the free stack first (the most recently freed one; initially in id
// order 0, 1, 2, ...), and only when that is empty from the evictable LRU (least recently used
// first, dropping its cache entry). num_free() counts both. Freeing a sequence releases its table
// back to front, so a prefix's deeper blocks are evicted before its first ones.
// check_invariants() verifies all of this; the tests call it after every step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gguf/types.h"

#include "serving/prefix_cache.h"
#include "serving/sequence.h"
#include "base/result.h"

namespace ggflow::serving {

// Full cached blocks at the start of a token sequence.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;  // hash of each matched block (the chain)
  int64_t num_tokens() const;
};

class BlockManager {
 public:
  static constexpr int32_t kBlockSize = 32;

  // num_blocks >= 1 (the engine validates its config before constructing one).
  BlockManager(int32_t num_blocks, bool enable_prefix_caching);

  // Pool sizing from a memory budget: floor(budget / bytes_per_block), at least 1.
  static Result<int32_t> blocks_for_budget(int64_t budget_bytes, int64_t bytes_per_block);
  // K and V of one block over all layers with a cache: 32 * kv_elems_per_token elements of kv_type
  // (F32 4 bytes, F16 2, Q8_0 34 per 32), where kv_elems_per_token = Σ 2 * kv_heads * head_size
  // over those layers (HParams::kv_elems_per_token).
  static int64_t kv_bytes_per_block(int64_t kv_elems_per_token, gguf::GgmlType kv_type);
  static int64_t blocks_for_tokens(int64_t n) { return (n + kBlockSize - 1) / kBlockSize; }

  int32_t num_blocks() const { return int32_t(ref_.size()); }
  int32_t num_free() const { return int32_t(free_.size()) + cache_.num_evictable(); }
  bool prefix_caching() const { return caching_; }

  // The longest run of cached full blocks that `tokens` starts with, leaving at least one token
  // uncovered (the last token must be computed to get logits). Empty when caching is off.
  PrefixMatch match_prefix(std::span<const int32_t> tokens, uint64_t lora = 0) const;

  // Blocks `allocate(seq, num_tokens, match)` would take out of num_free().
  int32_t blocks_needed(RequestId seq, int64_t num_tokens, const PrefixMatch* match = nullptr) const;
  // Makes seq's table cover `num_tokens` tokens. `match` (only for a sequence that holds no blocks)
  // is attached first, sharing those blocks. Returns false and changes nothing if there are not
  // enough free blocks.
  bool allocate(RequestId seq, int64_t num_tokens, const PrefixMatch* match = nullptr);
  // Records that the first `num_computed` of `tokens` are now in cache: blocks that just became
  // full enter the prefix cache (if caching is on and their hash is not cached yet).
  void commit(RequestId seq, std::span<const int32_t> tokens, int64_t num_computed, uint64_t lora = 0);
  // Speculative decoding's rollback: seq's table shrinks to cover `num_tokens` tokens; the blocks
  // past them (written only by rejected draft tokens: never full-and-computed, so never cached or
  // shared) go back to the free stack, last first.
  void truncate(RequestId seq, int64_t num_tokens);
  // Releases seq's blocks (finish, cancel, preemption). No-op for a sequence without blocks.
  void free(RequestId seq);
  // The blocks taken from the free stack or the evictable LRU since the last call (their next owner
  // writes each slot before it reads it), in the order handed out.
  std::vector<int32_t> drain_fresh_blocks() { return std::exchange(fresh_, {}); }

  bool has(RequestId seq) const { return seqs_.count(seq) != 0; }
  const std::vector<int32_t>& table(RequestId seq) const;
  int32_t ref_count(int32_t block) const { return ref_[size_t(block)]; }
  const PrefixCache& prefix_cache() const { return cache_; }
  std::vector<int32_t> free_stack_order() const;  // next handed out first
  size_t num_sequences() const { return seqs_.size(); }

  // Every block is exactly one of owned / free / evictable, ref counts equal the number of tables
  // holding the block, no table holds a block twice, free and evictable blocks are disjoint.
  Status check_invariants() const;

 private:
  struct SeqBlocks {
    std::vector<int32_t> table;
    std::vector<uint64_t> hashes;  // hashes of the leading full, computed blocks
  };
  int32_t take_fresh_block();

  bool caching_;
  std::vector<int32_t> ref_;   // [num_blocks]
  std::vector<int32_t> free_;  // free stack; back() is handed out next
  std::vector<int32_t> fresh_;  // handed out since the last drain_fresh_blocks()
  PrefixCache cache_;
  std::unordered_map<RequestId, SeqBlocks> seqs_;
};

}  // namespace ggflow::serving
