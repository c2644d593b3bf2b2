// Prefix cache (see prefix_cache.h for the model).
#include "serving/prefix_cache.h"

#include <algorithm>

#define XXH_INLINE_ALL  // header-only xxHash (Debian libxxhash-dev): no link dependency
#include <xxhash.h>

namespace ggflow::serving {

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      hash_(size_t(num_blocks), 0),
      parent_(size_t(num_blocks), 0),
      tokens_(size_t(num_blocks) * size_t(block_size), 0),
      cached_(size_t(num_blocks), false),
      in_lru_(size_t(num_blocks), false),
      prev_(size_t(num_blocks), -1),
      next_(size_t(num_blocks), -1) {}

uint64_t PrefixCache::root_hash(uint64_t lora) {
  return lora == 0 ? kRootHash : XXH3_64bits_withSeed(&lora, sizeof lora, kRootHash);
}

uint64_t PrefixCache::hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

std::optional<int32_t> PrefixCache::lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const {
  auto it = map_.find(hash);
  if (it == map_.end()) return std::nullopt;
  const int32_t b = it->second;
  const int32_t* stored = tokens_.data() + size_t(b) * size_t(block_size_);
  // A 64-bit collision must not hand out another prefix's K/V: compare what the hash stands for.
  if (parent_[size_t(b)] != parent || !std::equal(tokens.begin(), tokens.end(), stored)) return std::nullopt;
  return b;
}

bool PrefixCache::insert(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  GGFLOW_CHECK(int64_t(tokens.size()) == block_size_, "only full blocks are cached");
  GGFLOW_CHECK(!cached_[size_t(block)], "a block is cached under one hash at a time");
  if (!map_.emplace(hash, block).second) return false;
  cached_[size_t(block)] = true;
  hash_[size_t(block)] = hash;
  parent_[size_t(block)] = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + ptrdiff_t(size_t(block) * size_t(block_size_)));
  return true;
}

void PrefixCache::push_evictable(int32_t b) {
  GGFLOW_CHECK(cached_[size_t(b)] && !in_lru_[size_t(b)], "only cached, unlisted blocks become evictable");
  in_lru_[size_t(b)] = true;
  prev_[size_t(b)] = tail_;
  next_[size_t(b)] = -1;
  if (tail_ >= 0) next_[size_t(tail_)] = b; else head_ = b;
  tail_ = b;
  ++lru_size_;
}

void PrefixCache::remove_evictable(int32_t b) {
  GGFLOW_CHECK(in_lru_[size_t(b)], "block is not in the LRU list");
  const int32_t p = prev_[size_t(b)], n = next_[size_t(b)];
  if (p >= 0) next_[size_t(p)] = n; else head_ = n;
  if (n >= 0) prev_[size_t(n)] = p; else tail_ = p;
  prev_[size_t(b)] = next_[size_t(b)] = -1;
  in_lru_[size_t(b)] = false;
  --lru_size_;
}

std::optional<int32_t> PrefixCache::evict_lru() {
  if (head_ < 0) return std::nullopt;
  const int32_t b = head_;
  remove_evictable(b);
  map_.erase(hash_[size_t(b)]);
  cached_[size_t(b)] = false;
  return b;
}

std::vector<int32_t> PrefixCache::evictable_in_lru_order() const {
  std::vector<int32_t> out;
  for (int32_t b = head_; b >= 0; b = next_[size_t(b)]) out.push_back(b);
  return out;
}

}  // namespace ggflow::serving
