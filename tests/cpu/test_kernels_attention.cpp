// Kernel sweep, part 4: attention over the 32-token block KV cache (cpu/kernels/attention.h).
// Head sizes 17, 40, 64, 80, 256 (and a value size different from the key size), n_keys 1, 31, 32,
// 33, 100, 257, sliding windows, GQA groups of 1 and 3 query rows, shuffled block tables; cache
// slots outside the attended range hold NaN, so a kernel that lets them leak fails.
//  - SIMD == scalar twin by memcmp; a query's bits do not depend on its group, on the batch, or
//    on how the batch's items are split (attention_rows);
//  - the twin against a double-precision reference and against the IR's f32 attention row
//    (ir/attention_row.h itself: sequential dot, mul then add, libm exp) within
//    |out - ref| <= 2e-6 * max|v| per element;
//  - bad inputs (block ids, short tables, small scratch, kv head) are errors.
// Also times decode at 4096 keys per ISA (printed, not asserted).
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
// keys [lo, hi).
void references(Cache& c, const std::vector<int32_t>& table, int64_t kvh, const float* q, int64_t lo, int64_t hi,
                float scale, std::vector<float>& ir, std::vector<double>& ref) {
  const int64_t S = c.view.head_size, Sv = c.view.v_size, n = hi - lo;
  auto krow = [&](int64_t j) { const int64_t p = lo + j; return c.krow(table[p / kKvBlock], kvh, p % kKvBlock); };
  auto vrow = [&](int64_t j) { const int64_t p = lo + j; return c.vrow(table[p / kKvBlock], kvh, p % kKvBlock); };
  std::vector<float> sc(n);
  for (int64_t j = 0; j < n; ++j) sc[j] = ir::attention_score(q, krow(j), S, scale);
  ir.assign(Sv, 0.0f);
  ir::attend_row(sc, vrow, Sv, ir.data());
  std::vector<double> scd(n);
  double mxd = -INFINITY, sumd = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    double sd = 0.0;
    for (int64_t d = 0; d < S; ++d) sd += static_cast<double>(q[d]) * krow(j)[d];
    scd[j] = sd * scale, mxd = std::max(mxd, scd[j]);
  }
  for (int64_t j = 0; j < n; ++j) scd[j] = std::exp(scd[j] - mxd), sumd += scd[j];
  ref.assign(Sv, 0.0);
  for (int64_t d = 0; d < Sv; ++d) {
    double accd = 0.0;
    for (int64_t j = 0; j < n; ++j) accd += scd[j] * vrow(j)[d];
    ref[d] = n ? accd / sumd : 0.0;
  }
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
          // q.k of order sqrt(S) * 0.5: softmax weights from peaked to flat
          for (int64_t p = lo; p < n_keys; ++p)
            for (int64_t h = 0; h < kv_heads; ++h) {
              float* kr = c.krow(table[p / kKvBlock], h, p % kKvBlock);
              float* vr = c.vrow(table[p / kKvBlock], h, p % kKvBlock);
              for (int64_t d = 0; d < S; ++d) kr[d] = 0.5f * nd01(rng);
              for (int64_t d = 0; d < Sv; ++d) vr[d] = nd01(rng);
            }
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
          double vmax = 0;
          for (int64_t p = lo; p < n_keys; ++p)
            for (int64_t d = 0; d < Sv; ++d) vmax = std::max<double>(vmax, std::fabs(c.vrow(table[p / kKvBlock], kvh, p % kKvBlock)[d]));
          double e_ref = 0, e_ir = 0;
          for (int64_t i = 0; i < nq; ++i) {
            std::vector<float> ir;
            std::vector<double> ref;
            references(c, table, kvh, q.data() + i * qs, lo, n_keys, scale, ir, ref);
            for (int64_t d = 0; d < Sv; ++d) {
              e_ref = std::max(e_ref, std::fabs(twin[i * os + d] - ref[d]) / vmax);
              e_ir = std::max(e_ir, std::fabs(twin[i * os + d] - static_cast<double>(ir[d])) / vmax);
            }
          }
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
      auto st = kv_write(c.view, block_indices.data() + block_begins[s], block_begins[s + 1] - block_begins[s], p,
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
  KvCache empty;
  tally.check(!attention(Isa::scalar, empty, a, scratch.data(), 1024).ok(), "empty cache accepted");
  tally.check(!kv_write(c.view, table.data(), 2, 64, q.data(), q.data()).ok(), "kv_write past the table accepted");
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

}  // namespace
}  // namespace ggflow::cpu
