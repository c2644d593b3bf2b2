// Rough single-thread timings of the matmul kernels (a benchmark, not a test). Run:
//   ./build/bench/matmul_kernels
// GEMV: GB/s of weights streamed, "hot" (one matrix, cache-resident when small) and "cold"
// (rotating over copies totalling > 128 MiB, so weights come from DRAM, as in a real decode step).
// GEMM: T = 64 tokens, GMAC/s and the equivalent tokens/s for that one matrix.
#include <algorithm>
#include <atomic>
#include <immintrin.h>
#include <chrono>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/thread_pool.h"
#include "cpu/kernels/matmul.h"
#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/quant_act.h"
#include "gguf/dequant.h"

namespace ggflow::cpu {
namespace {

// A failed call is a bug in the benchmark's arguments: say so and stop.
void must(const Status& s) {
  if (!s) {
    std::fprintf(stderr, "matmul_kernels: %s\n", s.error().str().c_str());
    std::exit(1);
  }
}

using gguf::GgmlType;
using Clock = std::chrono::steady_clock;

// Random valid weights: random bytes with small f16 scales in every f16 field position we know.
std::vector<uint8_t> make_weights(GgmlType t, int64_t N, int64_t K) {
  const auto& tr = gguf::traits(t);
  const size_t wrb = static_cast<size_t>(K / tr.block_size) * tr.type_size;
  std::vector<uint8_t> w(wrb * N);
  std::mt19937 rng(1);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const uint16_t h = gguf::f32_to_f16(0.01f);
  for (size_t b = 0; b < w.size() / tr.type_size; ++b) {
    uint8_t* p = w.data() + b * tr.type_size;
    auto put = [&](size_t off) { std::memcpy(p + off, &h, 2); };
    switch (t) {
      case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: put(0); break;
      case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: put(0); put(2); break;
      case GgmlType::Q6_K: put(208); break;
      default: break;
    }
  }
  return w;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void bench_gemv(GgmlType t, int64_t N, int64_t K) {
  const auto& tr = gguf::traits(t);
  const size_t wrb = static_cast<size_t>(K / tr.block_size) * tr.type_size;
  const std::vector<uint8_t> w = make_weights(t, N, K);
  const size_t bytes = w.size();
  const int copies = static_cast<int>(std::max<size_t>(2, (128u << 20) / bytes + 1));
  std::vector<std::vector<uint8_t>> cold(copies, w);
  std::vector<float> x(K), c(N);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (float& v : x) v = nd(rng);
  for (Isa isa : supported_isas()) {
    std::vector<uint8_t> xq(quant_act_row_bytes(t, K));
    must(quantize_act(isa, t, x.data(), K, xq.data()));
    const int reps = isa == Isa::scalar ? 2 : std::max(4, static_cast<int>((64u << 20) / bytes));
    // Best of 5 batches (the machine is shared; the best batch is the least disturbed).
    double hot = 1e30, cld = 1e30;
    int next = 0;
    for (int batch = 0; batch < 5; ++batch) {
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r)
        must(matmul(isa, t, w.data(), wrb, K, xq.data(), xq.size(), 1, c.data(), N, 0, N));
      hot = std::min(hot, seconds_since(t0) / reps);
      t0 = Clock::now();
      for (int r = 0; r < reps; ++r, next = (next + 1) % copies)
        must(matmul(isa, t, cold[next].data(), wrb, K, xq.data(), xq.size(), 1, c.data(), N, 0, N));
      cld = std::min(cld, seconds_since(t0) / reps);
    }
    std::printf("GEMV %-5s N=%-6lld K=%-5lld %-6s  hot %7.2f GB/s (%8.1f us)   cold %7.2f GB/s (%8.1f us)\n",
                std::string(tr.name).c_str(), static_cast<long long>(N), static_cast<long long>(K),
                std::string(to_string(isa)).c_str(), bytes / hot * 1e-9, hot * 1e6, bytes / cld * 1e-9, cld * 1e6);
  }
}

size_t g_cold_mib = 128;  // the packed GEMM's cold rotation (gemm8 [MiB])

void bench_gemm(GgmlType t, int64_t N, int64_t K, int64_t T) {
  const auto& tr = gguf::traits(t);
  const size_t wrb = static_cast<size_t>(K / tr.block_size) * tr.type_size;
  const std::vector<uint8_t> w = make_weights(t, N, K);
  std::vector<float> x(T * K), c(T * N);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (float& v : x) v = nd(rng);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::scalar) continue;
    const size_t xrb = quant_act_row_bytes(t, K);
    std::vector<uint8_t> xq(xrb * T);
    must(quantize_act_rows(isa, t, x.data(), K, T, K, xq.data(), xrb));
    const int reps = 5;
    double s = 1e30, q = 1e30;
    for (int batch = 0; batch < 5; ++batch) {
      auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r)
        must(matmul(isa, t, w.data(), wrb, K, xq.data(), xrb, T, c.data(), N, 0, N));
      s = std::min(s, seconds_since(t0) / reps);
      t0 = Clock::now();
      for (int r = 0; r < reps; ++r) must(quantize_act_rows(isa, t, x.data(), K, T, K, xq.data(), xrb));
      q = std::min(q, seconds_since(t0) / reps);
    }
    std::printf("GEMM %-5s N=%-6lld K=%-5lld T=%-3lld %-6s  %7.1f GMAC/s  (%8.1f us, %8.0f tokens/s; quantize %.1f us)\n",
                std::string(tr.name).c_str(), static_cast<long long>(N), static_cast<long long>(K),
                static_cast<long long>(T), std::string(to_string(isa)).c_str(),
                static_cast<double>(N) * K * T / s * 1e-9, s * 1e6, T / s, q * 1e6);
    if (packed_supports(isa, t)) {
      std::vector<uint8_t> pk(packed_bytes(t, N, K));
      pack_groups(t, w.data(), wrb, N, K, pk.data(), 0, (N + kPackRows - 1) / kPackRows);
      double sp = 1e30;
      for (int batch = 0; batch < 5; ++batch) {
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r) must(matmul_packed(isa, t, pk.data(), N, K, xq.data(), xrb, T, c.data(), N, 0, N));
        sp = std::min(sp, seconds_since(t0) / reps);
      }
      // Cold: rotating over copies totalling > g_cold_mib (weights from DRAM or L3, as in a model),
      // in one 2 MiB-aligned arena with huge-page advice (as packed_weights.cpp places them).
      const size_t stride = (pk.size() + 4095) / 4096 * 4096;
      const int copies = static_cast<int>(std::max<size_t>(2, (g_cold_mib << 20) / stride + 1));
      const size_t huge = size_t{2} << 20, arena_bytes = (stride * copies + huge - 1) / huge * huge;
      uint8_t* arena = static_cast<uint8_t*>(std::aligned_alloc(huge, arena_bytes));
      if (!arena) std::exit(1);
      madvise(arena, arena_bytes, MADV_HUGEPAGE);
      for (int i = 0; i < copies; ++i) std::memcpy(arena + i * stride, pk.data(), pk.size());
      double sc = 1e30;
      int next = 0;
      for (int batch = 0; batch < 5; ++batch) {
        auto t0 = Clock::now();
        for (int r = 0; r < copies; ++r, next = (next + 1) % copies)
          must(matmul_packed(isa, t, arena + next * stride, N, K, xq.data(), xrb, T, c.data(), N, 0, N));
        sc = std::min(sc, seconds_since(t0) / copies);
      }
      std::free(arena);
      std::printf("GEMM %-5s N=%-6lld K=%-5lld T=%-3lld %-6s  %7.1f GMAC/s  (%8.1f us) packed, cold (%zu MiB) %7.1f GMAC/s\n",
                  std::string(tr.name).c_str(), static_cast<long long>(N), static_cast<long long>(K),
                  static_cast<long long>(T), std::string(to_string(isa)).c_str(),
                  static_cast<double>(N) * K * T / sp * 1e-9, sp * 1e6, g_cold_mib,
                  static_cast<double>(N) * K * T / sc * 1e-9);
    }
  }
}

void gemv_bench() {
  bench_gemv(GgmlType::Q4_1, 1536, 576);
  bench_gemv(GgmlType::Q4_1, 576, 1536);
  bench_gemv(GgmlType::Q8_0, 49152, 576);
  bench_gemv(GgmlType::Q4_K, 640, 2048);
  bench_gemv(GgmlType::Q6_K, 640, 2048);
  bench_gemv(GgmlType::Q5_0, 2048, 640);
  bench_gemv(GgmlType::F16, 576, 576);
}

void gemm_bench() {
  bench_gemm(GgmlType::Q4_1, 1536, 576, 64);
  bench_gemm(GgmlType::Q4_1, 576, 1536, 64);
  bench_gemm(GgmlType::Q8_0, 4096, 576, 64);
  bench_gemm(GgmlType::Q4_K, 640, 2048, 64);
  bench_gemm(GgmlType::Q6_K, 640, 2048, 64);
  bench_gemm(GgmlType::Q5_0, 2048, 640, 64);
  bench_gemm(GgmlType::F32, 576, 576, 64);
}

// An 8-sequence decode step of SmolLM2 (Q4_1 layers, Q8_0 head) and Gemma 3 (Q4_K).
void gemm8_bench() {
  bench_gemm(GgmlType::Q4_1, 1536, 576, 1);
  bench_gemm(GgmlType::Q4_1, 1536, 576, 8);
  bench_gemm(GgmlType::Q4_1, 576, 1536, 8);
  bench_gemm(GgmlType::Q8_0, 49152, 576, 8);
  bench_gemm(GgmlType::Q4_0, 1536, 576, 8);
  bench_gemm(GgmlType::Q4_K, 640, 2048, 8);
  bench_gemm(GgmlType::Q4_1, 1536, 576, 16);
  bench_gemm(GgmlType::Q4_1, 1536, 576, 64);
}

// The K-quant matmuls of a Qwen2.5-Coder 1.5B Q4_K_M decode step (gate/up, down in Q4_K and in
// Q6_K) and of a 4-token tile, one thread: packed vs the GGUF layout, hot and cold. With token
// counts: the gate/up (Q4_K) and down (Q6_K) shapes at each of them only (a verification of k
// drafts is k + 1 tokens; GGFLOW_AMX=0 shows the VNNI kernels' figure beside AMX's).
void kquant_bench(const std::vector<int64_t>& tokens) {
  if (!tokens.empty()) {
    for (int64_t T : tokens) bench_gemm(GgmlType::Q4_K, 8960, 1536, T);
    for (int64_t T : tokens) bench_gemm(GgmlType::Q6_K, 1536, 8960, T);
    return;
  }
  bench_gemm(GgmlType::Q4_K, 8960, 1536, 1);
  bench_gemm(GgmlType::Q4_K, 1536, 8960, 1);
  bench_gemm(GgmlType::Q6_K, 1536, 8960, 1);
  bench_gemm(GgmlType::Q4_K, 8960, 1536, 4);
  bench_gemm(GgmlType::Q6_K, 1536, 8960, 4);
  bench_gemm(GgmlType::Q4_K, 8960, 1536, 8);
  bench_gemm(GgmlType::Q4_K, 8960, 1536, 512);
  bench_gemm(GgmlType::Q6_K, 1536, 8960, 512);
  bench_gemm(GgmlType::Q6_K, 8960, 1536, 512);
  bench_gemm(GgmlType::Q4_K, 1536, 8960, 512);
}

// The cost of one ThreadPool::parallel_for with nothing to do (the barrier every parallel step pays).
void barrier_bench() {
  for (int threads : {2, 4}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> sink{0};
    const int reps = 200000;
    double best = 1e30;
    for (int batch = 0; batch < 5; ++batch) {
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) pool.parallel_for(64, 16, [&](int64_t b, int64_t, int) { sink += b; });
      best = std::min(best, seconds_since(t0) / reps);
    }
    std::printf("parallel_for barrier, %d threads: %.2f us per call (sink %lld)\n", threads, best * 1e6,
                static_cast<long long>(sink.load()));
  }
}

// The matmuls of SmolLM2's 30 decode layers at T tokens (Q4_1: Q/K/V as one 960-row job, o, gate/up
// as one 3072-row job, down), each layer its own packed weights (66 MiB in all, as in the model) in
// one huge-page arena, activations quantized before each job as the executor does, over a
// ThreadPool of 1 and 2 threads: what the layers' matmuls of a decode step cost without the rest of
// the step (attention, norms, the head), to set beside `GGFLOW_PROFILE=2 ggflow bench`.
void layers_bench(int64_t T) {
  const GgmlType t = GgmlType::Q4_1;
  const Isa isa = best_isa();
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  const Shape shapes[4] = {{"qkv", 960, 576}, {"o", 576, 576}, {"gate/up", 3072, 576}, {"down", 576, 1536}};
  constexpr int kLayers = 30, kReps = 8;
  auto stride = [&](const Shape& sh) { return (packed_bytes(t, sh.N, sh.K) + 4095) / 4096 * 4096; };
  size_t bytes = 0;
  for (const Shape& sh : shapes) bytes += stride(sh);
  const size_t huge = size_t{2} << 20, arena_bytes = (bytes * kLayers + huge - 1) / huge * huge;
  uint8_t* arena = static_cast<uint8_t*>(std::aligned_alloc(huge, arena_bytes));
  if (!arena) std::exit(1);
  madvise(arena, arena_bytes, MADV_HUGEPAGE);
  std::vector<const uint8_t*> W;  // [layer * 4 + shape]
  for (size_t l = 0, off = 0; l < kLayers; ++l)
    for (const Shape& sh : shapes) {
      const std::vector<uint8_t> w = make_weights(t, sh.N, sh.K);
      pack_groups(t, w.data(), w.size() / sh.N, sh.N, sh.K, arena + off, 0, (sh.N + kPackRows - 1) / kPackRows);
      W.push_back(arena + off);
      off += stride(sh);
    }
  std::vector<float> x(T * 1536), c(T * 3072);  // [T, K] activations, [T, N] outputs
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> xq(quant_act_row_bytes(t, 1536) * T);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    double best = 1e30, job_s[4] = {0, 0, 0, 0}, mac = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      const auto t0 = Clock::now();
      mac = 0;
      for (int l = 0; l < kLayers; ++l)
        for (int j = 0; j < 4; ++j) {
          const Shape& sh = shapes[j];
          const size_t xrb = quant_act_row_bytes(t, sh.K);
          const auto tj = Clock::now();
          must(quantize_act_rows(isa, t, x.data(), sh.K, T, sh.K, xq.data(), xrb));
          const uint8_t* P = W[static_cast<size_t>(l * 4 + j)];
          pool.parallel_for(sh.N, kPackRows, [&](int64_t b, int64_t e, int) {
            (void)matmul_packed(isa, t, P, sh.N, sh.K, xq.data(), xrb, T, c.data(), sh.N, b, e);
          });
          job_s[j] += seconds_since(tj);
          mac += static_cast<double>(sh.N) * sh.K * T;
        }
      best = std::min(best, seconds_since(t0));
    }
    std::printf("SmolLM2 layers' matmuls, T=%lld, %d thread(s): %.3f ms per step (%.1f GMAC/s); per job (mean, with "
                "its quantization):",
                static_cast<long long>(T), threads, best * 1e3, mac / best * 1e-9);
    for (int j = 0; j < 4; ++j) std::printf(" %s %.1f us", shapes[j].name, job_s[j] / (kReps * kLayers) * 1e6);
    std::printf("\n");
  }
  std::free(arena);
}

// Read bandwidth of this host (the roofline's memory bound): 1 GiB in huge pages, summed as u64 by
// 1 and 2 threads of the ThreadPool (each its share), best of 5 passes.
void bandwidth_bench() {
  const size_t bytes = size_t{1} << 30, huge = size_t{2} << 20;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(huge, bytes));
  if (!buf) std::exit(1);
  madvise(buf, bytes, MADV_HUGEPAGE);
  const int64_t words = static_cast<int64_t>(bytes / 8);
  for (int64_t i = 0; i < words; ++i) buf[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::atomic<uint64_t> sink{0};
    double best = 1e30;
    for (int pass = 0; pass < 5; ++pass) {
      const auto t0 = Clock::now();
      pool.parallel_for(words, words / threads, [&](int64_t b, int64_t e, int) {
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t i = b; i + 4 <= e; i += 4) s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
        sink += s0 + s1 + s2 + s3;
      });
      best = std::min(best, seconds_since(t0));
    }
    std::printf("read bandwidth, %d thread(s): %.1f GB/s (1 GiB, best of 5; sink %llx)\n", threads,
                static_cast<double>(bytes) / best * 1e-9, static_cast<unsigned long long>(sink.load()));
  }
  std::free(buf);
}

// The int8 peak of this host (the roofline's prefill bound): n rounds of vpdpbusd zmm on 24
// independent chains (64 MAC each), in assembly (GCC spills an array of 24 accumulators); the
// operands are whatever zmm0 and zmm1 hold (integer ops: the values do not change the speed).
// AVX-512 VNNI hosts only.
__attribute__((target("avx512f,avx512vnni"))) void vnni_chains(int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    asm volatile(
        "vpdpbusd %%zmm1, %%zmm0, %%zmm8\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm9\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm10\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm11\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm12\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm13\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm14\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm15\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm16\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm17\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm18\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm19\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm20\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm21\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm22\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm23\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm24\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm25\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm26\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm27\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm28\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm29\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm30\n\t"
        "vpdpbusd %%zmm1, %%zmm0, %%zmm31\n\t"
        ::: "xmm0", "xmm1", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}

// vpdpbusd per second on 1 and 2 threads (each its own chains), best of 3.
void peak_bench() {
  if (best_isa() != Isa::avx512) {
    std::printf("int8 peak: this host has no AVX-512 VNNI\n");
    return;
  }
  const int64_t n = 50000000;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    double best = 1e30;
    for (int pass = 0; pass < 3; ++pass) {
      const auto t0 = Clock::now();
      pool.parallel_for(threads, 1, [&](int64_t, int64_t, int) { vnni_chains(n); });
      best = std::min(best, seconds_since(t0));
    }
    const double ops = static_cast<double>(n) * 24 * threads / best;
    std::printf("vpdpbusd zmm, %d thread(s): %.2f G/s, %.0f GMAC/s\n", threads, ops * 1e-9, ops * 64e-9);
  }
}

}  // namespace
}  // namespace ggflow::cpu

// No argument: everything. "gemm8 [MiB]": the shapes of an 8-sequence decode step only, the cold
// rotation over MiB of copies (default 128: beyond this host's last-level cache; 64 stays in it). "barrier": the
// thread pool's cost per parallel step. "layers [T]": SmolLM2's layer matmuls of a decode step at T tokens
// (default 8) over the thread pool. "kquant [T ...]": Qwen2.5 1.5B's K-quant shapes (at those token counts). "bandwidth": this host's read bandwidth on 1 and 2 threads;
// "peak": its vpdpbusd throughput (the int8 peak) on 1 and 2 threads.
int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "peak") == 0) {
    ggflow::cpu::peak_bench();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "bandwidth") == 0) {
    ggflow::cpu::bandwidth_bench();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "barrier") == 0) {
    ggflow::cpu::barrier_bench();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "layers") == 0) {
    ggflow::cpu::layers_bench(argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 8);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "kquant") == 0) {
    std::vector<int64_t> tokens;
    for (int i = 2; i < argc; ++i) tokens.push_back(std::strtoll(argv[i], nullptr, 10));
    ggflow::cpu::kquant_bench(tokens);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "gemm8") == 0) {
    if (argc > 2) ggflow::cpu::g_cold_mib = std::strtoull(argv[2], nullptr, 10);
    ggflow::cpu::gemm8_bench();
    return 0;
  }
  ggflow::cpu::bandwidth_bench();
  ggflow::cpu::gemv_bench();
  ggflow::cpu::gemm_bench();
  return 0;
}
