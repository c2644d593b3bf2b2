// The process-wide cache of packed weights (packed_weights.h).
#include "cpu/packed_weights.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "cpu/kernels/matmul_packed.h"
#include "gguf/bytes.h"

namespace ggflow::cpu {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

using Key = std::tuple<const uint8_t*, int, int64_t, int64_t>;
std::mutex g_mu;
std::map<Key, std::weak_ptr<const PackedWeight>> g_cache;
}  // namespace

PackedWeight::~PackedWeight() { std::free(data); }

bool repack_enabled() {
  const char* e = std::getenv("GGFLOW_REPACK");
  return !(e && std::strcmp(e, "0") == 0);
}

std::shared_ptr<const PackedWeight> packed_weight(Isa isa, gguf::GgmlType type, const uint8_t* W, size_t wrb,
                                                  int64_t N, int64_t K, ThreadPool* pool) {
  if (!repack_enabled() || !packed_supports(isa, type)) return nullptr;
  const size_t bytes = packed_bytes(type, N, K);
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  const Key key{W, static_cast<int>(type), N, K};
  if (auto it = g_cache.find(key); it != g_cache.end())
    if (auto p = it->second.lock()) return p;
  auto pw = std::make_shared<PackedWeight>();
  pw->type = type;
  pw->N = N;
  pw->K = K;
  pw->bytes = bytes;
  const size_t align = bytes >= kHugePage ? kHugePage : 64;
  pw->data = static_cast<uint8_t*>(std::aligned_alloc(align, (bytes + align - 1) / align * align));
  if (!pw->data) return nullptr;
  if (align == kHugePage) (void)::madvise(pw->data, (bytes + align - 1) / align * align, MADV_HUGEPAGE);
  const int64_t groups = (N + kPackRows - 1) / kPackRows;
  uint8_t* dst = pw->data;
  auto pack = [&](int64_t g0, int64_t g1, int) { pack_groups(type, W, wrb, N, K, dst, g0, g1); };
  if (pool) pool->parallel_for(groups, 1, pack);
  else pack(0, groups, 0);
  (void)gguf::release_file_pages(W, static_cast<size_t>(N) * wrb);
  std::erase_if(g_cache, [](const auto& kv) { return kv.second.expired(); });
  g_cache[key] = pw;
  return pw;
}

}  // namespace ggflow::cpu
