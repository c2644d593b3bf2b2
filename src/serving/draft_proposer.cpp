// DraftModelProposer (see draft_proposer.h).
#include "serving/draft_proposer.h"

#include <algorithm>
#include <chrono>

#include "runtime/greedy.h"

namespace ggflow::serving {

namespace {

// Appends a subsequence of `tokens` at positions [past, past + n) to `b`, its last row sampled
// if `sample`.
void add_chunk(runtime::ScheduledBatch& b, RequestId id, const std::vector<int32_t>& table, int64_t past,
               std::span<const int32_t> tokens, bool sample) {
  if (b.subsequence_begins.empty()) b.subsequence_begins.push_back(0), b.block_indices_begins.push_back(0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.input_ids.push_back(tokens[i]);                // [T]
    b.position_ids.push_back(int32_t(past + int64_t(i)));  // [T]
  }
  b.past_lens.push_back(int32_t(past));
  b.subsequence_begins.push_back(int32_t(b.input_ids.size()));
  b.block_indices.insert(b.block_indices.end(), table.begin(), table.end());
  b.block_indices_begins.push_back(int32_t(b.block_indices.size()));
  b.max_context_len = std::max(b.max_context_len, int32_t(past + int64_t(tokens.size())));
  b.seq_ids.push_back(id);
  if (sample) {
    b.sampled_tokens_indices.push_back(int32_t(b.input_ids.size()) - 1);
    b.sampled_seq.push_back(int32_t(b.seq_ids.size()) - 1);
  }
}

}  // namespace

DraftModelProposer::DraftModelProposer(runtime::BatchRunner& runner, int32_t num_blocks, double cost_per_token,
                                       int32_t max_chunk)
    : runner_(runner), blocks_(num_blocks, false), cost_(cost_per_token), max_chunk_(std::max(1, max_chunk)) {}

std::vector<int32_t> DraftModelProposer::cached_tokens(RequestId id) const {
  auto it = cached_.find(id);
  return it == cached_.end() ? std::vector<int32_t>{} : it->second;
}

void DraftModelProposer::forget(RequestId id) {
  blocks_.free(id);
  cached_.erase(id);
}

Status DraftModelProposer::propose(std::span<DraftRequest> requests) {
  // 1. Catch up: each request's tokens past the common prefix with what the cache holds.
  runtime::ScheduledBatch b;
  std::vector<DraftRequest*> active;  // sampled subsequences of `b`, in order
  for (DraftRequest& r : requests) {
    r.draft->clear();
    std::vector<int32_t>& c = cached_[r.id];
    const int64_t len = int64_t(r.tokens.size());
    auto diff = std::mismatch(c.begin(), c.end(), r.tokens.begin(), r.tokens.end());
    const int64_t valid = std::min<int64_t>(diff.first - c.begin(), len - 1);  // >= 1 token to run
    c.resize(size_t(valid));
    blocks_.truncate(r.id, valid);
    const int64_t n = std::min<int64_t>(len - valid, max_chunk_);
    if (!blocks_.allocate(r.id, valid + n)) continue;  // the draft's pool is full: no draft
    const bool complete = valid + n == len;
    add_chunk(b, r.id, blocks_.table(r.id), valid, r.tokens.subspan(size_t(valid), size_t(n)), complete);
    c.insert(c.end(), r.tokens.begin() + valid, r.tokens.begin() + valid + n);
    if (complete) active.push_back(&r);
  }
  // 2. One batch per draft token: the catch-up's rows give the first, each decode batch the next.
  for (bool catch_up = true; !b.empty(); catch_up = false) {
    b.fresh_blocks = blocks_.drain_fresh_blocks();
    const auto t0 = std::chrono::steady_clock::now();
    auto logits = runner_.forward(b);
    if (!catch_up && logits)  // a decode batch: what one more draft token costs
      update_mean(pass_s_, pass_n_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!logits) {  // the draft cache may be partly written: forget it all
      for (DraftRequest& r : requests) forget(r.id), r.draft->clear();
      return logits.error();
    }
    b = runtime::ScheduledBatch();
    std::vector<DraftRequest*> next;
    for (size_t i = 0; i < active.size(); ++i) {
      DraftRequest& r = *active[i];
      auto row = logits->row(int64_t(i));  // f32 [vocab]
      if (runtime::non_finite(row)) continue;  // no draft from a broken row
      r.draft->push_back(runtime::argmax(row));
      if (lookup_) {  // a cut head: an id beyond it, where prompt lookup continues with one
        text_.assign(r.tokens.begin(), r.tokens.end());
        text_.insert(text_.end(), r.draft->begin(), r.draft->end() - 1);
        lookup_->propose_one(text_, 1, found_);
        if (!found_.empty() && found_[0] >= int64_t(row.size())) r.draft->back() = found_[0];
      }
      if (int32_t(r.draft->size()) >= r.max_tokens) continue;
      std::vector<int32_t>& c = cached_[r.id];
      const auto past = int64_t(c.size());
      if (!blocks_.allocate(r.id, past + 1)) continue;
      c.push_back(r.draft->back());  // its K/V is written by the next batch
      add_chunk(b, r.id, blocks_.table(r.id), past, std::span<const int32_t>(&c.back(), 1), true);
      next.push_back(&r);
    }
    b.num_decode_seqs = b.num_seqs();
    active = std::move(next);
  }
  return {};
}

}  // namespace ggflow::serving
