// Prefix cache: full KV blocks found again by content.
//
// Model. A block that holds 32 computed tokens of some sequence is identified by
//   hash_i = XXH3_64(tokens of block i, seed = hash_{i-1}),   hash_{-1} = kRootHash,
// so a hash names the whole prefix up to and including that block. The cache maps hash -> block
// id (one block per hash; a second block with the same content stays uncached) and keeps each cached
// block's 32 tokens and parent hash, which a lookup compares, so a 64-bit collision can never
// hand out wrong K/V. Only full blocks are ever cached, so a hit never shares a block that
// someone is still writing into.
//
// Cached blocks whose reference count is 0 are "evictable": they are free memory that still holds
// valid K/V. They sit in an LRU list (front = least recently used = evicted first). The block manager
// moves blocks in and out of that list; this class never looks at reference counts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/check.h"  // GGFLOW_CHECK: KV bookkeeping invariants; bad requests never reach them

namespace ggflow::serving {

class PrefixCache {
 public:
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

  PrefixCache(int32_t num_blocks, int32_t block_size);

  // The parent hash of a sequence's first block: kRootHash, or for a sequence computed with LoRA
  // adapters (their mask, runtime/lora_inputs.h) a root of its own, so that K/V computed under
  // one adapter set is never found for another.
  static uint64_t root_hash(uint64_t lora);
  // hash of a full block given its parent's hash; `tokens` has exactly block_size entries.
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

  // The cached block with this hash, parent and content, if any.
  std::optional<int32_t> lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
  // Caches `block` under `hash`. False (and nothing changes) if the hash is already cached.
  bool insert(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  bool is_cached(int32_t block) const { return cached_[size_t(block)]; }
  uint64_t hash_of(int32_t block) const { return hash_[size_t(block)]; }
  size_t num_cached() const { return map_.size(); }

  // LRU of evictable blocks (cached, reference count 0).
  void push_evictable(int32_t block);    // becomes the most recently used
  void remove_evictable(int32_t block);  // a hit took it back into use
  bool is_evictable(int32_t block) const { return in_lru_[size_t(block)]; }
  int32_t num_evictable() const { return lru_size_; }
  // Removes the least recently used evictable block from the LRU and from the cache; returns it.
  std::optional<int32_t> evict_lru();
  std::vector<int32_t> evictable_in_lru_order() const;  // front (next to evict) first; for tests

 private:
  int32_t block_size_;
  std::unordered_map<uint64_t, int32_t> map_;  // hash -> block
  std::vector<uint64_t> hash_, parent_;        // [num_blocks]
  std::vector<int32_t> tokens_;                // i32 [num_blocks * block_size]
  std::vector<bool> cached_, in_lru_;          // [num_blocks]
  std::vector<int32_t> prev_, next_;           // intrusive doubly linked LRU, -1 = none
  int32_t head_ = -1, tail_ = -1, lru_size_ = 0;
};

}  // namespace ggflow::serving
