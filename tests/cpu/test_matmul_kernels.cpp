// The matmul / activation-quantizer kernel sweep (in the manner of llama.cpp's test-backend-ops):
// every weight type x shapes x every ISA this CPU supports.
//  - each SIMD path equals the scalar twin by memcmp (quantizer and matmul);
//  - GEMM rows equal GEMV rows (T = 1 calls) by memcmp;
//  - results do not depend on the [n0, n1) split (random splits) by memcmp;
//  - nothing outside C[t][n0..n1) is written; weights/activations end at a guard page, so an
//    over-read faults;
//  - the scalar twin against an f64 oracle (gguf::dequantize of the weights times the unquantized
//    f32 activations) within a stated bound (see kBound below).
// Prints "N passed, N failed" and requires >= 1000 cases.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/isa.h"
#include "cpu/kernels/matmul.h"
#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/quant_act.h"
#include "gguf/dequant.h"
#include "gguf/file.h"

namespace ggflow::cpu {
namespace {

using gguf::GgmlType;

// ---------------------------------------------------------------------------------------------
// A buffer whose last byte is followed by an inaccessible page: reading past the end faults.
class GuardBuf {
 public:
  explicit GuardBuf(size_t n) : n_(n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t body = (n + page - 1) / page * page;
    total_ = body + page;
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<uint8_t*>(p);
    mprotect(base_ + body, page, PROT_NONE);
    data_ = base_ + body - n;
  }
  ~GuardBuf() { munmap(base_, total_); }
  GuardBuf(const GuardBuf&) = delete;
  GuardBuf& operator=(const GuardBuf&) = delete;
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return n_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t n_ = 0, total_ = 0;
};

struct Counter {
  int passed = 0, failed = 0;
};
Counter g_count;

void tally(bool ok) { (ok ? g_count.passed : g_count.failed) += 1; }

// ---------------------------------------------------------------------------------------------
// Random weights: random bytes, with every f16 scale field replaced by a sane value.
void put_f16(uint8_t* p, float v) {
  const uint16_t h = gguf::f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

void randomize_weights(GgmlType t, uint8_t* w, int64_t N, int64_t K, size_t wrb, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto& tr = gguf::traits(t);
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* row = w + n * wrb;
    for (size_t i = 0; i < wrb; ++i) row[i] = static_cast<uint8_t>(byte(rng));
    if (t == GgmlType::F32) {
      for (int64_t k = 0; k < K; ++k) {
        const float v = nd(rng) * 0.1f;
        std::memcpy(row + 4 * k, &v, 4);
      }
      continue;
    }
    if (t == GgmlType::F16) {
      for (int64_t k = 0; k < K; ++k) put_f16(row + 2 * k, nd(rng) * 0.1f);
      continue;
    }
    if (t == GgmlType::BF16) {
      for (int64_t k = 0; k < K; ++k) {
        const uint16_t h = gguf::f32_to_bf16(nd(rng) * 0.1f);
        std::memcpy(row + 2 * k, &h, 2);
      }
      continue;
    }
    const int64_t nb = K / tr.block_size;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = row + b * tr.type_size;
      switch (t) {
        case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: put_f16(blk, 0.02f * u(rng)); break;
        case GgmlType::Q4_1: case GgmlType::Q5_1:
          put_f16(blk, 0.02f * std::fabs(u(rng)));
          put_f16(blk + 2, -0.2f * std::fabs(u(rng)));
          break;
        case GgmlType::Q2_K: put_f16(blk + 80, 0.02f * u(rng)); put_f16(blk + 82, 0.02f * u(rng)); break;
        case GgmlType::Q3_K: put_f16(blk + 108, 0.01f * u(rng)); break;
        case GgmlType::Q4_K: case GgmlType::Q5_K:
          put_f16(blk, 0.005f * u(rng));
          put_f16(blk + 2, 0.005f * u(rng));
          break;
        case GgmlType::Q6_K: put_f16(blk + 208, 0.001f * u(rng)); break;
        default: break;
      }
    }
  }
}

// Activations: normal, with occasional outliers (as real hidden states have).
void randomize_acts(float* x, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 63);
  for (int64_t i = 0; i < n; ++i) x[i] = pick(rng) == 0 ? 8.0f * nd(rng) : nd(rng);
}

size_t row_bytes(GgmlType t, int64_t K) {
  const auto& tr = gguf::traits(t);
  return static_cast<size_t>(K / tr.block_size) * tr.type_size;
}

// Accuracy bound of the twin against the f64 oracle, as the error energy relative to the
// energy of the products: sum (C - ref)^2 / sum_{n,t} sum_k (w[n][k] x[t][k])^2. Normalising by
// the products (not by C^2) keeps the measure meaningful for a single output that happens to
// cancel to ~0. Why these values: int8 activations round each x to a step d = amax/127 of its
// block, an error uniform in +-d/2, i.e. variance d^2/12; relative to E[x^2] that is
// (amax/sigma)^2 / (12 * 127^2) ~ 3e-5 for 32 Gaussian values (amax ~ 2.5 sigma) and ~ 5e-5 for
// 256; our activations have 1-in-64 outliers of 8 sigma, which raise amax in blocks that hold one
// (to ~8-20 sigma): expected ~2e-4 (32-blocks) to ~1e-3 (256-blocks, which nearly always hold
// one). Bounds are 5x those. Float weights only see f32 rounding of the K-long chain
// (~K * 2^-48 relative energy), bound 1e-9.
double bound_for(GgmlType t) {
  switch (act_format(t)) {
    case ActFormat::f32: return 1e-9;
    case ActFormat::qa32: return 1e-3;
    case ActFormat::qa256: return 5e-3;
    default: return 0;
  }
}

constexpr float kSentinel = -12345.678f;

bool bits_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

struct Shape {
  GgmlType t;
  int64_t K, N, T;
};

// One (type, K, N, T): the scalar twin vs the oracle, then every ISA vs the twin, GEMV vs GEMM,
// and split independence. Returns a description of the first failure ("" when all pass) and
// tallies one case per ISA.
void run_case(const Shape& s, std::mt19937& rng, double* worst_err) {
  const GgmlType t = s.t;
  const int64_t K = s.K, N = s.N, T = s.T;
  const size_t wrb = row_bytes(t, K);
  GuardBuf W(wrb * N);
  randomize_weights(t, W.data(), N, K, wrb, rng);
  std::vector<float> x(static_cast<size_t>(T * K));
  randomize_acts(x.data(), T * K, rng);

  const size_t xrb = quant_act_row_bytes(t, K);
  ASSERT_GT(xrb, 0u);
  const int64_t ldc = N + 3;
  const auto isas = supported_isas();

  // The twin's activations and result.
  GuardBuf Xs(xrb * T);
  ASSERT_TRUE(quantize_act_rows(Isa::scalar, t, x.data(), K, T, K, Xs.data(), xrb));
  std::vector<float> cref(static_cast<size_t>(T * ldc), kSentinel);
  ASSERT_TRUE(matmul(Isa::scalar, t, W.data(), wrb, K, Xs.data(), xrb, T, cref.data(), ldc, 0, N));

  // Oracle (f64 over dequantized weights and unquantized activations).
  std::vector<float> wd(static_cast<size_t>(K));
  double err = 0, energy = 0;
  for (int64_t n = 0; n < N; ++n) {
    ASSERT_TRUE(gguf::dequantize(t, {W.data() + n * wrb, wrb}, K, wd.data()));
    for (int64_t tt = 0; tt < T; ++tt) {
      double ref = 0, e = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(wd[k]) * x[tt * K + k];
        ref += p;
        e += p * p;
      }
      const double d = cref[tt * ldc + n] - ref;
      err += d * d;
      energy += e;
    }
  }
  const double rel = energy > 0 ? err / energy : err;
  *worst_err = std::max(*worst_err, rel);
  // bound_for is an expectation over many outputs; one case's N * T outputs estimate it with a
  // relative spread ~ 1 / sqrt(N * T) (a single output with one outlier block can sit at ~6x the
  // mean: Q3_K K=512 N=1 T=1 gave 0.0064), so a small case gets the head-room of that spread. A
  // real defect (a wrong scale, a dropped block) errs by O(1), far above either.
  const double bound = bound_for(t) * (1.0 + 8.0 / std::sqrt(static_cast<double>(N * T)));
  const bool oracle_ok = rel <= bound;
  EXPECT_TRUE(oracle_ok) << gguf::traits(t).name << " K=" << K << " N=" << N << " T=" << T << ": error "
                         << rel << " > bound " << bound;

  // The splits draw from their own generator, seeded once per case, so that the cases drawn after
  // this one are the same on every host whatever ISAs it has (the oracle bound is checked on the
  // same data everywhere).
  std::mt19937 split_rng(static_cast<uint32_t>(rng()));
  std::uniform_int_distribution<int> coin(0, 3);
  for (Isa isa : isas) {
    bool ok = oracle_ok;
    std::string why;
    // Quantizer: this ISA's rows equal the twin's.
    GuardBuf Xi(xrb * T);
    ok = ok && quantize_act_rows(isa, t, x.data(), K, T, K, Xi.data(), xrb).ok();
    if (std::memcmp(Xi.data(), Xs.data(), xrb * T) != 0) { ok = false; why += " quantizer!=twin"; }
    // Whole range, all tokens.
    std::vector<float> c(static_cast<size_t>(T * ldc), kSentinel);
    ok = ok && matmul(isa, t, W.data(), wrb, K, Xi.data(), xrb, T, c.data(), ldc, 0, N).ok();
    if (!bits_equal(c.data(), cref.data(), c.size())) { ok = false; why += " gemm!=twin"; }
    // GEMV rows (one token per call, ldc unused) equal the GEMM rows.
    for (int64_t tt = 0; tt < T; ++tt) {
      std::vector<float> r(static_cast<size_t>(N) + 2, kSentinel);
      ok = ok && matmul(isa, t, W.data(), wrb, K, Xi.data() + tt * xrb, xrb, 1, r.data() + 1, 0, 0, N).ok();
      if (!bits_equal(r.data() + 1, cref.data() + tt * ldc, N) || r[0] != kSentinel || r[N + 1] != kSentinel) {
        ok = false;
        why += " gemv!=gemm(t=" + std::to_string(tt) + ")";
        break;
      }
    }
    // Random split of [0, N) into pieces (as threads would), tokens in a random prefix/suffix.
    std::vector<float> c2(static_cast<size_t>(T * ldc), kSentinel);
    for (int64_t n0 = 0; n0 < N;) {
      const int64_t len =
          std::min<int64_t>(N - n0, 1 + static_cast<int64_t>(split_rng() % (coin(split_rng) ? 5 : 40)));
      ok = ok && matmul(isa, t, W.data(), wrb, K, Xi.data(), xrb, T, c2.data(), ldc, n0, n0 + len).ok();
      n0 += len;
    }
    if (!bits_equal(c2.data(), cref.data(), c2.size())) { ok = false; why += " split!=whole"; }
    EXPECT_TRUE(ok) << gguf::traits(t).name << " K=" << K << " N=" << N << " T=" << T << " isa=" << to_string(isa)
                    << ":" << why;
    tally(ok);
  }
}

std::vector<int64_t> ks_for(GgmlType t) {
  switch (act_format(t)) {
    case ActFormat::f32: return {1, 7, 16, 33, 100, 300, 576};
    case ActFormat::qa32: return {32, 64, 160, 576};
    default: return {256, 512, 768};
  }
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

TEST(MatmulKernels, Sweep) {
  std::mt19937 rng(1234);
  const Counter before = g_count;
  for (GgmlType t : kTypes) {
    double worst = 0;
    for (int64_t K : ks_for(t))
      for (int64_t N : {1, 3, 17, 33})
        for (int64_t T : {1, 2, 5, 8, 9, 17}) run_case({t, K, N, T}, rng, &worst);
    std::printf("  %-5s worst error vs f64 oracle %.3g (bound %.3g)\n", std::string(gguf::traits(t).name).c_str(),
                worst, bound_for(t));
  }
  const int passed = g_count.passed - before.passed, failed = g_count.failed - before.failed;
  std::printf("matmul sweep over %zu ISA(s): %d passed, %d failed\n", supported_isas().size(), passed, failed);
  EXPECT_EQ(failed, 0);
  EXPECT_GE(passed + failed, 1000);
}

// A larger GEMM (T = 64, spanning several token tiles and row groups) on the model shapes.
TEST(MatmulKernels, ModelShapes) {
  std::mt19937 rng(99);
  double worst = 0;
  for (const Shape& s : {Shape{GgmlType::Q4_1, 576, 70, 64}, Shape{GgmlType::Q8_0, 1536, 40, 33},
                         Shape{GgmlType::Q4_K, 2048, 37, 20}, Shape{GgmlType::Q6_K, 2048, 19, 12},
                         Shape{GgmlType::Q5_0, 640, 45, 24}, Shape{GgmlType::F32, 640, 21, 19}})
    run_case(s, rng, &worst);
  std::printf("model shapes: %d passed, %d failed\n", g_count.passed, g_count.failed);
}

// ---------------------------------------------------------------------------------------------
// Packed weights (matmul_packed.h): packing loses nothing (every row unpacks to its GGUF bytes),
// and matmul_packed on every ISA gives the bits of matmul's scalar twin on the GGUF layout, for
// any T, partial last groups and any split into 16-row ranges.

void run_packed_case(GgmlType t, int64_t K, int64_t N, int64_t T, std::mt19937& rng) {
  const size_t wrb = row_bytes(t, K);
  std::vector<uint8_t> W(wrb * N);
  randomize_weights(t, W.data(), N, K, wrb, rng);
  std::vector<float> x(static_cast<size_t>(T * K));
  randomize_acts(x.data(), T * K, rng);
  const size_t xrb = quant_act_row_bytes(t, K);
  std::vector<uint8_t> X(xrb * T);
  ASSERT_TRUE(quantize_act_rows(Isa::scalar, t, x.data(), K, T, K, X.data(), xrb));
  const int64_t ldc = N + 3;
  std::vector<float> cref(static_cast<size_t>(T * ldc), kSentinel);
  ASSERT_TRUE(matmul(Isa::scalar, t, W.data(), wrb, K, X.data(), xrb, T, cref.data(), ldc, 0, N));

  const size_t pbytes = packed_bytes(t, N, K);
  ASSERT_EQ(pbytes, static_cast<size_t>((N + 15) / 16 * 16) * wrb);
  GuardBuf P(pbytes);  // a kernel reading past the packed copy faults
  const int64_t groups = (N + kPackRows - 1) / kPackRows;
  for (int64_t g = 0; g < groups; ++g) pack_groups(t, W.data(), wrb, N, K, P.data(), g, g + 1);  // group by group
  std::vector<uint8_t> row(wrb);
  for (int64_t n = 0; n < N; ++n) {
    unpack_row(t, P.data(), K, n, row.data());
    ASSERT_EQ(std::memcmp(row.data(), W.data() + n * wrb, wrb), 0) << "row " << n << " does not round-trip";
  }
  // AVX-512 runs again where the CPU has AMX (K-quant tiles of 16 tokens), with one and with two row
  // groups per activation tile.
  struct Path {
    Isa isa;
    bool amx;
    int pairs;
  };
  std::vector<Path> paths;
  for (Isa isa : supported_isas()) {
    paths.push_back({isa, false, -1});
    if (isa == Isa::avx512 && amx_supported())
      for (int pairs : {0, 1}) paths.push_back({isa, true, pairs});
  }
  for (auto [isa, amx, pairs] : paths) {
    set_amx_enabled(amx);
    detail::set_amx_group_pairs(pairs);
    std::string why;
    std::vector<float> c(static_cast<size_t>(T * ldc), kSentinel);
    ASSERT_TRUE(matmul_packed(isa, t, P.data(), N, K, X.data(), xrb, T, c.data(), ldc, 0, N));
    if (!bits_equal(c.data(), cref.data(), c.size())) why += " whole!=twin";
    std::vector<float> c2(static_cast<size_t>(T * ldc), kSentinel);
    for (int64_t n0 = 0; n0 < N;) {
      const int64_t n1 = std::min<int64_t>(N, n0 + kPackRows * (1 + static_cast<int64_t>(rng() % 3)));
      ASSERT_TRUE(matmul_packed(isa, t, P.data(), N, K, X.data(), xrb, T, c2.data(), ldc, n0, n1));
      n0 = n1;
    }
    if (!bits_equal(c2.data(), cref.data(), c2.size())) why += " split!=twin";
    EXPECT_TRUE(why.empty()) << gguf::traits(t).name << " K=" << K << " N=" << N << " T=" << T
                             << " isa=" << to_string(isa) << (amx ? "+amx" : "") << (pairs == 1 ? " (group pairs)" : "")
                             << ":" << why;
    tally(why.empty());
  }
  set_amx_enabled(true);
  detail::set_amx_group_pairs(-1);
}

TEST(MatmulPacked, EqualsTwinOnEveryIsa) {
  std::mt19937 rng(4321);
  const Counter before = g_count;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0})
    for (int64_t K : {32, 64, 160, 576})
      for (int64_t N : {1, 15, 16, 17, 33, 70})
        for (int64_t T : {1, 2, 5, 8, 9, 17}) run_packed_case(t, K, N, T, rng);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})  // super-blocks: tiles of 1-4 and 5-8 tokens
    for (int64_t K : {256, 512, 1536})
      for (int64_t N : {1, 15, 16, 17, 33, 70})
        for (int64_t T : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17}) run_packed_case(t, K, N, T, rng);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})  // AMX: whole tiles of 16 tokens, and a rest
    for (int64_t K : {256, 2304})
      for (int64_t N : {15, 20, 33})
        for (int64_t T : {16, 32, 37, 48}) run_packed_case(t, K, N, T, rng);
  const int passed = g_count.passed - before.passed, failed = g_count.failed - before.failed;
  std::printf("packed matmul over %zu ISA(s): %d passed, %d failed\n", supported_isas().size(), passed, failed);
  EXPECT_EQ(failed, 0);
  EXPECT_GE(passed, 720 + 288);
}

TEST(MatmulPacked, LayoutAndRefusals) {
  // Which types have a packed layout, and where the fast kernel is used.
  for (GgmlType t : kTypes) {
    const bool super = t == GgmlType::Q4_K || t == GgmlType::Q6_K;
    const bool expect = t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
                        t == GgmlType::Q8_0 || super;
    EXPECT_EQ(packed_layout(t), expect) << gguf::traits(t).name;
    EXPECT_EQ(packed_supports(Isa::avx512, t), expect);
    EXPECT_EQ(packed_supports(Isa::avx2, t), expect) << gguf::traits(t).name;
    EXPECT_EQ(packed_bytes(t, 16, 256) > 0, expect);
    if (super) EXPECT_EQ(packed_bytes(t, 16, 64), 0u);  // K not a multiple of 256
  }
  EXPECT_EQ(packed_bytes(GgmlType::Q4_1, 16, 48), 0u);  // K not a multiple of 32
  std::vector<uint8_t> P(packed_bytes(GgmlType::Q4_1, 40, 64));
  std::vector<uint8_t> X(quant_act_row_bytes(GgmlType::Q4_1, 64));
  std::vector<float> C(40);
  // A range that does not start on a group, or ends inside one before N: refused, nothing written.
  auto st = matmul_packed(Isa::scalar, GgmlType::Q4_1, P.data(), 40, 64, X.data(), X.size(), 1, C.data(), 40, 8, 40);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().hint.find("multiple of 16"), std::string::npos);
  EXPECT_FALSE(matmul_packed(Isa::scalar, GgmlType::Q4_1, P.data(), 40, 64, X.data(), X.size(), 1, C.data(), 40, 0, 20));
  EXPECT_TRUE(matmul_packed(Isa::scalar, GgmlType::Q4_1, P.data(), 40, 64, X.data(), X.size(), 1, C.data(), 40, 32, 40));
  auto st2 = matmul_packed(Isa::scalar, GgmlType::Q5_K, P.data(), 40, 256, X.data(), X.size(), 1, C.data(), 40, 0, 40);
  ASSERT_FALSE(st2);
  EXPECT_NE(st2.error().what.find("Q5_K"), std::string::npos);
  auto st3 = matmul_packed(Isa::scalar, GgmlType::Q4_K, P.data(), 40, 160, X.data(), X.size(), 1, C.data(), 40, 0, 40);
  ASSERT_FALSE(st3);  // K not a multiple of the super-block
  EXPECT_NE(st3.error().what.find("multiple of 256"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The quantizer: every ISA equals the twin; its definition on edge cases.

void quantize_all(GgmlType t, const std::vector<float>& x, std::vector<std::vector<uint8_t>>& out) {
  const int64_t K = static_cast<int64_t>(x.size());
  out.clear();
  for (Isa isa : supported_isas()) {
    out.emplace_back(quant_act_row_bytes(t, K));
    ASSERT_TRUE(quantize_act(isa, t, x.data(), K, out.back().data()));
  }
}

bool all_isas_equal(const std::vector<std::vector<uint8_t>>& q) {
  for (size_t i = 1; i < q.size(); ++i)
    if (q[i] != q[0]) return false;
  return true;
}

TEST(QuantAct, RandomRowsEqualTwin) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int cases = 0;
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q4_K}) {
    const int64_t bs = t == GgmlType::Q4_1 ? 32 : 256;
    for (int rep = 0; rep < 40; ++rep) {
      const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
      std::vector<float> x(static_cast<size_t>(bs * (1 + rep % 5)));
      for (float& v : x) v = nd(rng) * scale;
      std::vector<std::vector<uint8_t>> q;
      quantize_all(t, x, q);
      const bool ok = all_isas_equal(q);
      EXPECT_TRUE(ok) << "rep " << rep;
      tally(ok);
      ++cases;
      // The definition, checked independently: |x - d*q| <= d/2 (+ rounding of x*id), sums.
      if (t == GgmlType::Q4_1) {
        for (size_t b = 0; b < x.size() / 32; ++b) {
          BlockQA32 blk;
          std::memcpy(&blk, q[0].data() + b * sizeof blk, sizeof blk);
          float amax = 0;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
          const float dr = amax / 127.0f;  // the unrounded step; d and s are its f16 roundings
          int32_t sum = 0;
          for (int i = 0; i < 32; ++i) {
            sum += blk.q[i];
            EXPECT_LE(std::fabs(x[b * 32 + i] - dr * blk.q[i]), dr * 0.5f * 1.0001f);
          }
          EXPECT_EQ(sum, blk.sum);
          EXPECT_EQ(blk.d, gguf::f16_to_f32(gguf::f32_to_f16(dr)));
          EXPECT_EQ(blk.s, gguf::f16_to_f32(gguf::f32_to_f16(dr * static_cast<float>(sum))));
          EXPECT_EQ(blk.reserved, 0);
        }
      } else {
        for (size_t b = 0; b < x.size() / 256; ++b) {
          BlockQA256 blk;
          std::memcpy(&blk, q[0].data() + b * sizeof blk, sizeof blk);
          for (int j = 0; j < 16; ++j) {
            int32_t s = 0;
            for (int i = 0; i < 16; ++i) {
              s += blk.q[16 * j + i];
              EXPECT_LE(std::fabs(x[b * 256 + 16 * j + i] - blk.d * blk.q[16 * j + i]), std::fabs(blk.d) * 0.5f * 1.0001f);
            }
            EXPECT_EQ(s, blk.bsums[j]);
          }
        }
      }
    }
  }
  std::printf("quantizer random rows: %d cases\n", cases);
}

BlockQA32 quant32(const std::vector<float>& x32) {
  std::vector<std::vector<uint8_t>> q;
  quantize_all(GgmlType::Q8_0, x32, q);
  EXPECT_TRUE(all_isas_equal(q));
  tally(all_isas_equal(q));
  BlockQA32 b;
  std::memcpy(&b, q[0].data(), sizeof b);
  return b;
}

TEST(QuantAct, AllZeros) {
  const BlockQA32 b = quant32(std::vector<float>(32, 0.0f));
  EXPECT_EQ(b.d, 0.0f);
  EXPECT_EQ(b.s, 0.0f);
  EXPECT_EQ(b.sum, 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.q[i], 0);
  // Negative zeros too: d = 0 (amax is +0), q = 0.
  const BlockQA32 n = quant32(std::vector<float>(32, -0.0f));
  EXPECT_EQ(n.sum, 0);
  EXPECT_FALSE(std::signbit(n.d));
}

TEST(QuantAct, SingleHugeValue) {
  std::vector<float> x(32, 1.0f);
  x[13] = -1e4f;
  const BlockQA32 b = quant32(x);
  EXPECT_EQ(b.q[13], -127);
  EXPECT_EQ(b.d, gguf::f16_to_f32(gguf::f32_to_f16(1e4f / 127.0f)));
  for (int i = 0; i < 32; ++i)
    if (i != 13) {
      EXPECT_EQ(b.q[i], 0);
    }
  EXPECT_EQ(b.sum, -127);
}

TEST(QuantAct, TiesRoundToEven) {
  // amax = 127 gives d = 1 and id = 1 exactly, so x*id = x and .5 values are exact ties.
  std::vector<float> x = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f, 4.5f, -3.5f};
  x.resize(32, 0.25f);
  const BlockQA32 b = quant32(x);
  EXPECT_EQ(b.d, 1.0f);
  const int expect[] = {127, 0, 2, 2, 0, -2, -2, 126, -126, 4, 4, -4};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(b.q[i], expect[i]) << "x=" << x[i];
  for (int i = 12; i < 32; ++i) EXPECT_EQ(b.q[i], 0);
}

// The 256-blocks take llama.cpp's q8_K scale: iscale = -127 / max, d = 1 / iscale, where max is the
// signed value of largest magnitude (+amax when both signs reach it).
TEST(QuantAct, SuperBlockScaleIsSigned) {
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x(256, 0.25f);
    x[40] = 3.0f * sign;
    std::vector<std::vector<uint8_t>> q;
    quantize_all(GgmlType::Q4_K, x, q);
    EXPECT_TRUE(all_isas_equal(q));
    BlockQA256 b;
    std::memcpy(&b, q[0].data(), sizeof b);
    const float iscale = -127.0f / (3.0f * sign);
    EXPECT_EQ(b.d, 1.0f / iscale);
    EXPECT_EQ(b.q[40], -127);
    EXPECT_EQ(b.q[0], static_cast<int>(std::nearbyint(0.25f * iscale)));
  }
  std::vector<float> both(256, 0.0f);
  both[3] = -2.0f;
  both[9] = 2.0f;  // both signs reach amax: the positive one is max
  std::vector<std::vector<uint8_t>> q;
  quantize_all(GgmlType::Q6_K, both, q);
  EXPECT_TRUE(all_isas_equal(q));
  BlockQA256 b;
  std::memcpy(&b, q[0].data(), sizeof b);
  EXPECT_EQ(b.d, 1.0f / (-127.0f / 2.0f));
  EXPECT_EQ(b.q[9], -127);
  EXPECT_EQ(b.q[3], 127);
}

TEST(QuantAct, NonFinitePolicy) {
  // +inf: d = inf, id = 0: finite values -> 0, inf*0 = NaN -> clamps to -127 (MAXPS semantics).
  std::vector<float> x(32, 2.0f);
  x[5] = std::numeric_limits<float>::infinity();
  const BlockQA32 b = quant32(x);
  EXPECT_TRUE(std::isinf(b.d));
  EXPECT_EQ(b.q[5], -127);
  EXPECT_EQ(b.q[0], 0);
  // NaN: d = NaN, id = NaN, every v NaN -> -127.
  std::vector<float> y(32, 2.0f);
  y[7] = std::numeric_limits<float>::quiet_NaN();
  const BlockQA32 c = quant32(y);
  EXPECT_TRUE(std::isnan(c.d));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(c.q[i], -127);
  // Subnormal amax: d underflows to a subnormal, 1/d overflows to inf; values saturate (defined).
  std::vector<float> z(32, 1e-40f);
  z[3] = -1e-40f;
  const BlockQA32 e = quant32(z);
  EXPECT_EQ(e.q[0], 127);
  EXPECT_EQ(e.q[3], -127);
  // A 256-block with NaN and inf is bit-identical across ISAs too.
  std::vector<float> w(512, 0.5f);
  w[3] = std::numeric_limits<float>::infinity();
  w[300] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<uint8_t>> q;
  quantize_all(GgmlType::Q6_K, w, q);
  EXPECT_TRUE(all_isas_equal(q));
}

// Real threads (1, 2, 3) splitting the rows statically give the single-call bits; pointers with
// no alignment (weights and activations at odd addresses) give the same bits too.
TEST(MatmulKernels, ThreadsAndAlignment) {
  std::mt19937 rng(21);
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16}) {
    const int64_t K = 512, N = 101, T = 11;
    const size_t wrb = row_bytes(t, K), xrb = quant_act_row_bytes(t, K);
    std::vector<uint8_t> wbuf(wrb * N + 1), xbuf(xrb * T + 3);
    uint8_t* W = wbuf.data() + 1;  // odd addresses
    uint8_t* X = xbuf.data() + 3;
    randomize_weights(t, W, N, K, wrb, rng);
    std::vector<float> x(T * K);
    randomize_acts(x.data(), T * K, rng);
    std::vector<float> ref(T * N);
    std::vector<uint8_t> Xa(xrb * T);
    ASSERT_TRUE(quantize_act_rows(Isa::scalar, t, x.data(), K, T, K, Xa.data(), xrb));
    ASSERT_TRUE(matmul(Isa::scalar, t, W, wrb, K, Xa.data(), xrb, T, ref.data(), N, 0, N));
    for (Isa isa : supported_isas()) {
      ASSERT_TRUE(quantize_act_rows(isa, t, x.data(), K, T, K, X, xrb));
      EXPECT_EQ(std::memcmp(X, Xa.data(), xrb * T), 0);
      for (int nt = 1; nt <= 3; ++nt) {
        std::vector<float> c(T * N, kSentinel);
        std::vector<std::thread> th;
        for (int i = 0; i < nt; ++i)
          th.emplace_back([&, i] {
            const int64_t n0 = N * i / nt, n1 = N * (i + 1) / nt;
            EXPECT_TRUE(matmul(isa, t, W, wrb, K, X, xrb, T, c.data(), N, n0, n1));
          });
        for (auto& h : th) h.join();
        const bool ok = bits_equal(c.data(), ref.data(), c.size());
        EXPECT_TRUE(ok) << gguf::traits(t).name << " isa=" << to_string(isa) << " threads=" << nt;
        tally(ok);
      }
    }
  }
}

// A non-finite activation gives non-finite outputs on every ISA; finite rows stay identical.
TEST(MatmulKernels, NonFiniteActivations) {
  std::mt19937 rng(5);
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::F16}) {
    const int64_t K = 256, N = 19, T = 3;
    const size_t wrb = row_bytes(t, K), xrb = quant_act_row_bytes(t, K);
    std::vector<uint8_t> W(wrb * N);
    randomize_weights(t, W.data(), N, K, wrb, rng);
    std::vector<float> x(T * K);
    randomize_acts(x.data(), T * K, rng);
    x[1 * K + 40] = std::numeric_limits<float>::infinity();
    std::vector<std::vector<float>> outs;
    for (Isa isa : supported_isas()) {
      std::vector<uint8_t> X(xrb * T);
      ASSERT_TRUE(quantize_act_rows(isa, t, x.data(), K, T, K, X.data(), xrb));
      outs.emplace_back(T * N);
      ASSERT_TRUE(matmul(isa, t, W.data(), wrb, K, X.data(), xrb, T, outs.back().data(), N, 0, N));
    }
    for (const auto& o : outs) {
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_FALSE(std::isfinite(o[1 * N + n])) << gguf::traits(t).name;
        EXPECT_EQ(std::memcmp(&o[n], &outs[0][n], 4), 0);
        EXPECT_EQ(std::memcmp(&o[2 * N + n], &outs[0][2 * N + n], 4), 0);
      }
    }
  }
}

TEST(MatmulKernels, Errors) {
  float c[4];
  uint8_t w[64] = {};
  uint8_t x[64] = {};
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q8_1, w, 40, 32, x, 48, 1, c, 4, 0, 1));
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::IQ2_XXS, w, 66, 256, x, 304, 1, c, 4, 0, 1));
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 33, x, 48, 1, c, 4, 0, 1));   // K % 32
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_0, w, 17, 32, x, 48, 1, c, 4, 0, 1));   // row too short
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 32, x, 40, 1, c, 4, 0, 1));   // act row short
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 32, x, 48, 2, c, 1, 0, 2));   // ldc < n1
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 32, x, 48, 1, c, 4, 2, 1));   // n1 < n0
  EXPECT_FALSE(matmul(Isa::scalar, GgmlType::Q4_K, w, 144, 128, x, 304, 1, c, 4, 0, 1));  // K % 256
  EXPECT_TRUE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 32, x, 48, 0, c, 4, 0, 1));    // T = 0: nothing
  EXPECT_TRUE(matmul(Isa::scalar, GgmlType::Q4_0, w, 18, 32, x, 48, 1, c, 4, 1, 1));    // empty range
  EXPECT_FALSE(quantize_act(Isa::scalar, GgmlType::Q4_0, reinterpret_cast<float*>(x), 31, w));
  EXPECT_FALSE(quantize_act(Isa::scalar, GgmlType::TQ1_0, reinterpret_cast<float*>(x), 256, w));
  EXPECT_EQ(quant_act_row_bytes(GgmlType::Q4_K, 512), 2 * sizeof(BlockQA256));
  EXPECT_EQ(quant_act_row_bytes(GgmlType::F16, 5), 20u);
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (!isa_supported(isa)) {
      EXPECT_FALSE(matmul(isa, GgmlType::Q4_0, w, 18, 32, x, 48, 1, c, 4, 0, 1));
    }
  // Float weights: quantize_act copies the row.
  const float in[3] = {1.5f, -2.0f, 3.25f};
  float out[3] = {};
  ASSERT_TRUE(quantize_act(Isa::scalar, GgmlType::BF16, in, 3, out));
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
}

// Real weights from the repository's models (skipped when absent): the first rows of one tensor
// per type, every ISA against the twin, the twin against the oracle.
TEST(MatmulKernels, RealModelTensors) {
  const std::string root = GGFLOW_ROOT;
  int tested = 0;
  std::mt19937 rng(11);
  for (const char* m : {"/models/smollm2-135m-instruct-q4_1.gguf", "/models/gemma3-270m-q4_k_m.gguf"}) {
    if (!std::filesystem::exists(root + m)) continue;
    auto f = gguf::File::open(root + m);
    ASSERT_TRUE(f) << f.error().str();
    std::vector<GgmlType> seen;
    for (const auto& ti : f->tensors()) {
      if (ti.ne.size() != 2 || !matmul_supports(ti.type)) continue;
      if (std::find(seen.begin(), seen.end(), ti.type) != seen.end()) continue;
      seen.push_back(ti.type);
      const int64_t K = static_cast<int64_t>(ti.ne[0]);
      const int64_t N = std::min<int64_t>(static_cast<int64_t>(ti.ne[1]), 45);
      const size_t wrb = row_bytes(ti.type, K), xrb = quant_act_row_bytes(ti.type, K);
      const auto data = f->tensor_data(ti);
      const int64_t T = 6;
      std::vector<float> x(T * K);
      randomize_acts(x.data(), T * K, rng);
      std::vector<float> ref;
      for (Isa isa : supported_isas()) {
        std::vector<uint8_t> X(xrb * T);
        ASSERT_TRUE(quantize_act_rows(isa, ti.type, x.data(), K, T, K, X.data(), xrb));
        std::vector<float> c(T * N);
        ASSERT_TRUE(matmul(isa, ti.type, data.data(), wrb, K, X.data(), xrb, T, c.data(), N, 0, N));
        if (ref.empty()) {
          ref = c;
          std::vector<float> wd(K);
          double err = 0, energy = 0;
          for (int64_t n = 0; n < N; ++n) {
            ASSERT_TRUE(gguf::dequantize(ti.type, data.subspan(n * wrb, wrb), K, wd.data()));
            for (int64_t t = 0; t < T; ++t) {
              double r = 0, e = 0;
              for (int64_t k = 0; k < K; ++k) {
                const double p = static_cast<double>(wd[k]) * x[t * K + k];
                r += p;
                e += p * p;
              }
              err += (c[t * N + n] - r) * (c[t * N + n] - r);
              energy += e;
            }
          }
          std::printf("  %s %-5s %s K=%lld: error vs f64 oracle %.3g\n", m, std::string(gguf::traits(ti.type).name).c_str(),
                      std::string(ti.name).c_str(), static_cast<long long>(K), err / energy);
          EXPECT_LE(err / energy, bound_for(ti.type));
        }
        const bool ok = bits_equal(c.data(), ref.data(), c.size());
        EXPECT_TRUE(ok) << ti.name << " isa=" << to_string(isa);
        tally(ok);
      }
      ++tested;
    }
  }
  if (tested == 0) GTEST_SKIP() << "no model files under " << root << "/models";
}

class Summary : public ::testing::Environment {
 public:
  void TearDown() override { std::printf("%d passed, %d failed\n", g_count.passed, g_count.failed); }
};
const auto* const g_summary = ::testing::AddGlobalTestEnvironment(new Summary);

}  // namespace
}  // namespace ggflow::cpu
