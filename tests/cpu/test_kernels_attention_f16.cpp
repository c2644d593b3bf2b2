// Kernel sweep, part 4b: attention over an f16 KV cache (cpu/kernels/attention.h).
//  - kv_write into an f16 cache rounds every value as gguf::f32_to_f16 (numpy's astype(float16)),
//    on every ISA: ties to even, the largest half, overflow to inf, f16 subnormals, f32
//    subnormals, signed zeros, NaN with payloads (-> sign | 0x7E00);
//  - attention on an f16 cache gives, on every ISA, the bits of the scalar twin on an f32 cache
//    holding the same (rounded) values: single queries and GQA groups, head sizes 17..256, key
//    counts across blocks, windows; and a batch of decode tokens of several sequences through
//    attention_rows (tiles, shuffled block tables, unused slots NaN), its groups of q heads split
//    into 1..4 row parts, the items split anywhere;
//  - head sizes beyond kMaxHalfRow and mixed f32/f16 caches are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/attention.h"
#include "gguf/dequant.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::same_bits;

sweep::Tally tally("test_kernels_attention_f16");

const float kNaN = std::numeric_limits<float>::quiet_NaN();

float round_half(float x) { return gguf::f16_to_f32(gguf::f32_to_f16(x)); }

// The same cache twice: f32 (values already rounded to f16) and f16; unused slots NaN in both.
struct Twins {
  std::vector<float> k, v;
  std::vector<uint16_t> k16, v16;
  KvCache f32, f16;
  Twins(int64_t blocks, int64_t kv_heads, int64_t S, int64_t Sv)
      : k(blocks * kv_heads * kKvBlock * S, kNaN), v(blocks * kv_heads * kKvBlock * Sv, kNaN),
        k16(k.size(), 0x7E00), v16(v.size(), 0x7E00) {
    f32 = {k.data(), v.data(), blocks, kv_heads, S, Sv};
    f16 = {nullptr, nullptr, blocks, kv_heads, S, Sv, k16.data(), v16.data()};
  }
  // Writes one token's rows through kv_write into both (the f32 one gets the rounded values).
  bool write(Isa isa, const std::vector<int32_t>& table, int64_t pos, std::vector<float> kr, std::vector<float> vr) {
    const bool ok = kv_write(isa, f16, table.data(), static_cast<int64_t>(table.size()), pos, kr.data(), vr.data()).ok();
    for (float& x : kr) x = round_half(x);
    for (float& x : vr) x = round_half(x);
    return ok && kv_write(Isa::scalar, f32, table.data(), static_cast<int64_t>(table.size()), pos, kr.data(), vr.data()).ok();
  }
};

TEST(KernelsAttentionF16, KvWriteRoundsAsTheTwin) {
  const float big = 65504.0f, tie = 1.0f + 1.0f / 2048.0f;  // the largest half; halfway between two halves
  std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, tie, -tie, 1.0f + 3.0f / 2048.0f, big, -big, 65519.0f, 65520.0f,
                                1e6f, -1e6f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                6e-5f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-9f, -1e-9f,
                                std::numeric_limits<float>::denorm_min(), -1e-40f, 3.14159f, -2.71828f};
  uint32_t payloads[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, 0xFFFFFFFFu, 0x7FC02000u};
  for (uint32_t u : payloads) {
    float f;
    std::memcpy(&f, &u, 4);
    special.push_back(f);
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t S : {17, 64, 80}) {
    const int64_t kv_heads = 2, blocks = 3;
    std::vector<float> k(kv_heads * S), v(kv_heads * S);
    for (size_t i = 0; i < k.size(); ++i) k[i] = i < special.size() ? special[i] : nd(rng);
    for (size_t i = 0; i < v.size(); ++i) v[i] = nd(rng) * (i % 3 == 0 ? 1e-5f : 1.0f);
    std::vector<int32_t> table = {2, 0};
    for (Isa isa : supported_isas()) {
      std::vector<uint16_t> kc(blocks * kv_heads * kKvBlock * S, 0), vc(kc.size(), 0);
      KvCache c{nullptr, nullptr, blocks, kv_heads, S, S, kc.data(), vc.data()};
      const int64_t pos = 37;  // block table[1] = 0, slot 5
      bool ok = kv_write(isa, c, table.data(), 2, pos, k.data(), v.data()).ok();
      for (int64_t h = 0; h < kv_heads; ++h)
        for (int64_t d = 0; d < S; ++d) {
          const int64_t at = ((0 * kv_heads + h) * kKvBlock + 5) * S + d;
          ok = ok && kc[at] == gguf::f32_to_f16(k[h * S + d]) && vc[at] == gguf::f32_to_f16(v[h * S + d]);
        }
      tally.check(ok, "kv_write f16 S=" + std::to_string(S) + " " + isa_name(isa) + " != gguf::f32_to_f16");
    }
  }
}

TEST(KernelsAttentionF16, QueriesEqualTheRoundedF32Cache) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  struct Dims {
    int64_t S, Sv;
  };
  for (Dims dims : {Dims{64, 64}, Dims{80, 80}, Dims{256, 256}, Dims{17, 17}, Dims{64, 48}})
    for (int64_t n_keys : {1, 33, 100, 257})
      for (int64_t window : {0, 33})
        for (int64_t nq : {1, 3}) {
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
          const std::string tag = "f16 S=" + std::to_string(S) + " Sv=" + std::to_string(Sv) + " n_keys=" +
                                  std::to_string(n_keys) + " window=" + std::to_string(window) + " nq=" + std::to_string(nq);
          std::vector<float> twin(nq * Sv, -7.0f);
          a.out = twin.data();
          ok = ok && attention(Isa::scalar, c.f32, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok();
          tally.check(ok, tag + ": twin on the f32 cache failed");
          for (Isa isa : supported_isas()) {
            std::vector<float> out(nq * Sv, -7.0f);
            a.out = out.data();
            tally.check(attention(isa, c.f16, a, scratch.data(), static_cast<int64_t>(scratch.size())).ok() &&
                            same_bits(out, twin),
                        tag + " " + isa_name(isa) + " != twin on the rounded f32 cache");
          }
        }
}

// Decode tokens of 5 sequences (9 query heads over 3 kv heads, head size 64) after 0..130 cached
// ones, through attention_rows split at every point: the f16 cache gives the rounded f32 cache's bits.
TEST(KernelsAttentionF16, DecodeBatch) {
  std::mt19937 rng(29);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  const int64_t S = 64, Hk = 3, Hq = 9, B = 5, per = 6, blocks = B * per;
  const int64_t past[B] = {0, 31, 32, 77, 130};
  Twins c(blocks, Hk, S, S);
  std::vector<int32_t> bi(blocks), bib(B + 1), pos(B), seq(B);
  std::iota(bi.begin(), bi.end(), 0);
  std::shuffle(bi.begin(), bi.end(), rng);
  bool ok = true;
  for (int64_t s = 0; s < B; ++s) {
    bib[s + 1] = static_cast<int32_t>((s + 1) * per), pos[s] = static_cast<int32_t>(past[s]), seq[s] = static_cast<int32_t>(s);
    std::vector<int32_t> table(bi.begin() + s * per, bi.begin() + (s + 1) * per);
    for (int64_t p = 0; p <= past[s]; ++p) {
      std::vector<float> kr(Hk * S), vr(Hk * S);
      for (float& f : kr) f = 0.5f * nd01(rng);
      for (float& f : vr) f = nd01(rng);
      ok = ok && c.write(Isa::scalar, table, p, kr, vr);
    }
  }
  std::vector<float> q(B * Hq * S);
  for (float& f : q) f = nd01(rng);
  AttentionBatch ab;
  ab.q = q.data(), ab.q_stride = Hq * S, ab.out_stride = Hq * S, ab.tokens = B, ab.q_heads = Hq;
  ab.positions = pos.data(), ab.seq = seq.data(), ab.block_indices = bi.data(), ab.block_begins = bib.data();
  ab.n_seqs = B, ab.scale = 0.125f;
  const int64_t items = attention_items(c.f32, ab);
  std::vector<float> scratch(attention_rows_scratch_floats(c.f32, ab, 131)), twin(B * Hq * S, -7.0f);
  const int64_t sf = static_cast<int64_t>(scratch.size());
  ab.out = twin.data();
  ok = ok && attention_rows(Isa::scalar, c.f32, ab, 0, items, scratch.data(), sf).ok();
  tally.check(ok, "decode batch: twin on the f32 cache failed");
  for (Isa isa : supported_isas())
    for (int64_t parts : {1, 2, 3, 4}) {  // the q heads of a group split into parts (4: one part empty)
      ab.row_parts = parts;
      const int64_t n_items = attention_items(c.f16, ab);
      for (int64_t split = 0; split <= n_items; split += 4) {
        std::vector<float> out(B * Hq * S, -7.0f);
        ab.out = out.data();
        const bool run = attention_rows(isa, c.f16, ab, 0, split, scratch.data(), sf).ok() &&
                         attention_rows(isa, c.f16, ab, split, n_items, scratch.data(), sf).ok();
        tally.check(run && same_bits(out, twin), "decode batch, row parts " + std::to_string(parts) + ", split at " +
                                                     std::to_string(split) + " " + isa_name(isa) +
                                                     " != twin on the rounded f32 cache");
      }
    }
  ab.row_parts = 0;
  std::vector<float> o(B * Hq * S);
  ab.out = o.data();
  tally.check(!attention_rows(Isa::scalar, c.f16, ab, 0, 1, scratch.data(), sf).ok(), "row_parts 0 accepted");
}

TEST(KernelsAttentionF16, Errors) {
  std::vector<uint16_t> k(2 * kKvBlock * 520), v(k.size());
  std::vector<float> kf(k.size()), q(520, 1.0f), out(520), scratch(4096);
  std::vector<int32_t> table = {0};
  AttentionQuery a;
  a.q = q.data(), a.out = out.data(), a.block_table = table.data(), a.table_len = 1, a.n_keys = 4;
  KvCache wide{nullptr, nullptr, 1, 1, 520, 520, k.data(), v.data()};
  tally.check(!attention(Isa::scalar, wide, a, scratch.data(), 4096).ok(), "f16 head size 520 accepted");
  tally.check(!kv_write(Isa::scalar, wide, table.data(), 1, 0, q.data(), q.data()).ok(), "f16 kv_write of head size 520 accepted");
  KvCache mixed{kf.data(), nullptr, 1, 1, 64, 64, nullptr, v.data()};
  tally.check(!attention(Isa::scalar, mixed, a, scratch.data(), 4096).ok(), "a cache of f32 keys and f16 values accepted");
  KvCache ok{nullptr, nullptr, 1, 1, 64, 64, k.data(), v.data()};
  tally.check(attention(Isa::scalar, ok, a, scratch.data(), 4096).ok(), "a valid f16 cache rejected");
}

}  // namespace
}  // namespace ggflow::cpu
