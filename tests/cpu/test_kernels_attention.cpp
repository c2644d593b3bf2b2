// Kernel sweep, part 4: attention over the 32-token block KV cache (cpu/kernels/attention.h).
// Head sizes 17, 40, 64, 80, 256 (and a value size different from the key size), n_keys 1, 31, 32,
// 33, 100, 257, sliding windows, GQA groups of 1 and 3 query rows, shuffled block tables; cache
// slots outside the attended range hold NaN, so a kernel that lets them leak fails.
//  - SIMD == scalar twin by memcmp; a query's bits do not depend on its group, on the batch, or
//    on how the batch's items are split (attention_rows);
//  - the twin against a double-precision reference and against the IR's f32 attention row
//    (ir/attention_row.h itself: sequential dot, mul then add, libm exp) within
//    |out - ref| <= 2e-6 * max|v| per element;
//  - tiles (attention_queries / attention_rows over consecutive tokens): prefill chunks of 40-49
//    tokens after 0-39 cached ones (so key ranges and tiles cross 32-token blocks and tile edges),
//    head sizes 17..300 (300: no transposed path), groups of 1, 3, 4, 8, windows; every query's
//    bits equal the twin on it alone, whatever the tile composition: all at once, scratch for 1,
//    2, 3, 5 queries, shuffled order, interleaved with another kv head, sub-ranges starting
//    anywhere; also arbitrary per-query ranges in one tile (the SDPA case) and empty ranges;
//  - logit soft-capping (Gemma 2: s = softcap * tanh(dot * (scale / softcap))): SIMD == twin by
//    memcmp (single queries, groups, prefill tiles through attention_rows), the twin against a
//    double reference of softcap * tanh(q.k * scale / softcap) and the IR's capped row within the
//    same bound; softcap 0 is the uncapped kernel above;
//  - a decode batch that writes its own new rows (k_new / v_new) leaves the cache and the outputs
//    of kv_write followed by the batch, by memcmp, f32 and f16 caches, split anywhere;
//  - bad inputs (block ids, short tables, small scratch, kv head, a non-finite soft-cap) are errors.
// Also times decode at 4096 keys and a 256-token prefill per ISA (printed, not asserted).
// Prints "N passed, N failed".
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/attention.h"
#include "ir/attention_row.h"  // the IR's attention row (header-only): the math oracle itself
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::same_bits;

sweep::Tally tally("test_kernels_attention");

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A cache with its storage, every slot NaN until written.
struct Cache {
  std::vector<float> k, v;
  KvCache view;
  Cache(int64_t blocks, int64_t kv_heads, int64_t S, int64_t Sv)
      : k(blocks * kv_heads * kKvBlock * S, kNaN), v(blocks * kv_heads * kKvBlock * Sv, kNaN) {
    view = {k.data(), v.data(), blocks, kv_heads, S, Sv};
  }
  float* krow(int64_t block, int64_t h, int64_t slot) {
    return k.data() + ((block * view.kv_heads + h) * kKvBlock + slot) * view.head_size;
  }
  float* vrow(int64_t block, int64_t h, int64_t slot) {
    return v.data() + ((block * view.kv_heads + h) * kKvBlock + slot) * view.v_size;
  }
};

// The IR's attention row (ir::attention_score + ir::attend_row, f32) and a double reference, for
// keys [lo, hi); softcap != 0: scores softcap * tanh(q.k * scale / softcap).
void references(Cache& c, const std::vector<int32_t>& table, int64_t kvh, const float* q, int64_t lo, int64_t hi,
                float scale, std::vector<float>& ir, std::vector<double>& ref, float softcap = 0.0f) {
  const int64_t S = c.view.head_size, Sv = c.view.v_size, n = hi - lo;
  auto krow = [&](int64_t j) { const int64_t p = lo + j; return c.krow(table[p / kKvBlock], kvh, p % kKvBlock); };
  auto vrow = [&](int64_t j) { const int64_t p = lo + j; return c.vrow(table[p / kKvBlock], kvh, p % kKvBlock); };
  std::vector<float> sc(n);
  for (int64_t j = 0; j < n; ++j) sc[j] = ir::attention_score(q, krow(j), S, scale, softcap);
  ir.assign(Sv, 0.0f);
  ir::attend_row(sc, vrow, Sv, ir.data());
  std::vector<double> scd(n);
  double mxd = -INFINITY, sumd = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    double sd = 0.0;
    for (int64_t d = 0; d < S; ++d) sd += static_cast<double>(q[d]) * krow(j)[d];
    const double c_ = softcap;
    scd[j] = softcap != 0.0f ? c_ * std::tanh(sd * scale / c_) : sd * scale;
    mxd = std::max(mxd, scd[j]);
  }
  for (int64_t j = 0; j < n; ++j) scd[j] = std::exp(scd[j] - mxd), sumd += scd[j];
  ref.assign(Sv, 0.0);
  for (int64_t d = 0; d < Sv; ++d) {
    double accd = 0.0;
    for (int64_t j = 0; j < n; ++j) accd += scd[j] * vrow(j)[d];
    ref[d] = n ? accd / sumd : 0.0;
  }
}

// Keys ~ 0.5·N(0,1) (q.k of order sqrt(S) * 0.5: softmax weights from peaked to flat) and values
// ~ N(0,1) at positions [lo, n_keys) of kv heads [h0, h1).
void fill_kv(Cache& c, const std::vector<int32_t>& table, int64_t h0, int64_t h1, int64_t lo, int64_t n_keys,
             std::mt19937& rng, std::normal_distribution<float>& nd01) {
  for (int64_t p = lo; p < n_keys; ++p)
    for (int64_t h = h0; h < h1; ++h) {
      float* kr = c.krow(table[p / kKvBlock], h, p % kKvBlock);
      float* vr = c.vrow(table[p / kKvBlock], h, p % kKvBlock);
      for (int64_t d = 0; d < c.view.head_size; ++d) kr[d] = 0.5f * nd01(rng);
      for (int64_t d = 0; d < c.view.v_size; ++d) vr[d] = nd01(rng);
    }
}

// The twin's worst error over nq query rows (row i at q + i*qs, output row at twin + i*os), relative
// to the largest |v| in range: against the double reference and against the IR's f32 row.
std::pair<double, double> twin_errors(Cache& c, const std::vector<int32_t>& table, int64_t kvh, const float* q, int64_t qs,
                                      int64_t nq, int64_t lo, int64_t n_keys, float scale, const std::vector<float>& twin,
                                      int64_t os, float softcap = 0.0f) {
  const int64_t Sv = c.view.v_size;
  double vmax = 0;
  for (int64_t p = lo; p < n_keys; ++p)
    for (int64_t d = 0; d < Sv; ++d) vmax = std::max<double>(vmax, std::fabs(c.vrow(table[p / kKvBlock], kvh, p % kKvBlock)[d]));
  double e_ref = 0, e_ir = 0;
  for (int64_t i = 0; i < nq; ++i) {
    std::vector<float> ir;
    std::vector<double> ref;
    references(c, table, kvh, q + i * qs, lo, n_keys, scale, ir, ref, softcap);
    for (int64_t d = 0; d < Sv; ++d) {
      e_ref = std::max(e_ref, std::fabs(twin[i * os + d] - ref[d]) / vmax);
      e_ir = std::max(e_ir, std::fabs(twin[i * os + d] - static_cast<double>(ir[d])) / vmax);
    }
  }
  return {e_ref, e_ir};
}

TEST(KernelsAttention, Sweep) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  double worst_ref = 0, worst_ir = 0;
  struct Dims {
    int64_t S, Sv;
  };
  for (Dims dims : {Dims{64, 64}, Dims{80, 80}, Dims{256, 256}, Dims{40, 40}, Dims{17, 17}, Dims{64, 48}})
    for (int64_t n_keys : {1, 31, 32, 33, 100, 257})
      for (int64_t window : {0, 1, 16, 33})
        for (int64_t nq : {1, 3}) {
          const int64_t S = dims.S, Sv = dims.Sv, kv_heads = 2, kvh = 1;
          const int64_t nblk = (n_keys + kKvBlock - 1) / kKvBlock, blocks = nblk + 3;
          Cache c(blocks, kv_heads, S, Sv);
          std::vector<int32_t> table(blocks);
          std::iota(table.begin(), table.end(), 0);
          std::shuffle(table.begin(), table.end(), rng);
          table.resize(nblk);
          const int64_t lo = window > 0 ? std::max<int64_t>(0, n_keys - window) : 0;
          fill_kv(c, table, 0, kv_heads, lo, n_keys, rng, nd01);
          const int64_t qs = S + 3, os = Sv + 1;
          std::vector<float> q(nq * qs);
          for (float& f : q) f = nd01(rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(S));
          AttentionQuery a;
          a.q = q.data(), a.q_stride = qs, a.out_stride = os, a.nq = nq, a.kv_head = kvh;
          a.block_table = table.data(), a.table_len = nblk, a.n_keys = n_keys, a.window = window, a.scale = scale;
          std::vector<float> scratch(attention_scratch_floats(nq, n_keys));
          auto run = [&](Isa isa, std::vector<float>& out) {
            out.assign(nq * os, -7.0f);
            a.out = out.data();
            auto st = attention(isa, c.view, a, scratch.data(), static_cast<int64_t>(scratch.size()));
            return st.ok();
          };
          const std::string tag = "attention S=" + std::to_string(S) + " Sv=" + std::to_string(Sv) + " n_keys=" +
                                  std::to_string(n_keys) + " window=" + std::to_string(window) + " nq=" + std::to_string(nq);
          std::vector<float> twin;
          tally.check(run(Isa::scalar, twin), tag + ": scalar failed");
          // accuracy: per query, against double and the IR's f32 row
          auto [e_ref, e_ir] = twin_errors(c, table, kvh, q.data(), qs, nq, lo, n_keys, scale, twin, os);
          worst_ref = std::max(worst_ref, e_ref), worst_ir = std::max(worst_ir, e_ir);
          tally.check(e_ref <= 2e-6, tag + ": twin vs double " + std::to_string(e_ref));
          tally.check(e_ir <= 2e-6, tag + ": twin vs IR " + std::to_string(e_ir));
          for (Isa isa : supported_isas()) {
            std::vector<float> out;
            tally.check(run(isa, out) && same_bits(out, twin), tag + " " + isa_name(isa) + " != twin");
            // each query row alone gives the same bits as inside its group
            if (nq > 1) {
              bool same = true;
              for (int64_t i = 0; i < nq; ++i) {
                AttentionQuery one = a;
                one.q = q.data() + i * qs, one.nq = 1;
                std::vector<float> o1(Sv, -7.0f);
                one.out = o1.data();
                same = same && attention(isa, c.view, one, scratch.data(), static_cast<int64_t>(scratch.size())).ok() &&
                       same_bits(o1.data(), twin.data() + i * os, Sv);
              }
              tally.check(same, tag + " " + isa_name(isa) + " alone != in group");
            }
          }
        }
  std::printf("  attention: max |out - ref| / max|v|: twin vs double %.3g, twin vs IR f32 %.3g (bound 2e-6)\n",
              worst_ref, worst_ir);
}

// Logit soft-capping: (scale, softcap) pairs from Gemma 2's (1/sqrt(S), 50: barely capped) to
// strongly capped (scale 1, softcap 2: q.k up to ~10 squeezed into (-2, 2)).
TEST(KernelsAttention, SoftCapSweep) {
  std::mt19937 rng(33);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  double worst_ref = 0, worst_ir = 0;
  struct Cap {
    bool unit_scale;  // scale 1 instead of 1/sqrt(S)
    float softcap;
  };
  for (int64_t S : {64, 80, 256, 17})
    for (int64_t n_keys : {1, 33, 100, 257})
      for (int64_t window : {0, 16})
        for (int64_t nq : {1, 3})
          for (Cap cap : {Cap{false, 50.0f}, Cap{false, 0.5f}, Cap{true, 2.0f}, Cap{true, 8.0f}}) {
            const int64_t Sv = S, kv_heads = 2, kvh = 0;
            const int64_t nblk = (n_keys + kKvBlock - 1) / kKvBlock, blocks = nblk + 2;
            Cache c(blocks, kv_heads, S, Sv);
            std::vector<int32_t> table(blocks);
            std::iota(table.begin(), table.end(), 0);
            std::shuffle(table.begin(), table.end(), rng);
            table.resize(nblk);
            const int64_t lo = window > 0 ? std::max<int64_t>(0, n_keys - window) : 0;
            fill_kv(c, table, kvh, kvh + 1, lo, n_keys, rng, nd01);
            const int64_t qs = S + 1, os = Sv + 2;
            std::vector<float> q(nq * qs);
            for (float& f : q) f = nd01(rng);
            const float scale = cap.unit_scale ? 1.0f : 1.0f / std::sqrt(static_cast<float>(S));
            AttentionQuery a;
            a.q = q.data(), a.q_stride = qs, a.out_stride = os, a.nq = nq, a.kv_head = kvh;
            a.block_table = table.data(), a.table_len = nblk, a.n_keys = n_keys, a.window = window;
            a.scale = scale, a.softcap = cap.softcap;
            std::vector<float> scratch(attention_scratch_floats(nq, n_keys));
            auto run = [&](Isa isa, const AttentionQuery& x, std::vector<float>& out) {
              out.assign(x.nq * os, -7.0f);
              AttentionQuery y = x;
              y.out = out.data();
              return attention(isa, c.view, y, scratch.data(), static_cast<int64_t>(scratch.size())).ok();
            };
            const std::string tag = "softcap " + std::to_string(cap.softcap) + " scale " + std::to_string(scale) +
                                    " S=" + std::to_string(S) + " n_keys=" + std::to_string(n_keys) +
                                    " window=" + std::to_string(window) + " nq=" + std::to_string(nq);
            std::vector<float> twin, uncapped;
            tally.check(run(Isa::scalar, a, twin), tag + ": scalar failed");
            AttentionQuery off = a;
            off.softcap = 0.0f;
            tally.check(run(Isa::scalar, off, uncapped), tag + ": scalar uncapped failed");
            if (n_keys - lo > 1 && cap.softcap < 50.0f)
              tally.check(!same_bits(twin, uncapped), tag + ": the soft-cap changes nothing");
            auto [e_ref, e_ir] = twin_errors(c, table, kvh, q.data(), qs, nq, lo, n_keys, scale, twin, os, cap.softcap);
            worst_ref = std::max(worst_ref, e_ref), worst_ir = std::max(worst_ir, e_ir);
            tally.check(e_ref <= 2e-6, tag + ": twin vs double " + std::to_string(e_ref));
            tally.check(e_ir <= 2e-6, tag + ": twin vs IR " + std::to_string(e_ir));
            for (Isa isa : supported_isas()) {
              std::vector<float> out;
              tally.check(run(isa, a, out) && same_bits(out, twin), tag + " " + isa_name(isa) + " != twin");
              bool same = true;  // each row alone == in its group
              for (int64_t i = 0; nq > 1 && i < nq; ++i) {
                AttentionQuery one = a;
                one.q = q.data() + i * qs, one.nq = 1;
                std::vector<float> o1;
                same = same && run(isa, one, o1) && same_bits(o1.data(), twin.data() + i * os, Sv);
              }
              tally.check(same, tag + " " + isa_name(isa) + " alone != in group");
            }
          }
  std::printf("  soft-capped attention: max |out - ref| / max|v|: twin vs double %.3g, twin vs IR f32 %.3g (bound 2e-6)\n",
              worst_ref, worst_ir);
}

// Two sequences in one cache (the PagedAttention case), 3 q heads per kv head.
TEST(KernelsAttention, BatchSplitsAndComposition) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, kv_heads = 2, q_heads = 6, blocks = 8;
  Cache c(blocks, kv_heads, S, S);
  const std::vector<int32_t> block_indices = {5, 1, 7, /* seq 1: */ 2, 0};
  const std::vector<int32_t> block_begins = {0, 3, 5};
  // seq 0: positions 0..72, tokens at 70, 71, 72; seq 1: positions 0..40, tokens at 39, 40
  const std::vector<int32_t> seq = {0, 0, 0, 1, 1}, positions = {70, 71, 72, 39, 40};
  const int64_t T = 5;
  for (int s = 0; s < 2; ++s)
    for (int64_t p = 0; p <= (s == 0 ? 72 : 40); ++p) {
      std::vector<float> k(kv_heads * S), v(kv_heads * S);
      for (float& f : k) f = 0.5f * nd01(rng);
      for (float& f : v) f = nd01(rng);
      auto st = kv_write(Isa::scalar, c.view, block_indices.data() + block_begins[s], block_begins[s + 1] - block_begins[s], p,
                         k.data(), v.data());
      tally.check(st.ok(), "kv_write");
      const float* back = c.krow(block_indices[block_begins[s] + p / kKvBlock], 1, p % kKvBlock);
      tally.check(same_bits(back, k.data() + S, S), "kv_write lands in the block layout");
    }
  std::vector<float> q(T * q_heads * S);
  for (float& f : q) f = nd01(rng);
  for (int64_t window : {0, 20}) {
    AttentionBatch b;
    b.q = q.data(), b.q_stride = q_heads * S, b.out_stride = q_heads * S, b.tokens = T, b.q_heads = q_heads;
    b.positions = positions.data(), b.seq = seq.data(), b.block_indices = block_indices.data();
    b.block_begins = block_begins.data(), b.n_seqs = 2, b.window = window, b.scale = 0.125f;
    std::vector<float> scratch(attention_rows_scratch_floats(c.view, b, 73));
    const int64_t items = attention_items(c.view, b), sf = static_cast<int64_t>(scratch.size());
    std::vector<float> twin(T * q_heads * S);
    b.out = twin.data();
    tally.check(attention_rows(Isa::scalar, c.view, b, 0, items, scratch.data(), sf).ok(), "batch scalar");
    for (Isa isa : supported_isas()) {
      std::vector<float> out(T * q_heads * S, -1.0f);
      b.out = out.data();
      tally.check(attention_rows(isa, c.view, b, 0, items, scratch.data(), sf).ok() && same_bits(out, twin),
                  "batch " + isa_name(isa) + " != twin, window " + std::to_string(window));
      for (int64_t k : {1, 3, 4, 7, 9}) {  // split the items in two ranges (two "threads")
        std::vector<float> split(T * q_heads * S, -1.0f);
        b.out = split.data();
        bool ok = attention_rows(isa, c.view, b, 0, k, scratch.data(), sf).ok() &&
                  attention_rows(isa, c.view, b, k, items, scratch.data(), sf).ok();
        tally.check(ok && same_bits(split, twin), "batch " + isa_name(isa) + " split at " + std::to_string(k));
      }
      // each token alone (a batch of one) == the same token inside the batch
      bool same = true;
      for (int64_t t = 0; t < T; ++t) {
        AttentionBatch one = b;
        std::vector<float> o(q_heads * S);
        one.q = q.data() + t * q_heads * S, one.out = o.data(), one.tokens = 1;
        one.positions = positions.data() + t, one.seq = seq.data() + t;
        same = same && attention_rows(isa, c.view, one, 0, kv_heads, scratch.data(), sf).ok() &&
               same_bits(o.data(), twin.data() + t * q_heads * S, static_cast<int64_t>(o.size()));
      }
      tally.check(same, "batch " + isa_name(isa) + ": token alone != in batch, window " + std::to_string(window));
    }
  }
}

// A decode batch that brings its new rows (AttentionBatch::k_new / v_new): each item writes its
// token's rows of its kv head, then attends. The cache and the outputs are those of kv_write
// followed by the batch, by memcmp, on every ISA, f32 and f16 caches, the items split anywhere.
// Two tokens of one sequence, one of the two pointers, or row parts are refused.
TEST(KernelsAttention, DecodeBatchWritesItsRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, kv_heads = 3, q_heads = 9, blocks = 12, T = 4;
  // sequence s's table and its one new token's position (at a block's first slot, mid-block, last)
  const std::vector<int32_t> block_indices = {3, 7, 0, /* 1 */ 5, /* 2 */ 9, 1, 10, 2, /* 3 */ 4, 6};
  const std::vector<int32_t> block_begins = {0, 3, 4, 8, 10};
  const std::vector<int32_t> seq = {0, 1, 2, 3}, positions = {64, 17, 127, 31};
  std::vector<float> q(T * q_heads * S), knew(T * kv_heads * S), vnew(T * kv_heads * S);
  for (float& f : q) f = nd01(rng);
  for (float& f : knew) f = 0.5f * nd01(rng);
  for (float& f : vnew) f = nd01(rng);
  for (bool half : {false, true}) {
    // the cache before the step: positions < each token's, as kv_write stores them
    std::vector<float> k0(blocks * kv_heads * kKvBlock * S, kNaN), v0(k0.size(), kNaN);
    std::vector<uint16_t> k16(k0.size(), 0x7E00), v16(k0.size(), 0x7E00);
    KvCache c0 = half ? KvCache{nullptr, nullptr, blocks, kv_heads, S, S, k16.data(), v16.data()}
                      : KvCache{k0.data(), v0.data(), blocks, kv_heads, S, S};
    for (int64_t t = 0; t < T; ++t)
      for (int32_t p = 0; p < positions[t]; ++p) {
        std::vector<float> k(kv_heads * S), v(kv_heads * S);
        for (float& f : k) f = 0.5f * nd01(rng);
        for (float& f : v) f = nd01(rng);
        tally.check(kv_write(Isa::scalar, c0, block_indices.data() + block_begins[t], block_begins[t + 1] - block_begins[t], p,
                             k.data(), v.data()).ok(), "decode batch: kv_write");
      }
    AttentionBatch b;
    b.q = q.data(), b.q_stride = q_heads * S, b.out_stride = q_heads * S, b.tokens = T, b.q_heads = q_heads;
    b.positions = positions.data(), b.seq = seq.data(), b.block_indices = block_indices.data();
    b.block_begins = block_begins.data(), b.n_seqs = T, b.scale = 0.125f;
    std::vector<float> scratch(attention_rows_scratch_floats(c0, b, 128));
    const int64_t items = attention_items(c0, b), sf = static_cast<int64_t>(scratch.size());
    const std::string tag = half ? "f16" : "f32";
    for (Isa isa : supported_isas()) {
      // reference: kv_write for every token, then the batch
      auto k1 = k0, v1 = v0;
      auto k1h = k16, v1h = v16;
      KvCache c1 = half ? KvCache{nullptr, nullptr, blocks, kv_heads, S, S, k1h.data(), v1h.data()}
                        : KvCache{k1.data(), v1.data(), blocks, kv_heads, S, S};
      for (int64_t t = 0; t < T; ++t)
        tally.check(kv_write(isa, c1, block_indices.data() + block_begins[t], block_begins[t + 1] - block_begins[t], positions[t],
                             knew.data() + t * kv_heads * S, vnew.data() + t * kv_heads * S).ok(), "decode batch: new rows");
      std::vector<float> want(T * q_heads * S, -1.0f);
      b.out = want.data();
      tally.check(attention_rows(isa, c1, b, 0, items, scratch.data(), sf).ok(), "decode batch: reference " + isa_name(isa));
      for (int64_t split : {int64_t{0}, int64_t{1}, int64_t{5}, items - 1, items}) {
        auto k2 = k0, v2 = v0;
        auto k2h = k16, v2h = v16;
        KvCache c2 = half ? KvCache{nullptr, nullptr, blocks, kv_heads, S, S, k2h.data(), v2h.data()}
                          : KvCache{k2.data(), v2.data(), blocks, kv_heads, S, S};
        AttentionBatch w = b;
        w.k_new = knew.data(), w.v_new = vnew.data();
        std::vector<float> got(T * q_heads * S, -2.0f);
        w.out = got.data();
        const bool ok = attention_rows(isa, c2, w, 0, split, scratch.data(), sf).ok() &&
                        attention_rows(isa, c2, w, split, items, scratch.data(), sf).ok();
        const bool same_cache = half ? k2h == k1h && v2h == v1h
                                     : same_bits(k2, k1) && same_bits(v2, v1);
        tally.check(ok && same_bits(got, want) && same_cache,
                    "decode batch " + tag + " " + isa_name(isa) + ": writing in the batch != kv_write first, split at " +
                        std::to_string(split));
      }
    }
    // refusals: nothing is written
    AttentionBatch bad = b;
    std::vector<float> out(T * q_heads * S);
    bad.out = out.data(), bad.k_new = knew.data();
    tally.check(!attention_rows(Isa::scalar, c0, bad, 0, items, scratch.data(), sf).ok(), "k_new without v_new accepted");
    bad.v_new = vnew.data(), bad.row_parts = 2;
    tally.check(!attention_rows(Isa::scalar, c0, bad, 0, items * 2, scratch.data(), sf).ok(), "k_new with row parts accepted");
    const std::vector<int32_t> two = {0, 0, 2, 3}, two_pos = {64, 65, 127, 31};
    bad.row_parts = 1, bad.seq = two.data(), bad.positions = two_pos.data();
    tally.check(!attention_rows(Isa::scalar, c0, bad, 0, items, scratch.data(), sf).ok(),
                "k_new with two tokens of one sequence accepted");
  }
}

// queue_rows (side prefetch of the next layer's rows): exactly the K and V rows each (token, kv
// head) reads, once per pair whatever its row parts, a window's first keys left out, and nothing
// for a block id outside the cache or a sequence outside the batch; side_prefetch_step issues
// each queued line once.
TEST(KernelsAttention, QueueRowsQueuesWhatTheItemsRead) {
  const int64_t S = 64, kv_heads = 3, blocks = 12;
  std::vector<float> k(blocks * kv_heads * kKvBlock * S), v(k.size());
  const KvCache c{k.data(), v.data(), blocks, kv_heads, S, S};
  const std::vector<int32_t> block_indices = {3, 7, 0, /* 1 */ 5, /* 2 */ 99};  // 99: outside the cache
  const std::vector<int32_t> block_begins = {0, 3, 4, 5};
  const std::vector<int32_t> seq = {0, 1, 2, 5}, positions = {64, 17, 3, 0};  // sequence 5: outside the batch
  AttentionBatch b;
  b.tokens = 4, b.q_heads = 9, b.positions = positions.data(), b.seq = seq.data();
  b.block_indices = block_indices.data(), b.block_begins = block_begins.data(), b.n_seqs = 3;
  using Ranges = std::vector<std::pair<const char*, int64_t>>;
  const auto queued = [](const SidePrefetch& q) {
    Ranges r;
    for (int i = 0; i < q.count; ++i) r.emplace_back(q.ranges[i].p, q.ranges[i].bytes);
    return r;
  };
  const auto rows = [&](int64_t block, int64_t kvh, int64_t s0, int64_t s1, Ranges* r) {
    for (bool is_k : {true, false}) r->emplace_back(c.bytes_at(is_k, block, kvh, s0), c.rows_bytes(is_k, s1 - s0));
  };
  for (int64_t parts : {1, 3}) {
    b.row_parts = parts;
    SidePrefetch q;
    queue_rows(c, b, 0, attention_items(c, b), q);
    Ranges want;
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) rows(3, kvh, 0, 32, &want), rows(7, kvh, 0, 32, &want), rows(0, kvh, 0, 1, &want);
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) rows(5, kvh, 0, 18, &want);
    tally.check(queued(q) == want, "queue_rows: row parts " + std::to_string(parts) + " queue other rows than the items read");
  }
  {  // a window of 40 keys at position 64: keys 25..64
    b.row_parts = 1, b.window = 40;
    SidePrefetch q;
    queue_rows(c, b, 0, 1, q);  // token 0, kv head 0
    Ranges want;
    rows(3, 0, 25, 32, &want), rows(7, 0, 0, 32, &want), rows(0, 0, 0, 1, &want);
    tally.check(queued(q) == want, "queue_rows: a window's rows");
    int64_t lines = 0, bytes = 0;
    for (const auto& r : want) bytes += (r.second + 63) / 64;
    while (!q.empty()) side_prefetch_step(q, 3), lines += 3;
    tally.check(lines >= bytes && lines < bytes + 3, "side_prefetch_step: " + std::to_string(lines) + " lines issued for " +
                                                         std::to_string(bytes) + " queued");
    b.window = 0;
  }
  SidePrefetch full;
  for (int i = 0; i < SidePrefetch::kMaxRanges + 5; ++i) full.add(k.data(), 64);
  tally.check(full.count == SidePrefetch::kMaxRanges, "SidePrefetch keeps at most kMaxRanges");
  full.clear();
  tally.check(full.empty() && full.count == 0, "SidePrefetch::clear empties the queue");
}

// A prefill batch (the PagedAttention case with many tokens per sequence): seq 0 new at positions
// 0..69, seq 1 at 12..56 after 12 cached; attention_rows tiles consecutive tokens of a sequence.
TEST(KernelsAttention, PrefillBatch) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  for (int64_t S : {64, 80})
    for (int64_t group : {1, 3}) {
      const int64_t kv_heads = 2, q_heads = kv_heads * group, blocks = 6;
      Cache c(blocks, kv_heads, S, S);
      const std::vector<int32_t> block_indices = {3, 0, 5, /* seq 1: */ 1, 4};
      const std::vector<int32_t> block_begins = {0, 3, 5};
      std::vector<int32_t> seq, positions;
      for (int32_t p = 0; p < 70; ++p) seq.push_back(0), positions.push_back(p);
      for (int32_t p = 12; p < 57; ++p) seq.push_back(1), positions.push_back(p);
      const int64_t T = static_cast<int64_t>(seq.size());
      for (int s = 0; s < 2; ++s)
        for (int64_t p = 0; p < (s == 0 ? 70 : 57); ++p) {
          std::vector<float> k(kv_heads * S), v(kv_heads * S);
          for (float& f : k) f = 0.5f * nd01(rng);
          for (float& f : v) f = nd01(rng);
          tally.check(kv_write(Isa::scalar, c.view, block_indices.data() + block_begins[s], block_begins[s + 1] - block_begins[s], p,
                               k.data(), v.data())
                          .ok(),
                      "prefill kv_write");
        }
      std::vector<float> q(T * q_heads * S);
      for (float& f : q) f = nd01(rng);
      for (int64_t window : {0, 20, 33}) {
        AttentionBatch b;
        b.q = q.data(), b.q_stride = q_heads * S, b.out_stride = q_heads * S, b.tokens = T, b.q_heads = q_heads;
        b.positions = positions.data(), b.seq = seq.data(), b.block_indices = block_indices.data();
        b.block_begins = block_begins.data(), b.n_seqs = 2, b.window = window, b.scale = 0.125f;
        std::vector<float> scratch(attention_rows_scratch_floats(c.view, b, 70));
        const int64_t items = attention_items(c.view, b), sf = static_cast<int64_t>(scratch.size());
        const int64_t one = attention_scratch_floats(group, 70);  // a single token's scratch: tiles of one
        std::vector<float> twin(T * q_heads * S);
        b.out = twin.data();
        const std::string tag = "prefill S=" + std::to_string(S) + " group=" + std::to_string(group) + " window=" + std::to_string(window);
        tally.check(attention_rows(Isa::scalar, c.view, b, 0, items, scratch.data(), sf).ok(), tag + ": scalar");
        for (Isa isa : supported_isas()) {
          std::vector<float> out(T * q_heads * S, -1.0f);
          b.out = out.data();
          tally.check(attention_rows(isa, c.view, b, 0, items, scratch.data(), sf).ok() && same_bits(out, twin),
                      tag + " " + isa_name(isa) + " != twin");
          out.assign(out.size(), -1.0f);
          tally.check(attention_rows(isa, c.view, b, 0, items, scratch.data(), one).ok() && same_bits(out, twin),
                      tag + " " + isa_name(isa) + " with one token's scratch != twin");
          if (isa == Isa::scalar) continue;  // the twin runs one token at a time: no tiles
          for (int64_t k : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{139}, int64_t{140}, int64_t{141}, items - 1}) {
            std::vector<float> split(T * q_heads * S, -1.0f);
            b.out = split.data();
            bool ok = attention_rows(isa, c.view, b, 0, k, scratch.data(), sf).ok() &&
                      attention_rows(isa, c.view, b, k, items, scratch.data(), sf).ok();
            tally.check(ok && same_bits(split, twin), tag + " " + isa_name(isa) + " split at " + std::to_string(k));
          }
          bool same = true;
          for (int64_t t = 0; t < T; ++t) {
            AttentionBatch alone = b;
            std::vector<float> o(q_heads * S);
            alone.q = q.data() + t * q_heads * S, alone.out = o.data(), alone.tokens = 1;
            alone.positions = positions.data() + t, alone.seq = seq.data() + t;
            same = same && attention_rows(isa, c.view, alone, 0, kv_heads, scratch.data(), sf).ok() &&
                   same_bits(o.data(), twin.data() + t * q_heads * S, static_cast<int64_t>(o.size()));
          }
          tally.check(same, tag + " " + isa_name(isa) + ": token alone != in batch");
        }
      }
    }
}

// Tiles: consecutive tokens of one sequence on one kv head (a prefill chunk after `past` cached
// tokens), every composition giving each query the twin's bits on it alone.
TEST(KernelsAttention, Tiles) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  struct Dims {
    int64_t S, Sv;
  };
  for (Dims dims : {Dims{64, 64}, Dims{128, 128}, Dims{256, 256}, Dims{80, 80}, Dims{96, 96}, Dims{40, 40}, Dims{17, 17},
                    Dims{64, 48}, Dims{300, 300}})
    for (int64_t nq : {1, 3, 4, 8})
      for (int64_t window : {0, 1, 16, 33, 100}) {
        const int64_t S = dims.S, Sv = dims.Sv, kv_heads = 2;
        const int64_t past = static_cast<int64_t>(rng() % 40), T = 40 + static_cast<int64_t>(rng() % 10), total = past + T;
        const int64_t nblk = (total + kKvBlock - 1) / kKvBlock, blocks = nblk + 2;
        Cache c(blocks, kv_heads, S, Sv);
        std::vector<int32_t> table(blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);  // the first nblk entries are the table
        for (int64_t p = 0; p < total; ++p)
          for (int64_t h = 0; h < kv_heads; ++h) {
            float* kr = c.krow(table[p / kKvBlock], h, p % kKvBlock);
            float* vr = c.vrow(table[p / kKvBlock], h, p % kKvBlock);
            for (int64_t d = 0; d < S; ++d) kr[d] = 0.5f * nd01(rng);
            for (int64_t d = 0; d < Sv; ++d) vr[d] = nd01(rng);
          }
        // token t, q head h (kv head h / nq) at q + t*qs + h*S; out likewise with Sv
        const int64_t qs = kv_heads * nq * S + 5, os = kv_heads * nq * Sv + 3;
        std::vector<float> q(T * qs);
        for (float& f : q) f = nd01(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(S));
        auto query = [&](int64_t t, int64_t kvh, float* out) {
          AttentionQuery a;
          a.q = q.data() + t * qs + kvh * nq * S, a.q_stride = S, a.out = out + t * os + kvh * nq * Sv, a.out_stride = Sv;
          a.nq = nq, a.kv_head = kvh, a.block_table = table.data(), a.table_len = nblk;
          a.n_keys = past + t + 1, a.window = window, a.scale = scale;
          return a;
        };
        const int64_t full = attention_queries_scratch_floats(kAttentionTile, nq, total);
        std::vector<float> scratch(full);
        // the twin, each query alone
        std::vector<float> twin(T * os, -7.0f);
        bool ok = true;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t kvh = 0; kvh < kv_heads; ++kvh)
            ok = ok && attention(Isa::scalar, c.view, query(t, kvh, twin.data()), scratch.data(), full).ok();
        const std::string tag = "tiles S=" + std::to_string(S) + " Sv=" + std::to_string(Sv) + " nq=" + std::to_string(nq) +
                                " window=" + std::to_string(window) + " past=" + std::to_string(past) + " T=" + std::to_string(T);
        tally.check(ok, tag + ": twin failed");
        // only kv head 1's outputs where a run computes kv head 1 alone
        auto head1 = [&](const std::vector<float>& o) {
          bool same = true;
          for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nq; ++h)
              same = same && same_bits(o.data() + t * os + (nq + h) * Sv, twin.data() + t * os + (nq + h) * Sv, Sv);
          return same;
        };
        for (Isa isa : supported_isas()) {
          if (isa == Isa::scalar) continue;  // the twin runs one query at a time: no tiles
          const std::string it = tag + " " + isa_name(isa);
          auto run = [&](const std::vector<AttentionQuery>& a, int64_t sf) {
            return attention_queries(isa, c.view, a.data(), static_cast<int64_t>(a.size()), scratch.data(), sf).ok();
          };
          std::vector<float> out;
          std::vector<AttentionQuery> a;
          auto reset = [&] { out.assign(T * os, -7.0f); a.clear(); };
          // all tokens of kv head 1 at once, full tiles and scratch for 1, 2, 3, 5 queries
          for (int64_t fit : {kAttentionTile, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}}) {
            reset();
            for (int64_t t = 0; t < T; ++t) a.push_back(query(t, 1, out.data()));
            tally.check(run(a, attention_queries_scratch_floats(fit, nq, total)) && head1(out),
                        it + ": tiles with scratch for " + std::to_string(fit) + " != twin");
          }
          // shuffled order
          reset();
          for (int64_t t = 0; t < T; ++t) a.push_back(query(t, 1, out.data()));
          std::shuffle(a.begin(), a.end(), rng);
          tally.check(run(a, full) && head1(out), it + ": shuffled tiles != twin");
          // both kv heads, interleaved per token (every tile one query) and head after head
          reset();
          for (int64_t t = 0; t < T; ++t) a.push_back(query(t, 0, out.data())), a.push_back(query(t, 1, out.data()));
          tally.check(run(a, full) && same_bits(out, twin), it + ": interleaved kv heads != twin");
          reset();
          for (int64_t kvh : {1, 0})
            for (int64_t t = 0; t < T; ++t) a.push_back(query(t, kvh, out.data()));
          tally.check(run(a, full) && same_bits(out, twin), it + ": head after head != twin");
          // sub-ranges starting anywhere (tile edges move), and each token alone
          bool subs = true;
          for (int rep = 0; rep < 4; ++rep) {
            const int64_t t0 = static_cast<int64_t>(rng() % T), t1 = t0 + 1 + static_cast<int64_t>(rng() % (T - t0));
            reset();
            for (int64_t t = t0; t < t1; ++t) a.push_back(query(t, 1, out.data()));
            subs = subs && run(a, full);
            for (int64_t t = t0; t < t1; ++t)
              for (int64_t h = 0; h < nq; ++h)
                subs = subs && same_bits(out.data() + t * os + (nq + h) * Sv, twin.data() + t * os + (nq + h) * Sv, Sv);
          }
          tally.check(subs, it + ": sub-ranges != twin");
          reset();
          bool alone = true;
          for (int64_t t = 0; t < T; ++t) alone = alone && attention(isa, c.view, query(t, 1, out.data()), scratch.data(), full).ok();
          tally.check(alone && head1(out), it + ": token alone != twin");
        }
      }
}

// A soft-capped prefill batch through attention_rows (the PagedAttention case): 70 tokens of one
// sequence after 5 cached, GQA groups of 1 and 4 (4: the transposed score path), windows; the
// SIMD tiles equal the twin bit for bit, each token alone equals the batch, and the batch's
// softcap reaches every query (equal to attention() on the query with that softcap).
TEST(KernelsAttention, SoftCapPrefillBatch) {
  std::mt19937 rng(44);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  for (int64_t S : {64, 40})
    for (int64_t group : {1, 4}) {
      const int64_t kv_heads = 2, q_heads = kv_heads * group, past = 5, T = 70, L = past + T, blocks = 4;
      Cache c(blocks, kv_heads, S, S);
      const std::vector<int32_t> table = {2, 0, 3}, begins = {0, 3};
      std::vector<int32_t> positions(T);
      for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(past + t);
      for (int64_t p = 0; p < L; ++p) {
        std::vector<float> k(kv_heads * S), v(kv_heads * S);
        for (float& f : k) f = 0.5f * nd01(rng);
        for (float& f : v) f = nd01(rng);
        tally.check(kv_write(Isa::scalar, c.view, table.data(), 3, p, k.data(), v.data()).ok(), "softcap prefill kv_write");
      }
      std::vector<float> q(T * q_heads * S);
      for (float& f : q) f = nd01(rng);
      for (int64_t window : {0, 33}) {
        AttentionBatch b;
        b.q = q.data(), b.q_stride = q_heads * S, b.out_stride = q_heads * S, b.tokens = T, b.q_heads = q_heads;
        b.positions = positions.data(), b.block_indices = table.data(), b.block_begins = begins.data();
        b.window = window, b.scale = 0.5f, b.softcap = 3.0f;
        std::vector<float> scratch(attention_rows_scratch_floats(c.view, b, L));
        const int64_t items = attention_items(c.view, b), sf = static_cast<int64_t>(scratch.size());
        const std::string tag = "softcap prefill S=" + std::to_string(S) + " group=" + std::to_string(group) +
                                " window=" + std::to_string(window);
        std::vector<float> twin(T * q_heads * S, -1.0f);
        b.out = twin.data();
        tally.check(attention_rows(Isa::scalar, c.view, b, 0, items, scratch.data(), sf).ok(), tag + ": scalar");
        // the batch's softcap reaches the queries: token t, kv head 1 == attention() with that softcap
        bool direct = true;
        for (int64_t t : {int64_t{0}, int64_t{31}, T - 1}) {
          AttentionQuery a;
          std::vector<float> o(group * S);
          a.q = q.data() + t * q_heads * S + group * S, a.q_stride = S, a.out = o.data(), a.out_stride = S;
          a.nq = group, a.kv_head = 1, a.block_table = table.data(), a.table_len = 3;
          a.n_keys = positions[t] + 1, a.window = window, a.scale = 0.5f, a.softcap = 3.0f;
          direct = direct && attention(Isa::scalar, c.view, a, scratch.data(), sf).ok() &&
                   same_bits(o.data(), twin.data() + t * q_heads * S + group * S, group * S);
        }
        tally.check(direct, tag + ": batch != attention() with the same softcap");
        for (Isa isa : supported_isas()) {
          std::vector<float> out(T * q_heads * S, -1.0f);
          b.out = out.data();
          tally.check(attention_rows(isa, c.view, b, 0, items, scratch.data(), sf).ok() && same_bits(out, twin),
                      tag + " " + isa_name(isa) + " != twin");
          bool alone = true;
          for (int64_t t = 0; t < T; t += 7) {
            AttentionBatch one = b;
            std::vector<float> o(q_heads * S);
            one.q = q.data() + t * q_heads * S, one.out = o.data(), one.tokens = 1, one.positions = positions.data() + t;
            alone = alone && attention_rows(isa, c.view, one, 0, kv_heads, scratch.data(), sf).ok() &&
                    same_bits(o.data(), twin.data() + t * q_heads * S, q_heads * S);
          }
          tally.check(alone, tag + " " + isa_name(isa) + ": token alone != in batch");
        }
      }
    }
}

// One tile whose queries have arbitrary ranges (not nested: the SDPA case), some empty.
TEST(KernelsAttention, TileArbitraryRanges) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  for (int64_t S : {64, 40, 256})
    for (int64_t nq : {1, 2, 4})
      for (int rep = 0; rep < 3; ++rep) {
        const int64_t Sv = S, kv_heads = 1, nblk = 5, blocks = 6, total = nblk * kKvBlock;
        Cache c(blocks, kv_heads, S, Sv);
        std::vector<int32_t> table = {4, 0, 5, 2, 1};
        for (int64_t p = 0; p < total; ++p) {
          float* kr = c.krow(table[p / kKvBlock], 0, p % kKvBlock);
          float* vr = c.vrow(table[p / kKvBlock], 0, p % kKvBlock);
          for (int64_t d = 0; d < S; ++d) kr[d] = 0.5f * nd01(rng);
          for (int64_t d = 0; d < Sv; ++d) vr[d] = nd01(rng);
        }
        const int64_t Qn = 12;
        std::vector<float> q(Qn * nq * S);
        for (float& f : q) f = nd01(rng);
        std::vector<AttentionQuery> a(Qn);
        std::vector<float> twin(Qn * nq * Sv, -7.0f), out;
        for (int64_t i = 0; i < Qn; ++i) {
          a[i].q = q.data() + i * nq * S, a[i].q_stride = S, a[i].out_stride = Sv, a[i].nq = nq;
          a[i].block_table = table.data(), a[i].table_len = nblk;
          a[i].n_keys = i == 3 ? 0 : static_cast<int64_t>(rng() % (total + 1));
          a[i].window = rng() % 2 ? 0 : 1 + static_cast<int64_t>(rng() % 70);
          a[i].scale = 0.1f + 0.01f * static_cast<float>(i);
        }
        std::vector<float> scratch(attention_queries_scratch_floats(Qn, nq, total));
        const int64_t sf = static_cast<int64_t>(scratch.size());
        bool ok = true;
        for (int64_t i = 0; i < Qn; ++i) {
          AttentionQuery one = a[i];
          one.out = twin.data() + i * nq * Sv;
          ok = ok && attention(Isa::scalar, c.view, one, scratch.data(), sf).ok();
        }
        tally.check(ok, "arbitrary ranges: twin failed");
        for (Isa isa : supported_isas()) {
          out.assign(Qn * nq * Sv, -7.0f);
          for (int64_t i = 0; i < Qn; ++i) a[i].out = out.data() + i * nq * Sv;
          tally.check(attention_queries(isa, c.view, a.data(), Qn, scratch.data(), sf).ok() && same_bits(out, twin),
                      "arbitrary ranges S=" + std::to_string(S) + " nq=" + std::to_string(nq) + " " + isa_name(isa) + " != twin");
          bool zeros = true;
          for (int64_t d = 0; d < nq * Sv; ++d) zeros = zeros && out[3 * nq * Sv + d] == 0.0f;
          tally.check(zeros, "arbitrary ranges: no keys gives zeros");
        }
      }
}

// Table entries outside every query's range are never read (evicted blocks of a sliding window,
// gaps between the ranges of one tile): here they are -1 and out of range.
TEST(KernelsAttention, TileSkipsUnseenBlocks) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, Sv = 64, nq = 4, blocks = 4;
  Cache c(blocks, 1, S, Sv);
  const std::vector<int32_t> table = {2, -1, 1000, 0, 3};  // positions 32-95 unseen
  for (int64_t p : {0, 1, 2, 3, 4})
    for (int64_t slot = 0; slot < kKvBlock; ++slot)
      if (table[p] >= 0 && table[p] < blocks) {
        for (int64_t d = 0; d < S; ++d) c.krow(table[p], 0, slot)[d] = 0.5f * nd01(rng);
        for (int64_t d = 0; d < Sv; ++d) c.vrow(table[p], 0, slot)[d] = nd01(rng);
      }
  // (n_keys, window): [0, 20), [100, 110), [96, 150), [120, 160), [0, 32)
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{20, 0}, {110, 10}, {150, 54}, {160, 40}, {32, 0}};
  const int64_t Qn = static_cast<int64_t>(ranges.size());
  std::vector<float> q(Qn * nq * S);
  for (float& f : q) f = nd01(rng);
  std::vector<AttentionQuery> a(Qn);
  for (int64_t i = 0; i < Qn; ++i) {
    a[i].q = q.data() + i * nq * S, a[i].q_stride = S, a[i].out_stride = Sv, a[i].nq = nq;
    a[i].block_table = table.data(), a[i].table_len = static_cast<int64_t>(table.size());
    a[i].n_keys = ranges[i].first, a[i].window = ranges[i].second, a[i].scale = 0.125f;
  }
  std::vector<float> scratch(attention_queries_scratch_floats(Qn, nq, 160)), twin(Qn * nq * Sv, -7.0f), out;
  const int64_t sf = static_cast<int64_t>(scratch.size());
  bool ok = true;
  for (int64_t i = 0; i < Qn; ++i) {
    AttentionQuery one = a[i];
    one.out = twin.data() + i * nq * Sv;
    ok = ok && attention(Isa::scalar, c.view, one, scratch.data(), sf).ok();
  }
  tally.check(ok, "unseen blocks: twin failed");
  for (Isa isa : supported_isas()) {
    out.assign(Qn * nq * Sv, -7.0f);
    for (int64_t i = 0; i < Qn; ++i) a[i].out = out.data() + i * nq * Sv;
    tally.check(attention_queries(isa, c.view, a.data(), Qn, scratch.data(), sf).ok() && same_bits(out, twin),
                "unseen blocks " + isa_name(isa) + " != twin");
  }
  AttentionQuery bad = a[1];
  bad.window = 0;  // now sees the -1 entry
  std::vector<float> o(nq * Sv);
  bad.out = o.data();
  tally.check(!attention_queries(Isa::scalar, c.view, &bad, 1, scratch.data(), sf).ok(), "unseen blocks: -1 entry in range accepted");
}

TEST(KernelsAttention, Errors) {
  Cache c(4, 2, 64, 64);
  std::vector<float> q(64, 1.0f), out(64), scratch(1024);
  std::vector<int32_t> table = {0, 3};
  AttentionQuery a;
  a.q = q.data(), a.out = out.data(), a.block_table = table.data(), a.table_len = 2, a.n_keys = 40, a.kv_head = 1;
  auto run = [&](const AttentionQuery& x, int64_t sf = 1024) {
    return attention(Isa::scalar, c.view, x, scratch.data(), sf).ok();
  };
  tally.check(run(a), "valid query rejected");
  AttentionQuery bad = a;
  bad.n_keys = 65;
  tally.check(!run(bad), "n_keys beyond the table accepted");
  bad = a, bad.kv_head = 2;
  tally.check(!run(bad), "kv head out of range accepted");
  bad = a;
  std::vector<int32_t> bad_table = {0, 4};
  bad.block_table = bad_table.data();
  tally.check(!run(bad), "block id outside the cache accepted");
  bad_table = {-1, 0};
  tally.check(!run(bad), "negative block id accepted");
  tally.check(!run(a, 10), "small scratch accepted");
  bad = a, bad.nq = 0;
  tally.check(!run(bad), "empty group accepted");
  for (float cap : {std::numeric_limits<float>::infinity(), kNaN}) {
    bad = a, bad.softcap = cap;
    tally.check(!run(bad), "non-finite softcap accepted");
  }
  KvCache empty;
  tally.check(!attention(Isa::scalar, empty, a, scratch.data(), 1024).ok(), "empty cache accepted");
  tally.check(!kv_write(Isa::scalar, c.view, table.data(), 2, 64, q.data(), q.data()).ok(), "kv_write past the table accepted");
  // tile sizes: by rows, by the scratch budget, never below one query
  tally.check(attention_tile_queries(4, 512) == 16 && attention_tile_queries(3, 512) == 16 &&
                  attention_tile_queries(8, 512) == 8 && attention_tile_queries(64, 512) == 1,
              "tile sizes by rows");
  tally.check(attention_tile_queries(4, 32768) * attention_scratch_floats(4, 32768) <= kAttentionTileScratch &&
                  attention_tile_queries(4, 32768) >= 1 && attention_tile_queries(64, int64_t{1} << 20) == 1,
              "tile sizes by scratch");
  // zero keys: zeros, not NaN
  AttentionQuery none = a;
  none.n_keys = 0;
  out.assign(64, 5.0f);
  tally.check(run(none) && std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }), "n_keys 0 gives zeros");
}

TEST(KernelsAttention, DecodeSpeed) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, kv_heads = 3, group = 3, n_keys = 4096, blocks = n_keys / kKvBlock;
  Cache c(blocks, kv_heads, S, S);
  for (float& f : c.k) f = 0.3f * nd01(rng);
  for (float& f : c.v) f = nd01(rng);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> q(group * S), scratch(attention_scratch_floats(group, n_keys));
  for (float& f : q) f = nd01(rng);
  std::vector<float> twin;
  for (Isa isa : supported_isas()) {
    std::vector<float> out(group * S);
    AttentionQuery a;
    a.q = q.data(), a.q_stride = S, a.out = out.data(), a.out_stride = S, a.nq = group, a.kv_head = 2;
    a.block_table = table.data(), a.table_len = blocks, a.n_keys = n_keys, a.scale = 0.125f;
    const int reps = isa == Isa::scalar ? 3 : 30;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      (void)attention(isa, c.view, a, scratch.data(), static_cast<int64_t>(scratch.size()));
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("  decode attention, %lld keys, head size %lld, %lld q heads on one kv head, %s: %.1f us (%.2f ns per key per head)\n",
                static_cast<long long>(n_keys), static_cast<long long>(S), static_cast<long long>(group),
                isa_name(isa).c_str(), us, us * 1000.0 / (n_keys * group));
    if (isa == Isa::scalar) twin = out;
    tally.check(same_bits(out, twin), "decode " + isa_name(isa) + " != twin");
  }
}

TEST(KernelsAttention, PrefillSpeed) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, kv_heads = 2, group = 3, q_heads = kv_heads * group, T = 256, blocks = T / kKvBlock;
  Cache c(blocks, kv_heads, S, S);
  for (float& f : c.k) f = 0.3f * nd01(rng);
  for (float& f : c.v) f = nd01(rng);
  std::vector<int32_t> table(blocks), positions(T), begins = {0, static_cast<int32_t>(blocks)};
  std::iota(table.begin(), table.end(), 0);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> q(T * q_heads * S);
  for (float& f : q) f = nd01(rng);
  AttentionBatch b;
  b.q = q.data(), b.q_stride = q_heads * S, b.out_stride = q_heads * S, b.tokens = T, b.q_heads = q_heads;
  b.positions = positions.data(), b.block_indices = table.data(), b.block_begins = begins.data(), b.scale = 0.125f;
  std::vector<float> scratch(attention_rows_scratch_floats(c.view, b, T)), twin;
  double macs = 0;
  for (int64_t t = 0; t < T; ++t) macs += static_cast<double>(t + 1) * 2 * S * q_heads;
  for (Isa isa : supported_isas()) {
    std::vector<float> out(T * q_heads * S);
    b.out = out.data();
    const int reps = isa == Isa::scalar ? 1 : 10;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)attention_rows(isa, c.view, b, 0, attention_items(c.view, b), scratch.data(), static_cast<int64_t>(scratch.size()));
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("  prefill attention, %lld tokens causal, head size %lld, %lld q heads on %lld kv heads, %s: %.0f us (%.1f GMAC/s)\n",
                static_cast<long long>(T), static_cast<long long>(S), static_cast<long long>(q_heads),
                static_cast<long long>(kv_heads), isa_name(isa).c_str(), best, macs / best * 1e-3);
    if (isa == Isa::scalar) twin = out;
    tally.check(same_bits(out, twin), "prefill " + isa_name(isa) + " != twin");
  }
}

}  // namespace
}  // namespace ggflow::cpu
