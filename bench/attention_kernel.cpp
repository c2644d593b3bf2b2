// Decode attention over the paged KV cache (cpu/kernels/attention.h), one thread: a benchmark,
// not a test. Run:
//   ./build/bench/attention_kernel
// Each line: B sequences decoding one token each (SmolLM2's heads: 9 query heads over 3 kv heads
// of 64) at a context of L keys, the cache f32 or f16; "hot" runs one layer's cache again and
// again (cache-resident when small), "cold" rotates over the caches of as many layers as make
// > 160 MiB (from DRAM, as in a decode step after the weights streamed through the caches).
// us per layer call, and GB/s of K/V read.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/attention.h"
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

constexpr int64_t kHk = 3, kHq = 9, kS = 64;

// One layer's cache for B sequences of L keys each.
struct Layer {
  std::vector<float> k, v;
  std::vector<uint16_t> k16, v16;
  KvCache cache(bool half) {
    KvCache c;
    const int64_t n = static_cast<int64_t>(half ? k16.size() : k.size());
    c.num_blocks = n / (kHk * kKvBlock * kS), c.kv_heads = kHk, c.head_size = kS, c.v_size = kS;
    if (half) c.k16 = k16.data(), c.v16 = v16.data();
    else c.k = k.data(), c.v = v.data();
    return c;
  }
};

void bench_decode(Isa isa, int64_t B, int64_t L, bool half) {
  const int64_t nb = (L + kKvBlock - 1) / kKvBlock, floats = B * nb * kHk * kKvBlock * kS;
  const size_t layer_bytes = static_cast<size_t>(floats) * 2 * (half ? 2 : 4);
  const int layers = static_cast<int>(std::max<size_t>(2, (160u << 20) / layer_bytes + 1));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<Layer> ls(static_cast<size_t>(layers));
  for (Layer& l : ls) {
    if (half) {
      l.k16.resize(floats), l.v16.resize(floats);
      for (auto& x : l.k16) x = gguf::f32_to_f16(nd(rng));
      for (auto& x : l.v16) x = gguf::f32_to_f16(nd(rng));
    } else {
      l.k.resize(floats), l.v.resize(floats);
      for (auto& x : l.k) x = nd(rng);
      for (auto& x : l.v) x = nd(rng);
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
  KvCache c0 = ls[0].cache(half);
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
      must(attention_rows(isa, ls[r].cache(half), ab, 0, items, scratch.data(), static_cast<int64_t>(scratch.size())));
    cold = std::min(cold, seconds_since(t0) / layers);
  }
  const double bytes = static_cast<double>(B * L * kHk * kS * 2 * (half ? 2 : 4));  // the K/V rows read
  std::printf("decode B=%-2lld L=%-5lld %s %-6s  hot %8.1f us (%6.2f GB/s)   cold %8.1f us (%6.2f GB/s)\n",
              static_cast<long long>(B), static_cast<long long>(L), half ? "f16" : "f32", std::string(to_string(isa)).c_str(),
              hot * 1e6, bytes / hot * 1e-9, cold * 1e6, bytes / cold * 1e-9);
}

}  // namespace
}  // namespace ggflow::cpu

int main() {
  using namespace ggflow::cpu;
  for (Isa isa : supported_isas()) {
    if (isa == Isa::scalar) continue;
    for (int64_t L : {16, 64, 128, 1024, 4096})
      for (int64_t B : {1, 8})
        for (bool half : {false, true}) bench_decode(isa, B, L, half);
  }
  return 0;
}
