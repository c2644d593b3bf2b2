// Kernel sweep, part 4c: attention over a q8_0 KV cache (cpu/kernels/attention.h, convert.h).
//  - to_q8_0 gives gguf::quantize_q8_0's bytes and from_q8_0 gguf::dequantize's values on every
//    ISA, on blocks of special values (zeros, signed zeros, ties of the rounding, a lone large
//    value, f16 underflow and overflow of d, infinities, NaN) and random ones, lengths 0..256;
//  - kv_write into a q8_0 cache writes each head's row as gguf::quantize_q8_0, on every ISA;
//  - attention on a q8_0 cache gives, on every ISA, the bits of the scalar twin on it (the scores
//    in q8_0 arithmetic: the query quantized to q8_0, integer dot products per block): single
//    queries and GQA groups, head sizes 32..256, key counts across blocks, windows, a query row
//    with a NaN (zeros: NaN scores); and a decode batch of several sequences through attention_rows, its groups of q
//    heads split into 1..4 row parts, the items split anywhere. The twin itself against a double
//    reference on the dequantized query and cache (within 1e-5 of max|v|), and against the f32
//    cache's attention on the same values (close: the query's rounding only);
//  - head sizes that are not multiples of 32 or beyond kMaxHalfRow, and mixed caches, are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/attention.h"
#include "cpu/kernels/convert.h"
#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::same_bits;

sweep::Tally tally("test_kernels_attention_q8");

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// x rounded through q8_0 and back, with gguf's functions (n a multiple of 32).
std::vector<float> round_q8(const std::vector<float>& x) {
  std::vector<uint8_t> b(x.size() / 32 * 34);
  gguf::quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), b.data());
  std::vector<float> y(x.size());
  EXPECT_TRUE(gguf::dequantize(gguf::GgmlType::Q8_0, b, x.size(), y.data()).ok());
  return y;
}

TEST(KernelsAttentionQ8, ConvertEqualsGgufOnEveryIsa) {
  std::vector<float> v;
  auto block = [&](std::vector<float> b) {  // one 32-value block: b, then zeros
    b.resize(32, 0.0f);
    v.insert(v.end(), b.begin(), b.end());
  };
  block({});                                                     // all zeros: d = 0
  block({-0.0f, 0.0f, -0.0f});
  block({127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 63.5f});        // ties of the rounding (id = 1)
  block({1e-7f, -3e-8f});                                        // d underflows f16
  block({1e10f, 1.0f});                                          // d overflows f16
  block({kInf, 1.0f, -2.0f});
  block({-kInf, 5.0f});
  block({kNaN, 1.0f});
  block({1.0f, 2.0f, kNaN, -kInf});
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int i = 0; i < 32 * 200; ++i) v.push_back(nd(rng) * (i / 320 % 2 ? 1e-3f : 1.0f));
  const int64_t n = static_cast<int64_t>(v.size());
  std::vector<uint8_t> twin(n / 32 * 34);
  gguf::quantize_q8_0(v.data(), n, twin.data());
  std::vector<float> deq(v.size());
  ASSERT_TRUE(gguf::dequantize(gguf::GgmlType::Q8_0, twin, v.size(), deq.data()).ok());
  for (Isa isa : supported_isas()) {
    std::vector<uint8_t> out(twin.size() + 34, 0xAB);
    to_q8_0(isa, v.data(), n, out.data());
    bool past = true;
    for (size_t i = twin.size(); i < out.size(); ++i) past = past && out[i] == 0xAB;
    tally.check(std::memcmp(out.data(), twin.data(), twin.size()) == 0 && past,
                std::string("to_q8_0 ") + isa_name(isa) + " != gguf::quantize_q8_0 (or wrote past n)");
    std::vector<float> back(v.size() + 16, -7.0f);
    from_q8_0(isa, twin.data(), n, back.data());
    bool tail = true;
    for (size_t i = v.size(); i < back.size(); ++i) tail = tail && back[i] == -7.0f;
    back.resize(v.size());
    tally.check(same_bits(back, deq) && tail, std::string("from_q8_0 ") + isa_name(isa) + " != gguf::dequantize");
    for (int64_t len : {0, 32, 64, 96, 256}) {  // lengths
      std::vector<uint8_t> o(len / 32 * 34 + 2, 0xCD);
      to_q8_0(isa, v.data() + 64, len, o.data());
      tally.check(std::memcmp(o.data(), twin.data() + 2 * 34, static_cast<size_t>(len / 32 * 34)) == 0 && o[len / 32 * 34] == 0xCD,
                  std::string("to_q8_0 ") + isa_name(isa) + " of " + std::to_string(len) + " values");
    }
  }
  // the rounding: 0.5 -> 0 and 1.5 -> 2 (nearest even, as llama.cpp's x86 quantizer), and every
  // code within [-127, 127]
  int8_t q[32];
  const float tie[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f};
  EXPECT_EQ(gguf::q8_0_codes(tie, q), 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], 2);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[5], -2);
}

// The same cache twice: f32 (values already rounded through q8_0) and q8_0. Unused slots: NaN in
// the f32 one, 0xFF bytes (a NaN d) in the q8_0 one.
struct Twins {
  std::vector<float> k, v;
  std::vector<uint8_t> k8, v8;
  KvCache f32, q8;
  Twins(int64_t blocks, int64_t kv_heads, int64_t S, int64_t Sv)
      : k(blocks * kv_heads * kKvBlock * S, kNaN), v(blocks * kv_heads * kKvBlock * Sv, kNaN),
        k8(k.size() / 32 * 34, 0xFF), v8(v.size() / 32 * 34, 0xFF) {
    f32 = {k.data(), v.data(), blocks, kv_heads, S, Sv};
    q8 = {nullptr, nullptr, blocks, kv_heads, S, Sv, nullptr, nullptr, k8.data(), v8.data()};
  }
  // Writes one token's rows through kv_write into both (the f32 one gets the rounded values, head by head).
  bool write(Isa isa, const std::vector<int32_t>& table, int64_t pos, std::vector<float> kr, std::vector<float> vr) {
    const bool ok = kv_write(isa, q8, table.data(), static_cast<int64_t>(table.size()), pos, kr.data(), vr.data()).ok();
    return ok && kv_write(Isa::scalar, f32, table.data(), static_cast<int64_t>(table.size()), pos, round_q8(kr).data(),
                          round_q8(vr).data()).ok();
  }
};

TEST(KernelsAttentionQ8, KvWriteQuantizesAsGguf) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t S : {32, 64, 128}) {
    const int64_t kv_heads = 2, blocks = 3;
    std::vector<float> k(kv_heads * S), v(kv_heads * S);
    for (float& x : k) x = nd(rng);
    for (size_t i = 0; i < v.size(); ++i) v[i] = nd(rng) * (i % 3 == 0 ? 1e-5f : 1.0f);
    k[3] = kNaN, v[S + 1] = kInf;  // a NaN block in head 0's keys, an inf in head 1's values
    std::vector<int32_t> table = {2, 0};
    const int64_t row = S / 32 * 34;
    for (Isa isa : supported_isas()) {
      std::vector<uint8_t> kc(blocks * kv_heads * kKvBlock * row, 0), vc(kc.size(), 0);
      KvCache c{nullptr, nullptr, blocks, kv_heads, S, S, nullptr, nullptr, kc.data(), vc.data()};
      const int64_t pos = 37;  // block table[1] = 0, slot 5
      bool ok = kv_write(isa, c, table.data(), 2, pos, k.data(), v.data()).ok();
      for (int64_t h = 0; h < kv_heads; ++h) {
        std::vector<uint8_t> wk(row), wv(row);
        gguf::quantize_q8_0(k.data() + h * S, S, wk.data());
        gguf::quantize_q8_0(v.data() + h * S, S, wv.data());
        const int64_t at = ((0 * kv_heads + h) * kKvBlock + 5) * row;
        ok = ok && std::memcmp(kc.data() + at, wk.data(), row) == 0 && std::memcmp(vc.data() + at, wv.data(), row) == 0;
      }
      size_t written = 0;  // nothing else
      for (uint8_t b : kc) written += b != 0;
      tally.check(ok && written > 0 && written <= size_t(kv_heads * row),
                  "kv_write q8_0 S=" + std::to_string(S) + " " + isa_name(isa) + " != gguf::quantize_q8_0");
    }
  }
}

// Attention in double on the query rounded through q8_0 and the f32 cache's (rounded) values:
// what the q8_0 scores compute, up to f32 rounding.
std::vector<double> reference(const AttentionQuery& a, const KvCache& f32) {
  const int64_t S = f32.head_size, Sv = f32.v_size, lo = a.window > 0 ? std::max<int64_t>(0, a.n_keys - a.window) : 0;
  std::vector<double> out(a.nq * Sv, 0.0);
  for (int64_t h = 0; h < a.nq; ++h) {
    const std::vector<float> q = round_q8(std::vector<float>(a.q + h * a.q_stride, a.q + h * a.q_stride + S));
    std::vector<double> s;
    for (int64_t p = lo; p < a.n_keys; ++p) {
      const float* k = f32.k + f32.at(true, a.block_table[p / kKvBlock], a.kv_head, p % kKvBlock);
      double d = 0;
      for (int64_t i = 0; i < S; ++i) d += static_cast<double>(q[i]) * k[i];
      s.push_back(d * a.scale);
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t p = lo; p < a.n_keys; ++p) {
      const float* v = f32.v + f32.at(false, a.block_table[p / kKvBlock], a.kv_head, p % kKvBlock);
      for (int64_t i = 0; i < Sv; ++i) out[h * Sv + i] += s[p - lo] / sum * v[i];
    }
  }
  return out;
}

TEST(KernelsAttentionQ8, QueriesEqualTheTwin) {
  double worst_ref = 0, worst_f32 = 0;
  std::mt19937 rng(23);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  struct Dims {
    int64_t S, Sv;
  };
  for (Dims dims : {Dims{64, 64}, Dims{128, 128}, Dims{256, 256}, Dims{32, 32}, Dims{64, 96}})
    for (int64_t n_keys : {1, 33, 100, 257})
      for (int64_t window : {0, 33})
        for (int64_t nq : {1, 3, 6}) {
          const int64_t S = dims.S, Sv = dims.Sv, kv_heads = 2, kvh = 1;
          const int64_t nblk = (n_keys + kKvBlock - 1) / kKvBlock, blocks = nblk + 2;
          Twins c(blocks, kv_heads, S, Sv);
          std::vector<int32_t> table(blocks);
          std::iota(table.begin(), table.end(), 0);
          std::shuffle(table.begin(), table.end(), rng);
          table.resize(nblk);
          bool ok = true;
          for (int64_t p = 0; p < n_keys; ++p) {
            std::vector<float> kr(kv_heads * S), vr(kv_heads * Sv);
            for (float& f : kr) f = 0.5f * nd01(rng);
            for (float& f : vr) f = nd01(rng);
            ok = ok && c.write(Isa::scalar, table, p, kr, vr);
          }
          std::vector<float> q(nq * S), scratch(attention_scratch_floats(nq, n_keys));
          for (float& f : q) f = nd01(rng);
          AttentionQuery a;
          a.q = q.data(), a.q_stride = S, a.out_stride = Sv, a.nq = nq, a.kv_head = kvh, a.block_table = table.data();
          a.table_len = nblk, a.n_keys = n_keys, a.window = window, a.scale = 1.0f / std::sqrt(static_cast<float>(S));
          const std::string tag = "q8_0 S=" + std::to_string(S) + " Sv=" + std::to_string(Sv) + " n_keys=" +
                                  std::to_string(n_keys) + " window=" + std::to_string(window) + " nq=" + std::to_string(nq);
          std::vector<float> twin(nq * Sv, -7.0f), f32(nq * Sv, -7.0f);
          a.out = f32.data();
          ok = ok && attention(Isa::scalar, c.f32, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok();
          a.out = twin.data();
          ok = ok && attention(Isa::scalar, c.q8, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok();
          tally.check(ok, tag + ": twin failed");
          const std::vector<double> ref = reference(a, c.f32);
          double vmax = 0, dref = 0, df32 = 0;
          for (float x : c.v) vmax = std::isnan(x) ? vmax : std::max<double>(vmax, std::fabs(x));
          for (size_t i = 0; i < twin.size(); ++i)
            dref = std::max(dref, std::fabs(twin[i] - ref[i])), df32 = std::max<double>(df32, std::fabs(twin[i] - f32[i]));
          worst_ref = std::max(worst_ref, dref / vmax), worst_f32 = std::max(worst_f32, df32 / vmax);
          tally.check(dref <= 1e-5 * vmax, tag + ": twin off the double reference by " + std::to_string(dref / vmax) + " max|v|");
          tally.check(df32 <= 0.05 * vmax, tag + ": twin far from the f32 cache's attention (" + std::to_string(df32 / vmax) + ")");
          for (Isa isa : supported_isas()) {
            std::vector<float> out(nq * Sv, -7.0f);
            a.out = out.data();
            tally.check(attention(isa, c.q8, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok() &&
                            same_bits(out, twin),
                        tag + " " + isa_name(isa) + " != twin");
          }
          if (nq < 3) continue;
          // a NaN in row 1 of the query: that row zeros (its scores NaN, none of them a maximum),
          // the others as before, on every ISA
          q[1 * S + 5] = kNaN;
          for (Isa isa : supported_isas()) {
            std::vector<float> out(nq * Sv, -7.0f);
            a.out = out.data();
            bool zero_row = attention(isa, c.q8, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok();
            for (int64_t i = 0; i < Sv; ++i) zero_row = zero_row && out[Sv + i] == 0.0f;
            std::copy(twin.begin() + Sv, twin.begin() + 2 * Sv, out.begin() + Sv);
            tally.check(zero_row && same_bits(out, twin), tag + " " + isa_name(isa) + ": a NaN query row is not zeros alone");
          }
        }
  std::printf("q8_0 twin: max |out - double reference| %.3g max|v|, max |out - f32 cache's| %.3g max|v|\n", worst_ref, worst_f32);
}

// Decode tokens of 5 sequences (12 query heads over 2 kv heads of 128, Qwen2.5's) after 0..130
// cached ones, written by the items themselves (k_new / v_new), through attention_rows split at
// every point: every ISA gives the twin's bits (the twin's batch written by kv_write first).
TEST(KernelsAttentionQ8, DecodeBatch) {
  std::mt19937 rng(29);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 128, Hk = 2, Hq = 12, B = 5, per = 6, blocks = B * per;
  const int64_t past[B] = {0, 31, 32, 77, 130};
  Twins c(blocks, Hk, S, S);
  std::vector<int32_t> bi(blocks), bib(B + 1), pos(B), seq(B);
  std::iota(bi.begin(), bi.end(), 0);
  std::shuffle(bi.begin(), bi.end(), rng);
  bool ok = true;
  std::vector<float> knew(B * Hk * S), vnew(B * Hk * S);
  for (int64_t s = 0; s < B; ++s) {
    bib[s + 1] = static_cast<int32_t>((s + 1) * per), pos[s] = static_cast<int32_t>(past[s]), seq[s] = static_cast<int32_t>(s);
    std::vector<int32_t> table(bi.begin() + s * per, bi.begin() + (s + 1) * per);
    for (int64_t p = 0; p <= past[s]; ++p) {
      std::vector<float> kr(Hk * S), vr(Hk * S);
      for (float& f : kr) f = 0.5f * nd01(rng);
      for (float& f : vr) f = nd01(rng);
      if (p == past[s]) {  // the new token: into the f32 twin only; the q8_0 items write it themselves
        std::copy(kr.begin(), kr.end(), knew.begin() + s * Hk * S), std::copy(vr.begin(), vr.end(), vnew.begin() + s * Hk * S);
        ok = ok && kv_write(Isa::scalar, c.f32, table.data(), per, p, round_q8(kr).data(), round_q8(vr).data()).ok();
      } else {
        ok = ok && c.write(Isa::scalar, table, p, kr, vr);
      }
    }
  }
  std::vector<float> q(B * Hq * S);
  for (float& f : q) f = nd01(rng);
  AttentionBatch ab;
  ab.q = q.data(), ab.q_stride = Hq * S, ab.out_stride = Hq * S, ab.tokens = B, ab.q_heads = Hq;
  ab.positions = pos.data(), ab.seq = seq.data(), ab.block_indices = bi.data(), ab.block_begins = bib.data();
  ab.n_seqs = B, ab.scale = 0.088f;
  const int64_t items = attention_items(c.f32, ab);
  std::vector<float> scratch(attention_rows_scratch_floats(c.f32, ab, 131)), twin(B * Hq * S, -7.0f);
  const int64_t sf = static_cast<int64_t>(scratch.size());
  ab.out = twin.data();
  const std::vector<uint8_t> k8 = c.k8, v8 = c.v8;  // before the items write the new rows
  for (int64_t s = 0; s < B; ++s)
    ok = ok && kv_write(Isa::scalar, c.q8, bi.data() + s * per, per, past[s], knew.data() + s * Hk * S, vnew.data() + s * Hk * S).ok();
  ok = ok && attention_rows(Isa::scalar, c.q8, ab, 0, items, scratch.data(), sf).ok();
  tally.check(ok, "decode batch: twin failed");
  c.k8 = k8, c.v8 = v8;
  for (Isa isa : supported_isas())
    for (int64_t parts : {1, 2, 3, 4}) {
      ab.row_parts = parts;
      ab.k_new = parts == 1 ? knew.data() : nullptr, ab.v_new = parts == 1 ? vnew.data() : nullptr;
      const int64_t n_items = attention_items(c.q8, ab);
      for (int64_t split = 0; split <= n_items; split += 3) {
        if (parts > 1)  // the new rows already in the cache
          for (int64_t s = 0; s < B; ++s)
            ok = ok && kv_write(isa, c.q8, bi.data() + s * per, per, past[s], knew.data() + s * Hk * S, vnew.data() + s * Hk * S).ok();
        std::vector<float> out(B * Hq * S, -7.0f);
        ab.out = out.data();
        const bool run = attention_rows(isa, c.q8, ab, 0, split, scratch.data(), sf).ok() &&
                         attention_rows(isa, c.q8, ab, split, n_items, scratch.data(), sf).ok();
        tally.check(ok && run && same_bits(out, twin), "q8_0 decode batch, row parts " + std::to_string(parts) + ", split at " +
                                                           std::to_string(split) + " " + isa_name(isa) +
                                                           " != twin");
        c.k8 = k8, c.v8 = v8;  // the new rows out again (the items rewrite them)
      }
    }
}

TEST(KernelsAttentionQ8, Errors) {
  std::vector<uint8_t> k(2 * kKvBlock * 544 / 32 * 34), v(k.size());
  std::vector<float> kf(2 * kKvBlock * 544), q(544, 1.0f), out(544), scratch(4096);
  std::vector<int32_t> table = {0};
  AttentionQuery a;
  a.q = q.data(), a.out = out.data(), a.block_table = table.data(), a.table_len = 1, a.n_keys = 4;
  KvCache wide{nullptr, nullptr, 1, 1, 544, 544, nullptr, nullptr, k.data(), v.data()};
  tally.check(!attention(Isa::scalar, wide, a, scratch.data(), 4096).ok(), "q8_0 head size 544 accepted");
  KvCache odd{nullptr, nullptr, 1, 1, 48, 48, nullptr, nullptr, k.data(), v.data()};
  auto e = attention(Isa::scalar, odd, a, scratch.data(), 4096);
  tally.check(!e.ok() && e.error().what.find("multiples of 32") != std::string::npos, "q8_0 head size 48 accepted");
  tally.check(!kv_write(Isa::scalar, odd, table.data(), 1, 0, q.data(), q.data()).ok(), "q8_0 kv_write of head size 48 accepted");
  KvCache mixed{kf.data(), nullptr, 1, 1, 64, 64, nullptr, nullptr, nullptr, v.data()};
  tally.check(!attention(Isa::scalar, mixed, a, scratch.data(), 4096).ok(), "a cache of f32 keys and q8_0 values accepted");
  KvCache ok{nullptr, nullptr, 1, 1, 64, 64, nullptr, nullptr, k.data(), v.data()};
  tally.check(attention(Isa::scalar, ok, a, scratch.data(), 4096).ok(), "a valid q8_0 cache rejected");
}

}  // namespace
}  // namespace ggflow::cpu
