// The process-wide cache of packed weights (packed_weights.h).
#include "cpu/packed_weights.h"

#include <sys/mman.h>

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
    const int64_t groups = (r->N + kPackRows - 1) / kPackRows;
    auto pack = [&](int64_t g0, int64_t g1, int) { pack_groups(r->type, r->W, r->w_row_bytes, r->N, r->K, dst, g0, g1); };
    if (pool) pool->parallel_for(groups, 1, pack);
    else pack(0, groups, 0);
    (void)gguf::release_file_pages(r->W, static_cast<size_t>(r->N) * r->w_row_bytes);
    g_cache[key_of(*r)] = pw;
    r->packed = pw;
  }
  for (PackRequest& r : requests)  // duplicates of a weight packed above
    if (!r.packed && offset.count(key_of(r))) r.packed = g_cache[key_of(r)].lock();
}

}  // namespace ggflow::cpu
