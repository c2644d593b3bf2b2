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
//   s_j    = dot_j * scale
//   m      = max_j s_j                       (exact in any order)
//   p_j    = math::exp(s_j - m)
//   sum    = math::tree16 of 16 partial sums over j: acc[j % 16] += p_j, in order from +0
//   o[d]   = fma(p_j, v_p[d], o[d]) for j in key order from +0, then out[d] = o[d] / sum
// No keys (n_keys == 0) or all scores -inf give zeros (as the IR). NaN in q, K or V gives NaN
// (which NaN unspecified).
// SIMD: scores run 16 keys (AVX-512) or 8 keys (AVX2) at a time, each key's 16 partials in its
// own register(s), then a transposed reduction that performs exactly the tree16 additions; the V
// sum runs lanes over d. Against the IR's attention row (sequential dot and sums, libm exp, mul
// then add) the difference is summation order, FMA and exp's < 1 ulp. Tested
// (test_kernels_attention): |out - ref| <= 2e-6 max|v| against a double reference (6e-8 measured)
// and against ir/attention_row.h itself (1.4e-7 measured).
// Element type: f32 cache. (An f16 cache changes only the K/V row loads.)
#pragma once

#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"

namespace ggflow::cpu {

inline constexpr int64_t kKvBlock = 32;  // tokens per cache block

// One layer's cache: k [num_blocks, kv_heads, 32, head_size], v [num_blocks, kv_heads, 32, v_size].
struct KvCache {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0, kv_heads = 0, head_size = 0, v_size = 0;
};

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
};

// Floats of scratch `attention` needs: nq * (round_up(keys in range, 16) + 1).
int64_t attention_scratch_floats(int64_t nq, int64_t n_keys);
// Errors: bad cache dims, kv_head, n_keys beyond the table, block ids outside the cache, scratch
// too small. Nothing is written on error. `out` must not overlap q, the cache or the scratch.
Status attention(Isa isa, const KvCache& cache, const AttentionQuery& a, float* scratch, int64_t scratch_floats);

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
};

// Work items: i = t * kv_heads + kv_head (the group of q heads of that kv head for token t).
inline int64_t attention_items(const KvCache& c, const AttentionBatch& b) { return b.tokens * c.kv_heads; }
// Scratch for attention_rows: attention_scratch_floats(group, max_keys), max_keys = max position + 1.
int64_t attention_rows_scratch_floats(const KvCache& c, const AttentionBatch& b, int64_t max_keys);
// Items [i0, i1). Each item's bits are independent of the range, the batch and the thread.
Status attention_rows(Isa isa, const KvCache& cache, const AttentionBatch& b, int64_t i0, int64_t i1, float* scratch,
                      int64_t scratch_floats);

// Writes one token's k [kv_heads * head_size] and v [kv_heads * v_size] rows at position `pos`.
Status kv_write(const KvCache& cache, const int32_t* block_table, int64_t table_len, int64_t pos, const float* k,
                const float* v);

namespace detail {
// The checked, resolved query: lo, n (keys in range); the scratch holds nq rows of np =
// round_up(n, 16) weights, then nq floats (the sums).
struct AttnPlan {
  int64_t lo = 0, n = 0, np = 0;
};
void attention_avx2(const KvCache& c, const AttentionQuery& a, const AttnPlan& pl, float* scratch);
void attention_avx512(const KvCache& c, const AttentionQuery& a, const AttnPlan& pl, float* scratch);
}  // namespace detail

}  // namespace ggflow::cpu
