// Decode attention over the paged KV cache (cpu/kernels/attention.h), one thread: a benchmark,
// not a test. Run:
//   ./build/bench/attention_kernel [qwen]
// Each line: B sequences decoding one token each (SmolLM2's heads: 9 query heads over 3 kv heads
// of 64; Qwen2.5 1.5B's: 12 over 2 of 128) at a context of L keys, the cache f32, f16 or q8_0;
// "hot" runs one layer's cache again and
// again (cache-resident when small), "cold" rotates over the caches of as many layers as make
// > 160 MiB (from DRAM, as in a decode step after the weights streamed through the caches).
// us per layer call, and GB/s of K/V read.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <new>
#include <vector>

#include <sys/mman.h>

#include "cpu/isa.h"
#include "cpu/kernels/attention.h"
#include "cpu/kernels/convert.h"
#include "gguf/dequant.h"

namespace ggflow::cpu {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void must(const Status& s) {
  if (!s) {
    std::fprintf(stderr, "attention_kernel: %s\n", s.error().what.c_str());
    std::exit(1);
  }
}

enum class Elem { f32, f16, q8_0 };
const char* name(Elem e) { return e == Elem::f32 ? "f32" : e == Elem::f16 ? "f16" : "q8_0"; }
int64_t bytes_of(Elem e, int64_t n) { return e == Elem::f32 ? 4 * n : e == Elem::f16 ? 2 * n : n / 32 * 34; }
struct Heads {
  const char* model;
  int64_t hk, hq, s;
};

// The caches' memory: 2 MiB-aligned and advised for transparent huge pages, so that "cold" measures
// DRAM, not page walks. The runtime's KV pool (ir::Tensor::reserve) is not advised: where THP is
// "madvise" it has 4 KiB pages, what GGFLOW_BENCH_SMALL_PAGES=1 measures.
template <class T>
struct HugeAlloc {
  using value_type = T;
  HugeAlloc() = default;
  template <class U>
  HugeAlloc(const HugeAlloc<U>&) {}
  T* allocate(size_t n) {
    const size_t huge = size_t{2} << 20, bytes = (n * sizeof(T) + huge - 1) / huge * huge;
    void* p = std::aligned_alloc(huge, bytes);
    if (!p) throw std::bad_alloc();
    if (!std::getenv("GGFLOW_BENCH_SMALL_PAGES")) (void)::madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  bool operator==(const HugeAlloc&) const { return true; }
};
template <class T>
using Vec = std::vector<T, HugeAlloc<T>>;

// One layer's cache for B sequences of L keys each.
struct Layer {
  Vec<float> k, v;
  Vec<uint16_t> k16, v16;
  Vec<uint8_t> k8, v8;
  KvCache cache(Elem e, const Heads& h, int64_t floats) {
    KvCache c;
    c.num_blocks = floats / (h.hk * kKvBlock * h.s), c.kv_heads = h.hk, c.head_size = h.s, c.v_size = h.s;
    if (e == Elem::f16) c.k16 = k16.data(), c.v16 = v16.data();
    else if (e == Elem::q8_0) c.k8 = k8.data(), c.v8 = v8.data();
    else c.k = k.data(), c.v = v.data();
    return c;
  }
};

void bench_decode(Isa isa, const Heads& h, int64_t B, int64_t L, Elem e) {
  const int64_t kHk = h.hk, kHq = h.hq, kS = h.s;
  const int64_t nb = (L + kKvBlock - 1) / kKvBlock, floats = B * nb * kHk * kKvBlock * kS;
  const size_t layer_bytes = static_cast<size_t>(bytes_of(e, floats)) * 2;
  const int layers = static_cast<int>(std::max<size_t>(2, (160u << 20) / layer_bytes + 1));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<Layer> ls(static_cast<size_t>(layers));
  std::vector<float> tmp(static_cast<size_t>(floats));
  for (Layer& l : ls) {
    for (auto* dst : {&l.k, &l.v}) {
      for (auto& x : tmp) x = nd(rng);
      if (e == Elem::f32) dst->assign(tmp.begin(), tmp.end());
      if (e == Elem::f16) {
        auto& h16 = dst == &l.k ? l.k16 : l.v16;
        h16.resize(static_cast<size_t>(floats));
        to_f16(isa, tmp.data(), floats, h16.data());
      }
      if (e == Elem::q8_0) {
        auto& b8 = dst == &l.k ? l.k8 : l.v8;
        b8.resize(static_cast<size_t>(bytes_of(e, floats)));
        to_q8_0(isa, tmp.data(), floats, b8.data());
      }
    }
  }
  std::vector<float> q(B * kHq * kS), out(B * kHq * kS);
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> pos(B, static_cast<int32_t>(L - 1)), seq(B), bi(B * nb), bib(B + 1);
  for (int64_t b = 0; b < B; ++b) seq[b] = static_cast<int32_t>(b), bib[b + 1] = static_cast<int32_t>((b + 1) * nb);
  // Block j of sequence b is block j * B + b: sequences decoding together take their next block
  // at about the same step, so the block manager hands them out interleaved.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < nb; ++j) bi[b * nb + j] = static_cast<int32_t>(j * B + b);
  AttentionBatch ab;
  ab.q = q.data(), ab.q_stride = kHq * kS, ab.out = out.data(), ab.out_stride = kHq * kS;
  ab.tokens = B, ab.q_heads = kHq, ab.positions = pos.data(), ab.seq = seq.data();
  ab.block_indices = bi.data(), ab.block_begins = bib.data(), ab.n_seqs = B, ab.scale = 0.125f;
  KvCache c0 = ls[0].cache(e, h, floats);
  std::vector<float> scratch(static_cast<size_t>(attention_rows_scratch_floats(c0, ab, L)));
  const int64_t items = attention_items(c0, ab);
  const int reps = std::max(4, static_cast<int>(20000 / (B * L / 64 + 1)));
  double hot = 1e30, cold = 1e30;
  for (int batch = 0; batch < 5; ++batch) {
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r)
      must(attention_rows(isa, c0, ab, 0, items, scratch.data(), static_cast<int64_t>(scratch.size())));
    hot = std::min(hot, seconds_since(t0) / reps);
    t0 = Clock::now();
    for (int r = 0; r < layers; ++r)
      must(attention_rows(isa, ls[r].cache(e, h, floats), ab, 0, items, scratch.data(), static_cast<int64_t>(scratch.size())));
    cold = std::min(cold, seconds_since(t0) / layers);
  }
  const double bytes = static_cast<double>(bytes_of(e, B * L * kHk * kS) * 2);  // the K/V rows read
  std::printf("decode %-7s B=%-2lld L=%-5lld %-4s %-6s  hot %8.1f us (%6.2f GB/s)   cold %8.1f us (%6.2f GB/s)\n", h.model,
              static_cast<long long>(B), static_cast<long long>(L), name(e), std::string(to_string(isa)).c_str(),
              hot * 1e6, bytes / hot * 1e-9, cold * 1e6, bytes / cold * 1e-9);
}

}  // namespace
}  // namespace ggflow::cpu

int main(int argc, char** argv) {
  using namespace ggflow::cpu;
  // attention_kernel [qwen]: Qwen2.5 1.5B's heads at up to 16384 keys, one sequence
  // (a second argument, f32 | f16 | q8_0: that cache type only, AVX-512 only: for a profiler)
  const bool qwen = argc > 1 && std::string(argv[1]) == "qwen";
  const std::string only = argc > 2 ? argv[2] : "";
  const Heads smol{"smollm2", 3, 9, 64}, qw{"qwen1.5b", 2, 12, 128};
  for (Isa isa : supported_isas()) {
    if (isa == Isa::scalar) continue;
    if (qwen) {
      for (int64_t L : {4096, 16384})
        for (Elem e : {Elem::f32, Elem::f16, Elem::q8_0})
          if (only.empty() || (only == name(e) && isa == Isa::avx512)) bench_decode(isa, qw, 1, L, e);
      continue;
    }
    for (int64_t L : {16, 64, 128, 1024, 4096})
      for (int64_t B : {1, 8})
        for (Elem e : {Elem::f32, Elem::f16, Elem::q8_0}) bench_decode(isa, smol, B, L, e);
  }
  return 0;
}
