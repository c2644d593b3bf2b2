// A fake paged model for scheduler tests.
//
// It simulates the paged KV cache at token granularity: `kv_[block * 32 + slot]` holds the token id
// whose K/V was written there. Each forward() checks the batch's structure (prefix sums from 0,
// positions continuing past_lens, block tables covering past_lens + new tokens, no block written
// while another subsequence of the batch holds it, sampled rows = last rows of complete sequences
// and the rows of prompt positions still to be scored for prompt log-probabilities),
// writes the new tokens into their slots, then reads every subsequence's whole context back
// through its block table and checks it is exactly that sequence's history (prompt + generated,
// from the engine, then the drafts of a verification chunk). The logits of a sampled row are a hash
// of the context up to that row *as read from the simulated cache*, so they depend only on the
// sequence's history: the runner is batch-invariant, and a wrong block table or a bad prefix-cache
// hit changes the output as well as failing the check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/paged_batch.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ggflow::serving::testing {

// The fake model: the logits row after `ctx` (f32 [vocab], values in [0, 1)).
inline void fake_logits(std::span<const int32_t> ctx, int64_t vocab, std::vector<float>& out) {
  const uint64_t h = XXH3_64bits(ctx.data(), ctx.size() * sizeof(int32_t));
  for (int64_t v = 0; v < vocab; ++v) {
    uint64_t x = h ^ (uint64_t(v) * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    out.push_back(float(x >> 40) / float(1 << 24));
  }
}

class FakePagedRunner : public BatchRunner {
 public:
  using Truth = std::function<std::vector<int32_t>(RequestId)>;  // a sequence's tokens now
  using Drafts = std::function<std::vector<int32_t>(RequestId)>;  // its drafts this step

  FakePagedRunner(int32_t num_blocks, int64_t vocab) : vocab_(vocab), kv_(size_t(num_blocks) * 32, -1) {}
  // Positions [lo, hi) of a request whose rows must come back besides the sampled one
  // (RequestParams::prompt_logprobs: the prompt positions not yet scored).
  using PromptRows = std::function<std::pair<int64_t, int64_t>(RequestId)>;
  void set_truth(Truth t, Drafts d = {}, PromptRows p = {}) {
    truth_ = std::move(t), drafts_ = std::move(d), prompt_rows_ = std::move(p);
  }

  Result<LogitsRows> forward(const ScheduledBatch& b) override {
    ++steps;
    if (keep_log) log.push_back(b);
    if (fail_next) {
      fail_next = false;
      return make_error("injected runner failure", "");
    }
    check(b);
    rows_.clear();
    for (size_t r = 0; r < b.sampled_tokens_indices.size(); ++r) {
      const int32_t s = b.sampled_seq[r];
      const int64_t n = b.position_ids[size_t(b.sampled_tokens_indices[r])] + 1;  // the context up to the row
      std::vector<int32_t> ctx = read_context(b, s, n);  // i32 [n], as stored in the cache
      fake_logits(ctx, vocab_, rows_);
    }
    if (edit_logits) edit_logits(b, std::span<float>(rows_), vocab_);
    return LogitsRows{vocab_, rows_};
  }

  // First structural or KV violation seen ("" if none); tests assert it stays empty.
  std::string failure;
  int64_t steps = 0;
  bool fail_next = false;
  bool keep_log = false;
  std::vector<ScheduledBatch> log;
  // Tests of bad model output: called on each step's logits ([rows, vocab]) before they are returned.
  std::function<void(const ScheduledBatch&, std::span<float> rows, int64_t vocab)> edit_logits;

 private:
  void fail(const std::string& what) {
    if (failure.empty()) failure = "step " + std::to_string(steps) + ": " + what;
  }
  int32_t slot_of(const ScheduledBatch& b, int32_t s, int64_t pos) const {
    return b.block_indices[size_t(b.block_indices_begins[size_t(s)] + pos / 32)] * 32 + int32_t(pos % 32);
  }
  std::vector<int32_t> read_context(const ScheduledBatch& b, int32_t s, int64_t n) const {
    std::vector<int32_t> ctx;
    for (int64_t p = 0; p < n; ++p) ctx.push_back(kv_[size_t(slot_of(b, s, p))]);
    return ctx;
  }

  void check(const ScheduledBatch& b) {
    const size_t B = b.past_lens.size(), T = b.input_ids.size();
    if (T == 0 || B == 0) return fail("empty batch");
    if (b.subsequence_begins.size() != B + 1 || b.block_indices_begins.size() != B + 1 || b.seq_ids.size() != B)
      return fail("begins arrays are not [B+1]");
    if (b.subsequence_begins[0] != 0 || b.block_indices_begins[0] != 0) return fail("prefix sums do not start at 0");
    if (size_t(b.subsequence_begins[B]) != T || size_t(b.block_indices_begins[B]) != b.block_indices.size())
      return fail("prefix sums do not end at the totals");
    if (b.position_ids.size() != T) return fail("position_ids is not [T]");
    if (b.sampled_tokens_indices.size() != b.sampled_seq.size()) return fail("sampled_seq is not [R]");
    std::vector<std::set<int32_t>> tables(B);
    int32_t max_ctx = 0;
    std::vector<int32_t> expect_sampled;
    for (size_t s = 0; s < B; ++s) {
      const int32_t n = b.subsequence_begins[s + 1] - b.subsequence_begins[s];
      const int32_t past = b.past_lens[s];
      if (n < 1) return fail("subsequence without tokens");
      if (int32_t(s) < b.num_decode_seqs && n != 1) return fail("decode row with more than one token");
      const int32_t nb = b.block_indices_begins[s + 1] - b.block_indices_begins[s];
      if (nb != (past + n + 31) / 32) return fail("block table does not cover past_lens + new tokens");
      for (int32_t i = 0; i < nb; ++i) {
        const int32_t blk = b.block_indices[size_t(b.block_indices_begins[s] + i)];
        if (blk < 0 || size_t(blk) * 32 >= kv_.size()) return fail("block id out of range");
        if (!tables[s].insert(blk).second) return fail("a table holds a block twice");
      }
      const std::vector<int32_t> tokens = truth_(b.seq_ids[s]), truth = full(b.seq_ids[s]);
      if (size_t(past + n) > truth.size()) return fail("chunk runs past the sequence");
      for (int32_t i = 0; i < n; ++i) {
        const size_t row = size_t(b.subsequence_begins[s] + i);
        if (b.position_ids[row] != past + i) return fail("positions do not continue past_lens");
        if (b.input_ids[row] != truth[size_t(past + i)]) return fail("input id is not the sequence's token");
      }
      max_ctx = std::max(max_ctx, past + n);
      if (truth.size() > tokens.size()) {  // a verification chunk: pending token and drafts, all sampled
        if (size_t(past + n) != truth.size() || size_t(past + 1) != tokens.size())
          return fail("a verification chunk is not the pending token and all its drafts");
        for (int32_t i = 0; i < n; ++i) expect_sampled.push_back(b.subsequence_begins[s] + i);
      } else {
        const auto [lo, hi] = prompt_rows_ ? prompt_rows_(b.seq_ids[s]) : std::pair<int64_t, int64_t>{0, 0};
        for (int32_t i = 0; i < n; ++i)
          if (past + i >= lo && past + i < hi) expect_sampled.push_back(b.subsequence_begins[s] + i);
        if (size_t(past + n) == truth.size()) expect_sampled.push_back(b.subsequence_begins[s + 1] - 1);
      }
    }
    if (b.max_context_len != max_ctx) return fail("max_context_len is wrong");
    if (expect_sampled != b.sampled_tokens_indices) return fail("sampled_tokens_indices are wrong");
    for (size_t r = 0; r < b.sampled_seq.size(); ++r) {
      const int32_t s = b.sampled_seq[r], row = b.sampled_tokens_indices[r];
      if (row < b.subsequence_begins[size_t(s)] || row >= b.subsequence_begins[size_t(s) + 1]) return fail("sampled_seq is wrong");
    }
    // Writes: a block being written must belong to this subsequence only.
    for (size_t s = 0; s < B; ++s) {
      const int32_t past = b.past_lens[s], n = b.subsequence_begins[s + 1] - b.subsequence_begins[s];
      for (int32_t i = 0; i < n; ++i) {
        const int32_t slot = slot_of(b, int32_t(s), past + i);
        for (size_t o = 0; o < B; ++o)
          if (o != s && tables[o].count(slot / 32)) return fail("a block is written while another sequence holds it");
        kv_[size_t(slot)] = int32_t(b.input_ids[size_t(b.subsequence_begins[s] + i)]);
      }
    }
    // Reads: every sequence sees exactly its own history through its table.
    for (size_t s = 0; s < B; ++s) {
      const int32_t n = b.past_lens[s] + b.subsequence_begins[s + 1] - b.subsequence_begins[s];
      const std::vector<int32_t> truth = full(b.seq_ids[s]);
      if (read_context(b, int32_t(s), n) != std::vector<int32_t>(truth.begin(), truth.begin() + n))
        return fail("request " + std::to_string(b.seq_ids[s]) + " reads K/V that is not its history");
    }
  }

  std::vector<int32_t> full(RequestId id) const {  // tokens, then drafts
    std::vector<int32_t> t = truth_(id);
    if (drafts_) {
      const std::vector<int32_t> d = drafts_(id);
      t.insert(t.end(), d.begin(), d.end());
    }
    return t;
  }

  int64_t vocab_;
  std::vector<float> rows_;  // the last forward's logits (LogitsRows views them)
  std::vector<int32_t> kv_;  // token id written in each slot, -1 = never
  Truth truth_;
  Drafts drafts_;
  PromptRows prompt_rows_;
};

}  // namespace ggflow::serving::testing
