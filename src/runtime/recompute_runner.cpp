#include "runtime/recompute_runner.h"

#include <string>

namespace ggflow::runtime {

Result<std::unique_ptr<RecomputeRunner>> RecomputeRunner::create(const ModelFile& file, int32_t num_blocks) {
  auto raw = RawRunner::create(file);
  if (!raw) return raw.error();
  if (num_blocks <= 0) return make_error("num_blocks must be > 0");
  std::unique_ptr<RecomputeRunner> r(new RecomputeRunner());
  r->raw_ = std::move(*raw);
  r->slots_.assign(static_cast<size_t>(num_blocks) * ScheduledBatch::kBlockSize, -1);
  return r;
}

Result<LogitsRows> RecomputeRunner::forward(const ScheduledBatch& b) {
  constexpr int32_t bs = ScheduledBatch::kBlockSize;
  auto slot = [&](int32_t s, int64_t pos) -> Result<size_t> {
    const int64_t k = b.block_indices_begins[s] + pos / bs;
    if (k >= b.block_indices_begins[s + 1])
      return make_error("position " + std::to_string(pos) + " of subsequence " + std::to_string(s) +
                        " is past its block table");
    const size_t at = static_cast<size_t>(b.block_indices[k]) * bs + static_cast<size_t>(pos % bs);
    if (at >= slots_.size()) return make_error("block index " + std::to_string(b.block_indices[k]) + " is out of range");
    return at;
  };
  // Write: position past_lens[s] + i of subsequence s takes token input_ids[begin + i].
  for (int32_t s = 0; s < b.num_seqs(); ++s)
    for (int32_t t = b.subsequence_begins[s]; t < b.subsequence_begins[s + 1]; ++t) {
      auto at = slot(s, b.past_lens[s] + (t - b.subsequence_begins[s]));
      if (!at) return at.error();
      slots_[*at] = static_cast<int32_t>(b.input_ids[t]);
    }
  logits_.clear();
  for (size_t r = 0; r < b.sampled_tokens_indices.size(); ++r) {
    const int64_t row = b.sampled_tokens_indices[r];
    int32_t s = 0;
    while (s + 1 < b.num_seqs() && b.subsequence_begins[s + 1] <= row) ++s;
    const int64_t last = b.past_lens[s] + (row - b.subsequence_begins[s]);  // position of the row
    std::vector<int32_t> history(static_cast<size_t>(last + 1));
    for (int64_t p = 0; p <= last; ++p) {
      auto at = slot(s, p);
      if (!at) return at.error();
      if (slots_[*at] < 0) return make_error("position " + std::to_string(p) + " was read before it was written");
      history[static_cast<size_t>(p)] = slots_[*at];
    }
    raw_->reset();
    auto logits = raw_->step(history);
    if (!logits) return logits.error();
    logits_.insert(logits_.end(), logits->begin(), logits->end());
  }
  return LogitsRows{raw_->hparams().n_vocab, logits_};
}

}  // namespace ggflow::runtime
