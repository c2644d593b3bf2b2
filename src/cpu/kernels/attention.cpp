// Scalar twin of attention (attention.h): the specification of its bits; plus the checks, the
// tiling of queries (attention_queries, attention_rows) and the cache write, shared by every ISA.
#include "cpu/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "cpu/kernels/math.h"
#include "gguf/quantize.h"

namespace ggflow::cpu {
namespace {

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// One key / value row as f32: in place, or (f16 cache) converted into buf.
const float* key_row(const KvCache& c, int64_t block, int64_t kvh, int64_t slot, float* buf) {
  return detail::cache_rows(Isa::scalar, c, true, block, kvh, slot, 1, buf);
}
const float* value_row(const KvCache& c, int64_t block, int64_t kvh, int64_t slot, float* buf) {
  return detail::cache_rows(Isa::scalar, c, false, block, kvh, slot, 1, buf);
}

Status check_cache(const KvCache& c) {
  const int pairs = (c.k && c.v) + (c.k16 && c.v16) + (c.k8 && c.v8), set = !!c.k + !!c.v + !!c.k16 + !!c.v16 + !!c.k8 + !!c.v8;
  if (pairs != 1 || set != 2 || c.num_blocks <= 0 || c.kv_heads <= 0 || c.head_size <= 0 || c.v_size <= 0)
    return make_error("attention: the KV cache is empty, mixes element types, or has a non-positive dimension (blocks " +
                      std::to_string(c.num_blocks) + ", kv heads " + std::to_string(c.kv_heads) + ", head size " +
                      std::to_string(c.head_size) + ", value size " + std::to_string(c.v_size) + ")");
  if ((c.half() || c.q8()) && (c.head_size > kMaxHalfRow || c.v_size > kMaxHalfRow))
    return make_error(std::string("attention: an ") + (c.q8() ? "q8_0" : "f16") + " KV cache takes head sizes up to " +
                          std::to_string(kMaxHalfRow) + ", got " + std::to_string(c.head_size) + " / " + std::to_string(c.v_size),
                      "use an f32 KV cache (--kv-type f32) for this model");
  if (c.q8() && (c.head_size % 32 != 0 || c.v_size % 32 != 0))
    return make_error("attention: a q8_0 KV cache needs head sizes that are multiples of 32, got " +
                          std::to_string(c.head_size) + " / " + std::to_string(c.v_size),
                      "use --kv-type f16 for this model");
  return {};
}

int64_t query_scratch(int64_t nq, const detail::AttnPlan& pl) { return nq * (pl.np + 17); }

}  // namespace

void kv_write_head(Isa isa, const KvCache& c, int64_t block, int64_t h, int64_t slot, const float* k, const float* v) {
  const int64_t ka = c.at(true, block, h, slot), va = c.at(false, block, h, slot);
  if (c.q8()) {
    to_q8_0(isa, k, c.head_size, c.k8 + c.elem_bytes(ka));
    to_q8_0(isa, v, c.v_size, c.v8 + c.elem_bytes(va));
  } else if (c.half()) {
    to_f16(isa, k, c.head_size, c.k16 + ka);
    to_f16(isa, v, c.v_size, c.v16 + va);
  } else {
    std::memcpy(c.k + ka, k, static_cast<size_t>(c.head_size) * sizeof(float));
    std::memcpy(c.v + va, v, static_cast<size_t>(c.v_size) * sizeof(float));
  }
}

namespace {

// Checks a query against the cache and its table (not the scratch); resolves lo and n.
Result<detail::AttnPlan> plan(const KvCache& c, const AttentionQuery& a) {
  if (a.nq < 1) return make_error("attention: a query group needs at least one row, got " + std::to_string(a.nq));
  if (a.kv_head < 0 || a.kv_head >= c.kv_heads)
    return make_error("attention: kv head " + std::to_string(a.kv_head) + " outside [0, " + std::to_string(c.kv_heads) + ")");
  if (a.n_keys < 0 || a.window < 0)
    return make_error("attention: negative key count " + std::to_string(a.n_keys) + " or window " + std::to_string(a.window));
  if (!std::isfinite(a.softcap))
    return make_error("attention: logit soft-cap " + std::to_string(a.softcap) + " is not finite", "0 turns it off");
  if (a.n_keys > a.table_len * kKvBlock)
    return make_error("attention: " + std::to_string(a.n_keys) + " keys need " + std::to_string((a.n_keys + kKvBlock - 1) / kKvBlock) +
                          " blocks, the block table has " + std::to_string(a.table_len),
                      "allocate ceil(keys / 32) blocks per sequence");
  detail::AttnPlan pl;
  pl.lo = a.window > 0 ? std::max<int64_t>(0, a.n_keys - a.window) : 0;
  pl.n = a.n_keys - pl.lo;
  pl.np = round16(pl.n);
  for (int64_t bi = pl.lo / kKvBlock; pl.n > 0 && bi <= (a.n_keys - 1) / kKvBlock; ++bi)
    if (a.block_table[bi] < 0 || a.block_table[bi] >= c.num_blocks)
      return make_error("attention: block index " + std::to_string(a.block_table[bi]) + " (table entry " + std::to_string(bi) +
                        ") outside the cache's " + std::to_string(c.num_blocks) + " blocks");
  return pl;
}

// plan() plus the scratch a query needs alone.
Result<detail::AttnPlan> plan(const KvCache& c, const AttentionQuery& a, int64_t scratch_floats) {
  auto pl = plan(c, a);
  if (!pl) return pl;
  if (scratch_floats < query_scratch(a.nq, *pl))
    return make_error("attention: scratch of " + std::to_string(scratch_floats) + " floats, needs " +
                      std::to_string(query_scratch(a.nq, *pl)));
  return pl;
}

// The twin's q8_0 dot product: one exact int32 sum per 32-value block, an f32 FMA chain over
// the blocks (attention.h).
float dot_q8(const detail::QuantRow& q, const uint8_t* k, int64_t S) {
  float acc = 0.0f;
  for (int64_t b = 0; b < S / 32; ++b, k += gguf::kQ8_0Bytes) {
    int32_t i = 0;
    for (int64_t t = 0; t < 32; ++t) i += static_cast<int32_t>(q.q[b * 32 + t]) * static_cast<int8_t>(k[2 + t]);
    acc = math::fma_(static_cast<float>(i), q.d[b] * detail::q8_0_scale(k), acc);
  }
  return acc;
}

// The twin's dot product: 16 partial FMA chains over d, then tree16.
float dot16(const float* q, const float* k, int64_t S) {
  float acc[16] = {};
  for (int64_t d = 0; d < S; ++d) acc[d & 15] = math::fma_(q[d], k[d], acc[d & 15]);
  return math::tree16(acc);
}

void attention_scalar(const KvCache& c, const AttentionQuery& a, const detail::AttnPlan& pl, float* scratch) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t S = c.head_size, Sv = c.v_size;
  float row[kMaxHalfRow];  // an f16 or q8_0 cache's row as f32
  for (int64_t qi = 0; qi < a.nq; ++qi) {
    const float* q = a.q + qi * a.q_stride;
    float* out = a.out + qi * a.out_stride;
    float* P = scratch + qi * pl.np;
    // scores: dot * scale, or softcap * tanh(dot * (scale / softcap))
    const float scale = detail::score_scale(a);
    if (c.q8()) {
      detail::QuantRow qq;
      detail::quantize_row(q, S, &qq);
      for (int64_t j = 0; j < pl.n; ++j) {
        const int64_t p = pl.lo + j;
        const auto* k = reinterpret_cast<const uint8_t*>(c.bytes_at(true, a.block_table[p / kKvBlock], a.kv_head, p % kKvBlock));
        P[j] = qq.finite ? dot_q8(qq, k, S) * scale : std::numeric_limits<float>::quiet_NaN();
      }
    } else {
      for (int64_t j = 0; j < pl.n; ++j) {
        const int64_t p = pl.lo + j;
        P[j] = dot16(q, key_row(c, a.block_table[p / kKvBlock], a.kv_head, p % kKvBlock, row), S) * scale;
      }
    }
    if (a.softcap != 0.0f)
      for (int64_t j = 0; j < pl.n; ++j) P[j] = a.softcap * math::tanh(P[j]);
    // softmax weights
    float mx = ninf;
    for (int64_t j = 0; j < pl.n; ++j) mx = math::vmax(P[j], mx);
    for (int64_t d = 0; d < Sv; ++d) out[d] = 0.0f;
    if (mx == ninf) continue;  // no keys, or all scores -inf: zeros
    float acc[16] = {};
    for (int64_t j = 0; j < pl.n; ++j) {
      P[j] = math::exp(P[j] - mx);
      acc[j & 15] = acc[j & 15] + P[j];
    }
    const float sum = math::tree16(acc);
    // weighted values, key order
    for (int64_t j = 0; j < pl.n; ++j) {
      const int64_t p = pl.lo + j;
      const float* v = value_row(c, a.block_table[p / kKvBlock], a.kv_head, p % kKvBlock, row);
      for (int64_t d = 0; d < Sv; ++d) out[d] = math::fma_(P[j], v[d], out[d]);
    }
    for (int64_t d = 0; d < Sv; ++d) out[d] = out[d] / sum;
  }
}

// Queries per tile by rows alone: min(kAttentionTile, max(1, kAttentionTileRows / nq)).
int64_t tile_limit(int64_t nq) {
  return std::min<int64_t>(kAttentionTile, std::max<int64_t>(1, kAttentionTileRows / std::max<int64_t>(1, nq)));
}

// Runs checked queries (each fits the scratch alone): the twin one query at a time; SIMD in tiles of
// consecutive queries with the same kv head, block table and nq, as many as the scratch and
// tile_limit allow. Bits per query do not depend on the tiles.
void run_queries(Isa isa, const KvCache& c, const AttentionQuery* a, const detail::AttnPlan* pl, int64_t count,
                 float* scratch, int64_t scratch_floats) {
  if (isa != Isa::avx512 && isa != Isa::avx2) {
    for (int64_t i = 0; i < count; ++i) attention_scalar(c, a[i], pl[i], scratch);
    return;
  }
  for (int64_t i = 0; i < count;) {
    const int64_t nq = a[i].nq, most = tile_limit(nq);
    int64_t k = 1, maxnp = pl[i].np;
    while (i + k < count && k < most && a[i + k].kv_head == a[i].kv_head && a[i + k].block_table == a[i].block_table &&
           a[i + k].nq == nq) {
      const int64_t np = std::max(maxnp, pl[i + k].np);
      if ((k + 1) * nq * (np + 17) > scratch_floats) break;
      maxnp = np, ++k;
    }
    detail::AttnTile t;
    t.a = a + i, t.pl = pl + i, t.count = k, t.scratch = scratch, t.stride = maxnp + 16;
    if (isa == Isa::avx512) detail::attention_tile_avx512(c, t);
    else detail::attention_tile_avx2(c, t);
    i += k;
  }
}

}  // namespace

namespace detail {
void quantize_row(const float* x, int64_t n, QuantRow* out) {
  out->finite = true;
  for (int64_t i = 0; i < n; ++i) out->finite = out->finite && std::isfinite(x[i]);
  if (!out->finite) return;  // its scores are NaN; its codes unused
  uint8_t blocks[kMaxHalfRow / 32 * gguf::kQ8_0Bytes];
  gguf::quantize_q8_0(x, n, blocks);
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = blocks + b * gguf::kQ8_0Bytes;
    std::memcpy(out->q + b * 32, blk + 2, 32);
    out->d[b] = q8_0_scale(blk);
    int32_t sum = 0;
    for (int t = 0; t < 32; ++t) sum += out->q[b * 32 + t];
    out->bias[b] = -128 * sum;
  }
}
float q8_0_scale(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
  float d;
  from_f16_quiet(Isa::scalar, &h, 1, &d);
  return d;
}
}  // namespace detail

int64_t attention_scratch_floats(int64_t nq, int64_t n_keys) { return nq * (round16(std::max<int64_t>(0, n_keys)) + 17); }

int64_t attention_tile_queries(int64_t nq, int64_t max_keys) {
  const int64_t per = std::max<int64_t>(1, attention_scratch_floats(std::max<int64_t>(1, nq), max_keys));
  return std::min(tile_limit(nq), std::max<int64_t>(1, kAttentionTileScratch / per));
}

int64_t attention_queries_scratch_floats(int64_t count, int64_t nq, int64_t max_keys) {
  return std::max<int64_t>(1, count) * attention_scratch_floats(nq, max_keys);
}

Status attention(Isa isa, const KvCache& c, const AttentionQuery& a, float* scratch, int64_t scratch_floats) {
  if (auto st = check_cache(c); !st) return st;
  auto pl = plan(c, a, scratch_floats);
  if (!pl) return pl.error();
  run_queries(isa, c, &a, &*pl, 1, scratch, scratch_floats);
  return {};
}

Status attention_queries(Isa isa, const KvCache& c, const AttentionQuery* a, int64_t count, float* scratch,
                         int64_t scratch_floats) {
  if (auto st = check_cache(c); !st) return st;
  if (count < 0) return make_error("attention: negative query count " + std::to_string(count));
  for (int64_t i = 0; i < count; ++i)
    if (auto pl = plan(c, a[i], scratch_floats); !pl)
      return make_error("query " + std::to_string(i) + ": " + pl.error().what, pl.error().hint);
  detail::AttnPlan pl[kAttentionTile];
  for (int64_t i = 0; i < count; i += kAttentionTile) {
    const int64_t k = std::min(kAttentionTile, count - i);
    for (int64_t j = 0; j < k; ++j) pl[j] = *plan(c, a[i + j]);
    run_queries(isa, c, a + i, pl, k, scratch, scratch_floats);
  }
  return {};
}

int64_t attention_rows_scratch_floats(const KvCache& c, const AttentionBatch& b, int64_t max_keys) {
  const int64_t group = c.kv_heads > 0 ? b.q_heads / c.kv_heads : 0;
  return attention_queries_scratch_floats(attention_tile_queries(group, max_keys), group, max_keys);
}

void queue_rows(const KvCache& c, const AttentionBatch& b, int64_t i0, int64_t i1, SidePrefetch& q) {
  const int64_t P = b.row_parts > 0 ? b.row_parts : 1;
  if (c.kv_heads <= 0) return;
  for (int64_t i = std::max<int64_t>(0, i0); i < std::min(i1, attention_items(c, b)); ++i) {
    if (i % P != 0 && i != i0) continue;  // the other parts of a (token, kv head) read the same rows
    const int64_t t = i / (c.kv_heads * P), kvh = i / P % c.kv_heads, s = b.seq ? b.seq[t] : 0;
    if (s < 0 || s >= b.n_seqs) continue;
    const int64_t len = b.block_begins[s + 1] - b.block_begins[s];  // keys beyond the table: not queued
    const int64_t n_keys = std::min<int64_t>(static_cast<int64_t>(b.positions[t]) + 1, len * kKvBlock);
    detail::for_each_block_rows(b.block_indices + b.block_begins[s], n_keys, b.window, [&](int64_t block, int64_t s0, int64_t n) {
      if (block < 0 || block >= c.num_blocks) return;
      for (bool is_k : {true, false}) q.add(c.bytes_at(is_k, block, kvh, s0), c.rows_bytes(is_k, n));
    });
  }
}

Status attention_rows(Isa isa, const KvCache& c, const AttentionBatch& b, int64_t i0, int64_t i1, float* scratch,
                      int64_t scratch_floats) {
  if (auto st = check_cache(c); !st) return st;
  if (b.q_heads <= 0 || b.q_heads % c.kv_heads != 0)
    return make_error("attention: " + std::to_string(b.q_heads) + " query heads are not a positive multiple of " +
                      std::to_string(c.kv_heads) + " kv heads");
  if (b.row_parts < 1)
    return make_error("attention: row_parts must be >= 1, got " + std::to_string(b.row_parts));
  if ((b.k_new != nullptr) != (b.v_new != nullptr) || (b.k_new && b.row_parts != 1))
    return make_error("attention: new rows need both k_new and v_new, and row_parts 1 (one item writes each row)");
  if (i0 < 0 || i1 > attention_items(c, b) || i0 > i1)
    return make_error("attention: item range [" + std::to_string(i0) + ", " + std::to_string(i1) + ") outside [0, " +
                      std::to_string(attention_items(c, b)) + ")");
  // "heads" below are the (kv head, row part) pairs: Hk of them, item i = t * Hk + v
  const int64_t group = b.q_heads / c.kv_heads, P = b.row_parts, Hk = c.kv_heads * P, sub = (group + P - 1) / P;
  auto rows_of = [&](int64_t v) { return std::max<int64_t>(0, std::min(group, (v % P + 1) * sub) - v % P * sub); };
  auto query = [&](int64_t t, int64_t v) {
    const int64_t s = b.seq ? b.seq[t] : 0, kvh = v / P, r0 = kvh * group + v % P * sub;
    AttentionQuery a;
    a.q = b.q + t * b.q_stride + r0 * c.head_size;
    a.q_stride = c.head_size;
    a.out = b.out + t * b.out_stride + r0 * c.v_size;
    a.out_stride = c.v_size;
    a.nq = rows_of(v);
    a.kv_head = kvh;
    a.block_table = b.block_indices + b.block_begins[s];
    a.table_len = b.block_begins[s + 1] - b.block_begins[s];
    a.n_keys = static_cast<int64_t>(b.positions[t]) + 1;
    a.window = b.window;
    a.scale = b.scale;
    a.softcap = b.softcap;
    return a;
  };
  // every item is checked before anything is written
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t t = i / Hk, v = i % Hk;
    const int64_t s = b.seq ? b.seq[t] : 0;
    if (s < 0 || s >= b.n_seqs)
      return make_error("attention: token " + std::to_string(t) + " has sequence " + std::to_string(s) + " outside [0, " +
                        std::to_string(b.n_seqs) + ")");
    const int64_t pos = b.positions[t];
    if (pos < 0) return make_error("attention: token " + std::to_string(t) + " has negative position " + std::to_string(pos));
    if (rows_of(v) == 0) continue;  // an empty part
    if (auto pl = plan(c, query(t, v), scratch_floats); !pl)
      return make_error("token " + std::to_string(t) + ": " + pl.error().what, pl.error().hint);
    auto seq_of = [&](int64_t u) { return b.seq ? b.seq[u] : 0; };
    if (b.k_new && ((t > 0 && seq_of(t - 1) == s) || (t + 1 < b.tokens && seq_of(t + 1) == s)))
      return make_error("attention: token " + std::to_string(t) + " is not its sequence's only token; new rows are written in the batch only when each sequence has one",
                        "write the rows with kv_write first");
  }
  // item (t, v)'s new rows, when the batch brings them (the block of position pos is checked by plan)
  auto write_rows = [&](int64_t t, int64_t v) {
    if (!b.k_new) return;
    const AttentionQuery a = query(t, v);
    const int64_t pos = b.positions[t];
    kv_write_head(isa, c, a.block_table[pos / kKvBlock], a.kv_head, pos % kKvBlock,
               b.k_new + (t * c.kv_heads + a.kv_head) * c.head_size, b.v_new + (t * c.kv_heads + a.kv_head) * c.v_size);
  };
  // per (kv head, part), its tokens in [i0, i1) in order; tiles break where the sequence changes
  AttentionQuery a[kAttentionTile];
  detail::AttnPlan pl[kAttentionTile];
  auto t_range = [&](int64_t v, int64_t* t0, int64_t* t1) {
    *t0 = i0 <= v ? 0 : (i0 - v + Hk - 1) / Hk, *t1 = i1 <= v ? 0 : (i1 - v + Hk - 1) / Hk;
  };
  // The first query after kv head v's tokens (the next tile when v's last one runs), if any.
  auto first_after = [&](int64_t v, AttentionQuery* nx) {
    for (int64_t w = v + 1; w < Hk; ++w) {
      int64_t t0, t1;
      t_range(w, &t0, &t1);
      if (rows_of(w) > 0 && t0 < t1) return *nx = query(t0, w), true;
    }
    return false;
  };
  for (int64_t v = 0; v < Hk; ++v) {
    int64_t t0, t1;
    t_range(v, &t0, &t1);
    int64_t k = 0;
    if (rows_of(v) == 0) continue;
    for (int64_t t = t0; t < t1; ++t) {
      if (k > 0 && (k == kAttentionTile || a[k - 1].block_table != b.block_indices + b.block_begins[b.seq ? b.seq[t] : 0])) {
        const AttentionQuery nx = query(t, v);
        detail::prefetch_query(c, nx);  // its keys and values arrive while this tile computes
        run_queries(isa, c, a, pl, k, scratch, scratch_floats);
        k = 0;
      }
      write_rows(t, v);
      a[k] = query(t, v);
      pl[k] = *plan(c, a[k]);
      ++k;
    }
    if (k > 0) {
      AttentionQuery nx;
      if (first_after(v, &nx)) detail::prefetch_query(c, nx);
      run_queries(isa, c, a, pl, k, scratch, scratch_floats);
    }
  }
  return {};
}

Status kv_write(Isa isa, const KvCache& c, const int32_t* block_table, int64_t table_len, int64_t pos,
                const float* k, const float* v) {
  if (auto st = check_cache(c); !st) return st;
  if (pos < 0 || pos >= table_len * kKvBlock)
    return make_error("kv_write: position " + std::to_string(pos) + " outside the block table's " +
                      std::to_string(table_len * kKvBlock) + " slots");
  const int64_t b = block_table[pos / kKvBlock];
  if (b < 0 || b >= c.num_blocks)
    return make_error("kv_write: block index " + std::to_string(b) + " outside the cache's " + std::to_string(c.num_blocks) + " blocks");
  for (int64_t h = 0; h < c.kv_heads; ++h)
    kv_write_head(isa, c, b, h, pos % kKvBlock, k + h * c.head_size, v + h * c.v_size);
  return {};
}

}  // namespace ggflow::cpu
