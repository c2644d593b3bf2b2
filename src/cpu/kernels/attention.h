// Attention over the block KV cache: one kernel computes one query row of one head — or a group
// of query rows that share a kv head and a key range (the q heads of one GQA group for one
// token) — over keys stored in 32-token blocks [num_blocks, kv_heads, 32, head_size] and reached
// through the sequence's block table. The raw, SDPA and PagedAttention layouts all use this cache
// layout and this kernel, so they give the same bits by construction; the current chunk's K/V rows
// are written (kv_write) before they are read.
//
// Arithmetic (the scalar twin in attention.cpp; AVX2 and AVX-512 give the same bits). For a query
// q attending positions [lo, n_keys), lo = window > 0 ? max(0, n_keys - window) : 0, j = p - lo:
//   dot_j  = math::tree16 of 16 partial sums over d: acc[d % 16] = fma(q[d], k_p[d], acc[d % 16]),
//            d = 0..S-1 in order, from +0
//   s_j    = dot_j * scale                                  softcap == 0 (off)
//   s_j    = softcap * math::tanh(dot_j * (scale / softcap))  softcap != 0: the logit soft-cap of
//            Gemma 2 (llama.cpp's FLASH_ATTN_EXT logit_softcap); scale / softcap is one f32
//            division per query (detail::score_scale), then f32 mul, math::tanh (math.h: the one
//            tanh of every ISA), f32 mul. The masks (causal, window) are key ranges, so the
//            additive mask of the graph (0 or -inf, added after the cap) is exactly "in range or not".
//   m      = max_j s_j                       (exact in any order)
//   p_j    = math::exp(s_j - m)
//   sum    = math::tree16 of 16 partial sums over j: acc[j % 16] += p_j, in order from +0
//   o[d]   = fma(p_j, v_p[d], o[d]) for j in key order from +0, then out[d] = o[d] / sum
// No keys (n_keys == 0) or all scores -inf give zeros (as the IR). NaN in q, K or V gives NaN
// (which NaN unspecified).
// SIMD: each row's scores, weights and value sums are computed exactly as above; what the SIMD
// versions change is only how rows share loads (none of it reaches a row's bits). The soft-cap is
// a pass over a row's stored scores, lanes over keys: m256/m512::tanh give math::tanh's bits per
// lane (test_kernels_math), the multiplies are the twin's.
//  - tiles: attention_queries / attention_rows run several query groups of one kv head and one
//    block table (consecutive tokens of a sequence) together: each 16-key chunk of K and each
//    block of V is loaded once for all the rows of the tile that see it. A row still uses only
//    the keys of its own range, in key order; the other rows of its tile, call or thread never
//    enter its arithmetic, so a token alone gives the same bits as inside any tile.
//  - scores, few rows on a chunk (decode): per row, 16 keys (AVX2: 8) at a time, each key's 16
//    partials in its own register(s), then a transposed reduction doing exactly tree16's adds;
//  - scores, many rows on a chunk (GQA groups, prefill tiles): the chunk is transposed once
//    (lanes over keys); per row, partial acc[i] of 16 (AVX2: 8) keys is one register, its FMA
//    chain runs over d = i, i+16, ... in order from +0, and tree16 combines the 16 registers
//    lane-wise (acc[i] + acc[i+8], then +4, +2, +1): the same operations on the same values;
//    scores outside a row's range are computed but never stored;
//  - the V sum runs lanes over d, several rows of the tile per pass over a block's keys (rows that
//    see the same keys of that block), one FMA chain per (row, lane) in key order, the running
//    sums kept in the output rows between blocks (f32 stores and loads are exact).
//  - a q8_0 cache's scores are integer dot products (below); its keys are transposed per 16-key
//    chunk as bytes (lanes over keys, 4 dims per lane), each 32-dim block one int32 sum per key.
// Against the IR's attention row (sequential dot and sums, libm exp and tanh, mul then add) the
// difference is summation order, FMA, exp's < 1 ulp and tanh's <= 2 ulp. Tested
// (test_kernels_attention): |out - ref| <= 2e-6 max|v| against a double reference (6e-8
// measured; soft-capped 2.3e-7) and against ir/attention_row.h itself (1.4e-7; soft-capped 4.4e-7).
// Element type: f32, f16 or q8_0 cache. An f16 cache holds each K/V value as IEEE half, rounded to
// nearest even when written (kv_write, gguf::f32_to_f16, numpy's astype(float16)) and read back
// exactly (convert.h); a q8_0 cache holds each head's row as GGML q8_0 blocks (gguf/quantize.h:
// llama.cpp's q8_0 cache values), read back exactly as d * q. An f16 cache's attention is then
// the bits of an f32 cache holding the same rounded values (the raw and SDPA layouts round with
// Converts before their caches). A q8_0 cache's values (V) are used the same way; its scores are
// llama.cpp's q8_0 arithmetic (its CPU flash attention converts the query to K's vec-dot type):
// the query row quantized as gguf::quantize_q8_0 (QuantRow), then
//   dot_j  = f32 chain over the 32-value blocks b in order from +0:
//            acc = fma((float) i_b, dq_b * dk_b, acc),  i_b = Σ_t qq_b[t] * kq_b[t] (exact int32)
// with dq_b, dk_b the blocks' f16 scales as f32 (their product is exact); a query row with a
// non-finite value has NaN scores. The raw and SDPA layouts give the same bits by running this
// kernel on q8_0 blocks too (SdpaAttrs::q8_0_scores). The SIMD versions convert a 16-key chunk of
// f16 K or a block of V to f32 when they load it (vcvtph2ps; q8_0: d times the widened codes,
// exact).
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"
#include "cpu/kernels/convert.h"
#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu {

inline constexpr int64_t kKvBlock = 32;  // tokens per cache block

// One layer's cache: k [num_blocks, kv_heads, 32, head_size], v [num_blocks, kv_heads, 32, v_size],
// f32 (k, v), f16 (k16, v16) or q8_0 (k8, v8: GGML's 34-byte blocks of 32 values, a row being
// head_size / 32 of them); the other pairs null.
struct KvCache {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0, kv_heads = 0, head_size = 0, v_size = 0;
  uint16_t* k16 = nullptr;
  uint16_t* v16 = nullptr;
  uint8_t* k8 = nullptr;
  uint8_t* v8 = nullptr;
  bool half() const { return k16 != nullptr; }
  bool q8() const { return k8 != nullptr; }
  // Elements per K (is_k) or V row, and where row `slot` of kv head kvh in block `block` starts
  // (in elements: a q8_0 row starts at element / 32 blocks).
  int64_t row(bool is_k) const { return is_k ? head_size : v_size; }
  int64_t at(bool is_k, int64_t block, int64_t kvh, int64_t slot) const {
    return ((block * kv_heads + kvh) * kKvBlock + slot) * row(is_k);
  }
  // Bytes of n elements (whole rows) whatever the element type.
  int64_t elem_bytes(int64_t n) const { return q8() ? n / 32 * 34 : n * (half() ? 2 : 4); }
  // The same row's first byte, and the bytes of n rows.
  const char* bytes_at(bool is_k, int64_t block, int64_t kvh, int64_t slot) const {
    const int64_t i = at(is_k, block, kvh, slot);
    if (q8()) return reinterpret_cast<const char*>(is_k ? k8 : v8) + elem_bytes(i);
    return half() ? reinterpret_cast<const char*>((is_k ? k16 : v16) + i) : reinterpret_cast<const char*>((is_k ? k : v) + i);
  }
  int64_t rows_bytes(bool is_k, int64_t n) const { return elem_bytes(n * row(is_k)); }
};
// Head and value sizes an f16 or q8_0 cache takes (a chunk of K and a block of V are converted on
// the stack); a q8_0 cache's also multiples of 32.
inline constexpr int64_t kMaxHalfRow = 512;

// A group of nq query rows sharing one kv head and one key range.
struct AttentionQuery {
  const float* q = nullptr;  // nq rows of head_size, row i at q + i*q_stride
  int64_t q_stride = 0;
  float* out = nullptr;      // nq rows of v_size, row i at out + i*out_stride
  int64_t out_stride = 0;
  int64_t nq = 1;
  int64_t kv_head = 0;
  const int32_t* block_table = nullptr;  // position p lives in block block_table[p / 32], slot p % 32
  int64_t table_len = 0;
  int64_t n_keys = 0;   // the query sees positions [lo, n_keys)
  int64_t window = 0;   // 0: off; else lo = max(0, n_keys - window)
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: off; else s_j = softcap * tanh(dot_j * (scale / softcap)) (Gemma 2)
};

// Floats of scratch `attention` needs: nq * (round_up(keys in range, 16) + 17).
int64_t attention_scratch_floats(int64_t nq, int64_t n_keys);
// Errors: bad cache dims, kv_head, n_keys beyond the table, block ids outside the cache, scratch
// too small. Nothing is written on error. `out` must not overlap q, the cache or the scratch.
Status attention(Isa isa, const KvCache& cache, const AttentionQuery& a, float* scratch, int64_t scratch_floats);

// Several queries at once (e.g. consecutive tokens of one sequence on one kv head, each with its
// own q, out, n_keys and window): consecutive queries with the same kv head, block table and nq
// are computed as tiles of up to kAttentionTile queries (and kAttentionTileRows rows, or one
// query) that load each K chunk and V block once, as many as the scratch holds. Every query's
// bits equal attention() on it alone, whatever the tiles. Errors as attention(), checked for
// every query before anything is written. The outs must not overlap.
inline constexpr int64_t kAttentionTile = 16;
inline constexpr int64_t kAttentionTileRows = 64;
inline constexpr int64_t kAttentionTileScratch = int64_t{1} << 18;  // floats: the weights of a tile stay cache-sized
// Queries per tile for groups of nq rows seeing up to max_keys keys: min(kAttentionTile,
// kAttentionTileRows / nq, kAttentionTileScratch / attention_scratch_floats(nq, max_keys)), >= 1.
int64_t attention_tile_queries(int64_t nq, int64_t max_keys);
// Scratch for tiles of `count` such queries: count * attention_scratch_floats(nq, max_keys).
int64_t attention_queries_scratch_floats(int64_t count, int64_t nq, int64_t max_keys);
Status attention_queries(Isa isa, const KvCache& cache, const AttentionQuery* a, int64_t count, float* scratch,
                         int64_t scratch_floats);

// A batch of tokens of one or more sequences (the PagedAttention inputs, on the CPU):
struct AttentionBatch {
  const float* q = nullptr;  // token t, q head h at q + t*q_stride + h*head_size
  int64_t q_stride = 0;
  float* out = nullptr;      // token t, q head h at out + t*out_stride + h*v_size
  int64_t out_stride = 0;
  int64_t tokens = 0, q_heads = 0;      // q_heads a multiple of kv_heads; kv head = h / (q_heads / kv_heads)
  const int32_t* positions = nullptr;   // [tokens]: token t attends positions 0..positions[t] (itself included)
  const int32_t* seq = nullptr;         // [tokens]: its sequence (nullptr: all sequence 0)
  const int32_t* block_indices = nullptr;  // sequence s's table: block_indices[block_begins[s] .. block_begins[s+1])
  const int32_t* block_begins = nullptr;   // [n_seqs + 1]
  int64_t n_seqs = 1;
  int64_t window = 0;
  float scale = 1.0f;
  float softcap = 0.0f;  // as AttentionQuery::softcap
  // Each (token, kv head) group of q heads as this many items of ceil(group / row_parts) q heads
  // (the last ones shorter or empty): more items than tokens x kv heads when those are fewer than
  // the threads (Gemma 3 decodes one token on one kv head). A q head's bits do not depend on it.
  int64_t row_parts = 1;
  // Optional, for a decode batch (each sequence has one token here, row_parts 1): token t's new
  // rows, k at k_new + t*kv_heads*head_size + kvh*head_size, v at v_new + t*kv_heads*v_size +
  // kvh*v_size. Item (t, kvh) writes its own rows (as kv_write) before it reads the cache, so the
  // writes run beside the attention on every thread instead of before it (no item reads another's
  // rows when every sequence has one token). nullptr: the rows are already in the cache.
  const float* k_new = nullptr;
  const float* v_new = nullptr;
};

// Work items: i = (t * kv_heads + kv_head) * row_parts + part (part p of the q heads of that kv
// head for token t).
inline int64_t attention_items(const KvCache& c, const AttentionBatch& b) {
  return b.tokens * c.kv_heads * (b.row_parts > 0 ? b.row_parts : 1);
}
// Scratch for attention_rows: attention_queries_scratch_floats(attention_tile_queries(group,
// max_keys), group, max_keys), max_keys = max position + 1 (less runs smaller tiles, down to one
// token: attention_scratch_floats(group, max_keys)).
int64_t attention_rows_scratch_floats(const KvCache& c, const AttentionBatch& b, int64_t max_keys);
// Items [i0, i1). Each item's bits are independent of the range, the batch and the thread. Within
// the range, consecutive tokens of one sequence on one kv head run as tiles (attention_queries);
// every item is checked before anything is written.
Status attention_rows(Isa isa, const KvCache& cache, const AttentionBatch& b, int64_t i0, int64_t i1, float* scratch,
                      int64_t scratch_floats);

// Queues (side_prefetch.h) every K/V row items [i0, i1) of batch b read in cache c, once per
// (token, kv head): the next layer's attention step reads the same rows of its own cache. Items
// whose sequence or blocks fall outside the batch or the cache are skipped.
void queue_rows(const KvCache& c, const AttentionBatch& b, int64_t i0, int64_t i1, SidePrefetch& q);

// Writes kv head kvh's K row k [head_size] and V row v [v_size] into slot `slot` of cache block
// `block` (unchecked: kv_write checks), rounded as kv_write rounds.
void kv_write_head(Isa isa, const KvCache& cache, int64_t block, int64_t kvh, int64_t slot, const float* k, const float* v);
// Writes one token's k [kv_heads * head_size] and v [kv_heads * v_size] rows at position `pos`;
// into an f16 cache rounded as gguf::f32_to_f16 (NaN -> sign | 0x7E00), into a q8_0 cache
// quantized per head row as gguf::quantize_q8_0 (to_q8_0), on every ISA bit for bit.
Status kv_write(Isa isa, const KvCache& cache, const int32_t* block_table, int64_t table_len, int64_t pos,
                const float* k, const float* v);

namespace detail {
// What dot_j is multiplied by: scale, or scale / softcap when soft-capping (then s_j is capped).
// `static` as math.h's functions: the SIMD files never share a copy built with their -m flags.
static inline float score_scale(const AttentionQuery& a) { return a.softcap != 0.0f ? a.scale / a.softcap : a.scale; }
// A query row quantized for a q8_0 cache's scores: its codes (gguf::quantize_q8_0), per 32-value
// block the scale as f32 and -128 * Σ codes (the SIMD kernels multiply the key codes + 128, as
// unsigned bytes: Σ (k + 128) q - 128 Σ q = Σ k q), and whether every value was finite.
struct QuantRow {
  alignas(64) int8_t q[kMaxHalfRow];
  float d[kMaxHalfRow / 32];
  int32_t bias[kMaxHalfRow / 32];
  bool finite = true;
};
void quantize_row(const float* x, int64_t n, QuantRow* out);
// A q8_0 block's scale (its first two bytes, f16) as f32, read as from_f16_quiet.
float q8_0_scale(const uint8_t* block);
// The checked, resolved query: lo, n (keys in range), np = round_up(n, 16).
struct AttnPlan {
  int64_t lo = 0, n = 0, np = 0;
};
// A tile: count queries with the same kv head, block table and nq; row r = qi * nq + h. Row r's
// weights live at scratch + r * stride + 16 (key p at index p - lo, stride >= 16 + np of every
// query: the 16 floats in front take the masked stores of a chunk that starts before lo), then the
// rows' sums at scratch + count * nq * stride.
struct AttnTile {
  const AttentionQuery* a = nullptr;
  const AttnPlan* pl = nullptr;
  int64_t count = 0;
  float* scratch = nullptr;
  int64_t stride = 0;
};
// The f32 K (is_k) or V rows [slot, slot + n) of kv head kvh in cache block `block`: in place for
// an f32 cache; for an f16 one, converted into buf (n rows) by from_f16_quiet (exact; kv_write
// never stores a signaling NaN); for a q8_0 one, dequantized into buf by from_q8_0 (exact).
inline const float* cache_rows(Isa isa, const KvCache& c, bool is_k, int64_t block, int64_t kvh, int64_t slot,
                               int64_t n, float* buf) {
  const int64_t at = c.at(is_k, block, kvh, slot);
  if (c.q8()) {
    from_q8_0(isa, reinterpret_cast<const uint8_t*>(c.bytes_at(is_k, block, kvh, slot)), n * c.row(is_k), buf);
    return buf;
  }
  if (!c.half()) return (is_k ? c.k : c.v) + at;
  from_f16_quiet(isa, (is_k ? c.k16 : c.v16) + at, n * c.row(is_k), buf);
  return buf;
}
// Prefetches rows [slot, slot + n) of kv head kvh in cache block `block` (K: is_k, else V) towards
// L1 (Hint 3) or L2 (Hint 1).
template <int Hint>
inline void prefetch_rows_hint(const KvCache& c, bool is_k, int64_t block, int64_t kvh, int64_t slot, int64_t n) {
  const char* p = c.bytes_at(is_k, block, kvh, slot);
  for (int64_t i = 0, bytes = c.rows_bytes(is_k, n); i < bytes; i += 64) __builtin_prefetch(p + i, 0, Hint);
}
// The SIMD tiles fetch the next K chunk and V block (into L1) while this one computes (a decode step
// finds the cache in DRAM, the weights having streamed through the caches), when the block id is
// inside the cache.
inline void prefetch_rows(const KvCache& c, bool is_k, int64_t block, int64_t kvh, int64_t slot, int64_t n) {
  if (block >= 0 && block < c.num_blocks) prefetch_rows_hint<3>(c, is_k, block, kvh, slot, n);
}
// The rows a query of n_keys keys (window as AttentionQuery::window) reads, block by block: f(block
// id from the table, first slot, slot count). The one place this range is walked outside the kernels.
template <class F>
inline void for_each_block_rows(const int32_t* table, int64_t n_keys, int64_t window, F&& f) {
  const int64_t lo = window > 0 ? std::max<int64_t>(0, n_keys - window) : 0;
  for (int64_t p0 = lo / kKvBlock * kKvBlock; p0 < n_keys; p0 += kKvBlock) {
    const int64_t s0 = std::max(lo, p0) - p0, s1 = std::min(n_keys, p0 + kKvBlock) - p0;
    f(static_cast<int64_t>(table[p0 / kKvBlock]), s0, s1 - s0);
  }
}
// Prefetches every K and V row a checked query reads, towards L2 (prefetcht2): attention_rows
// issues it for the next tile before running one, so that a decode batch's next (sequence, kv
// head) streams in while this one computes (one core's demand misses alone reach about a third of
// what its caches' bandwidth allows; measured in docs/BENCHMARKS.md).
inline void prefetch_query(const KvCache& c, const AttentionQuery& a) {
  for_each_block_rows(a.block_table, a.n_keys, a.window, [&](int64_t block, int64_t s0, int64_t n) {
    for (bool is_k : {true, false}) prefetch_rows_hint<1>(c, is_k, block, a.kv_head, s0, n);
  });
}
void attention_tile_avx2(const KvCache& c, const AttnTile& t);
void attention_tile_avx512(const KvCache& c, const AttnTile& t);
}  // namespace detail

}  // namespace ggflow::cpu
