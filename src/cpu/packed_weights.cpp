// The process-wide cache of packed weights (packed_weights.h).
#include "cpu/packed_weights.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "cpu/kernels/matmul_packed.h"
#include "gguf/bytes.h"

namespace ggflow::cpu {

struct PackedArena {
  uint8_t* data = nullptr;
  ~PackedArena() { std::free(data); }
};

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

using Key = std::tuple<const uint8_t*, int, int64_t, int64_t>;
std::mutex g_mu;
std::map<Key, std::weak_ptr<const PackedWeight>> g_cache;

Key key_of(const PackRequest& r) { return {r.W, static_cast<int>(r.type), r.N, r.K}; }
}  // namespace

bool repack_enabled() {
  const char* e = std::getenv("GGFLOW_REPACK");
  return !(e && std::strcmp(e, "0") == 0);
}

void pack_weights(Isa isa, std::span<PackRequest> requests, ThreadPool* pool) {
  if (!repack_enabled()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  std::erase_if(g_cache, [](const auto& kv) { return kv.second.expired(); });
  // Shared copies first; the rest get offsets in one arena (a weight used twice is packed once).
  std::map<Key, size_t> offset;
  std::vector<PackRequest*> fresh;
  size_t total = 0;
  for (PackRequest& r : requests) {
    r.packed = nullptr;
    const size_t bytes = packed_supports(isa, r.type) ? packed_bytes(r.type, r.N, r.K) : 0;
    if (bytes == 0) continue;
    if (auto it = g_cache.find(key_of(r)); it != g_cache.end())
      if ((r.packed = it->second.lock())) continue;
    if (offset.emplace(key_of(r), total).second) {
      fresh.push_back(&r);
      total += (bytes + 63) / 64 * 64;
    }
  }
  if (total == 0) return;
  auto arena = std::make_shared<PackedArena>();
  const size_t alloc = (total + kHugePage - 1) / kHugePage * kHugePage;
  arena->data = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, alloc));
  if (!arena->data) return;  // memory is short: the GGUF layout (same bits)
  (void)::madvise(arena->data, alloc, MADV_HUGEPAGE);
  for (PackRequest* r : fresh) {
    auto pw = std::make_shared<PackedWeight>();
    pw->type = r->type;
    pw->N = r->N;
    pw->K = r->K;
    pw->bytes = packed_bytes(r->type, r->N, r->K);
    pw->arena = arena;
    uint8_t* dst = arena->data + offset.at(key_of(*r));
    pw->data = dst;
    // In slices of about 8 MiB, each slice's file pages released once packed: a large weight (a
    // 170 MB tied embedding) is never resident twice.
    const int64_t groups = (r->N + kPackRows - 1) / kPackRows;
    const size_t group_src = static_cast<size_t>(kPackRows) * r->w_row_bytes;
    const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((size_t{8} << 20) / std::max<size_t>(1, group_src)));
    for (int64_t s0 = 0; s0 < groups; s0 += slice) {
      const int64_t s1 = std::min(groups, s0 + slice);
      auto pack = [&](int64_t g0, int64_t g1, int) {
        pack_groups(r->type, r->W, r->w_row_bytes, r->N, r->K, dst, s0 + g0, s0 + g1);
      };
      if (pool) pool->parallel_for(s1 - s0, 1, pack);
      else pack(0, s1 - s0, 0);
      const int64_t row0 = s0 * kPackRows, row1 = std::min(r->N, s1 * kPackRows);
      (void)gguf::release_file_pages(r->W + row0 * r->w_row_bytes, static_cast<size_t>(row1 - row0) * r->w_row_bytes);
    }
    g_cache[key_of(*r)] = pw;
    r->packed = pw;
  }
  for (PackRequest& r : requests)  // duplicates of a weight packed above
    if (!r.packed && offset.count(key_of(r))) r.packed = g_cache[key_of(r)].lock();
}

}  // namespace ggflow::cpu
