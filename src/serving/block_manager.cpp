// Block manager (see block_manager.h for the model and its invariants).
#include "serving/block_manager.h"

#include <algorithm>
#include <string>

namespace ggflow::serving {

int64_t PrefixMatch::num_tokens() const { return int64_t(blocks.size()) * BlockManager::kBlockSize; }

BlockManager::BlockManager(int32_t num_blocks, bool enable_prefix_caching)
    : caching_(enable_prefix_caching), ref_(size_t(num_blocks), 0), cache_(num_blocks, kBlockSize) {
  GGFLOW_CHECK(num_blocks >= 1, "the pool needs at least one block");
  free_.reserve(size_t(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

Result<int32_t> BlockManager::blocks_for_budget(int64_t budget_bytes, int64_t bytes_per_block) {
  if (bytes_per_block <= 0)
    return make_error("KV bytes per block = " + std::to_string(bytes_per_block) + " must be > 0",
                      "use BlockManager::kv_bytes_per_block(kv_elems_per_token, kv_type)");
  const int64_t n = budget_bytes / bytes_per_block;
  if (n < 1)
    return make_error("KV cache budget of " + std::to_string(budget_bytes) + " bytes holds no block of " +
                          std::to_string(bytes_per_block) + " bytes",
                      "raise the KV cache budget");
  if (n > INT32_MAX) return make_error("KV cache budget gives more than 2^31 blocks", "lower the budget");
  return int32_t(n);
}

int64_t BlockManager::kv_bytes_per_block(int64_t kv_elems_per_token, gguf::GgmlType kv_type) {
  return int64_t(gguf::row_bytes(kv_type, uint64_t(kBlockSize * kv_elems_per_token)));
}

PrefixMatch BlockManager::match_prefix(std::span<const int32_t> tokens, uint64_t lora) const {
  PrefixMatch m;
  if (!caching_ || tokens.empty()) return m;
  const size_t max_blocks = (tokens.size() - 1) / kBlockSize;  // keep >= 1 token to compute
  uint64_t parent = PrefixCache::root_hash(lora);
  for (size_t i = 0; i < max_blocks; ++i) {
    auto blk = tokens.subspan(i * kBlockSize, kBlockSize);
    const uint64_t h = PrefixCache::hash_block(parent, blk);
    auto b = cache_.lookup(h, parent, blk);
    if (!b) break;
    m.blocks.push_back(*b);
    m.hashes.push_back(h);
    parent = h;
  }
  return m;
}

int32_t BlockManager::blocks_needed(RequestId seq, int64_t num_tokens, const PrefixMatch* match) const {
  auto it = seqs_.find(seq);
  int64_t have = it == seqs_.end() ? 0 : int64_t(it->second.table.size());
  int64_t revived = 0;  // matched blocks that leave the evictable list
  if (match) {
    have += int64_t(match->blocks.size());
    for (int32_t b : match->blocks) revived += ref_[size_t(b)] == 0 ? 1 : 0;
  }
  return int32_t(std::max<int64_t>(0, blocks_for_tokens(num_tokens) - have) + revived);
}

int32_t BlockManager::take_fresh_block() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    auto e = cache_.evict_lru();  // drops its cache entry: its K/V will be overwritten
    GGFLOW_CHECK(e.has_value(), "take_fresh_block called with no free block");
    b = *e;
  }
  // Invariant: a block leaves the free stack / LRU only here, exactly when it gets its first owner.
  GGFLOW_CHECK(ref_[size_t(b)] == 0, "a free block has no owner");
  ref_[size_t(b)] = 1;
  fresh_.push_back(b);
  return b;
}

bool BlockManager::allocate(RequestId seq, int64_t num_tokens, const PrefixMatch* match) {
  if (blocks_needed(seq, num_tokens, match) > num_free()) return false;
  SeqBlocks& s = seqs_[seq];
  if (match && !match->blocks.empty()) {
    GGFLOW_CHECK(s.table.empty(), "a prefix match is attached to a sequence without blocks");
    // Invariant: ref_count == number of tables holding the block; shared blocks are full and cached,
    // so no sequence ever writes into a block another sequence reads.
    for (int32_t b : match->blocks) {
      if (ref_[size_t(b)] == 0) cache_.remove_evictable(b);  // evictable -> owned
      ++ref_[size_t(b)];
      s.table.push_back(b);
    }
    s.hashes = match->hashes;
  }
  // Fresh blocks only after the hits are owned, so eviction cannot take a block just matched.
  while (int64_t(s.table.size()) < blocks_for_tokens(num_tokens)) s.table.push_back(take_fresh_block());
  return true;
}

void BlockManager::commit(RequestId seq, std::span<const int32_t> tokens, int64_t num_computed, uint64_t lora) {
  if (!caching_) return;
  auto it = seqs_.find(seq);
  GGFLOW_CHECK(it != seqs_.end(), "commit for a sequence without blocks");
  SeqBlocks& s = it->second;
  GGFLOW_CHECK(num_computed <= int64_t(s.table.size()) * kBlockSize, "computed tokens beyond the table");
  for (size_t i = s.hashes.size(); int64_t(i + 1) * kBlockSize <= num_computed; ++i) {
    const uint64_t parent = i == 0 ? PrefixCache::root_hash(lora) : s.hashes[i - 1];
    auto blk = tokens.subspan(i * kBlockSize, kBlockSize);
    const uint64_t h = PrefixCache::hash_block(parent, blk);
    s.hashes.push_back(h);
    const int32_t b = s.table[i];
    if (cache_.is_cached(b)) {
      GGFLOW_CHECK(cache_.hash_of(b) == h, "a shared block is cached under its own content");
      continue;
    }
    cache_.insert(b, h, parent, blk);  // false: the same content is cached in another block already
  }
}

void BlockManager::truncate(RequestId seq, int64_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqBlocks& s = it->second;
  const auto keep = size_t(blocks_for_tokens(num_tokens));
  GGFLOW_CHECK(s.hashes.size() <= keep, "truncating below the computed, cached blocks");
  while (s.table.size() > keep) {
    const int32_t b = s.table.back();
    // Invariant: a block past the computed tokens has one owner and no cache entry.
    GGFLOW_CHECK(ref_[size_t(b)] == 1 && !cache_.is_cached(b), "a truncated block is shared or cached");
    ref_[size_t(b)] = 0;
    free_.push_back(b);
    s.table.pop_back();
  }
}

void BlockManager::free(RequestId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& t = it->second.table;
  for (auto b = t.rbegin(); b != t.rend(); ++b) {  // back to front: deeper prefix blocks evicted first
    GGFLOW_CHECK(ref_[size_t(*b)] > 0, "freeing a block that has no owner");
    if (--ref_[size_t(*b)] > 0) continue;          // still shared by another sequence
    // Invariant: a block whose last owner leaves is free XOR evictable, never both, never lost.
    if (cache_.is_cached(*b)) cache_.push_evictable(*b); else free_.push_back(*b);
  }
  seqs_.erase(it);
}

const std::vector<int32_t>& BlockManager::table(RequestId seq) const {
  static const std::vector<int32_t> empty;
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? empty : it->second.table;
}

std::vector<int32_t> BlockManager::free_stack_order() const { return {free_.rbegin(), free_.rend()}; }

Status BlockManager::check_invariants() const {
  auto fail = [](std::string what) { return make_error("block manager invariant violated: " + what, "this is a bug"); };
  const size_t n = ref_.size();
  std::vector<int32_t> owners(n, 0), on_free(n, 0);
  for (const auto& [id, s] : seqs_) {
    std::vector<int32_t> sorted = s.table;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return fail("sequence " + std::to_string(id) + " holds a block twice");
    if (s.hashes.size() > s.table.size()) return fail("more block hashes than blocks");
    for (int32_t b : s.table) {
      if (b < 0 || size_t(b) >= n) return fail("block id " + std::to_string(b) + " out of range");
      ++owners[size_t(b)];
    }
  }
  for (int32_t b : free_) {
    if (b < 0 || size_t(b) >= n) return fail("free block id out of range");
    if (on_free[size_t(b)]++) return fail("block " + std::to_string(b) + " is on the free stack twice");
  }
  int32_t owned = 0;
  for (size_t b = 0; b < n; ++b) {
    const std::string bs = "block " + std::to_string(b);
    const bool evictable = cache_.is_evictable(int32_t(b)), cached = cache_.is_cached(int32_t(b));
    if (ref_[b] != owners[b])
      return fail(bs + " has ref_count " + std::to_string(ref_[b]) + " but " + std::to_string(owners[b]) + " tables");
    if (ref_[b] > 0) {
      ++owned;
      if (on_free[b] || evictable) return fail(bs + " is both owned and free");
      if (ref_[b] > 1 && !cached) return fail(bs + " is shared but not a cached full block");
    } else if (on_free[b] == evictable) {
      return fail(bs + (evictable ? " is both free and evictable" : " is neither owned nor free (leaked)"));
    }
    if (on_free[b] && cached) return fail(bs + " is on the free stack but still cached");
    if (evictable && !cached) return fail(bs + " is evictable but not cached");
  }
  if (owned + num_free() != int32_t(n)) return fail("owned + free != num_blocks");
  if (!caching_ && cache_.num_cached() != 0) return fail("blocks cached while prefix caching is off");
  return {};
}

}  // namespace ggflow::serving
