#include "runtime/paged_runner.h"

#include <algorithm>
#include <initializer_list>

namespace ggflow::runtime {

namespace {
// `t` becomes an integer tensor of `type` and `shape` holding the int32 values `v`; its buffer is
// reused when the shape is unchanged (decode steps with the same sequences: no allocation).
void ints(ir::Tensor& t, ir::ElementType type, std::initializer_list<int64_t> shape, std::span<const int32_t> v) {
  if (t.empty_handle() || t.type() != type || !std::equal(t.shape().begin(), t.shape().end(), shape.begin(), shape.end()) ||
      !t.writable())
    t = ir::Tensor(type, std::vector<int64_t>(shape));
  if (type == ir::ElementType::i64) std::copy(v.begin(), v.end(), t.data<int64_t>());
  else std::copy(v.begin(), v.end(), t.data<int32_t>());
}
}  // namespace

Result<std::unique_ptr<PagedRunner>> PagedRunner::create(const ModelFile& file, int32_t num_blocks,
                                                         const CompileOptions& options) {
  auto m = file.layout_model(transforms::Layout::paged);
  if (!m) return m.error();
  return from_model(std::move(*m), file.n_logits(), num_blocks, options, file.lora_factors());
}

Result<std::unique_ptr<PagedRunner>> PagedRunner::from_model(ir::Model model, int64_t n_vocab, int32_t num_blocks,
                                                             const CompileOptions& options, std::vector<float> lora_factors) {
  if (num_blocks <= 0) return make_error("the KV cache needs at least one block", "raise the number of blocks");
  auto cm = compile(std::move(model), options);
  if (!cm) return cm.error();
  std::unique_ptr<PagedRunner> r(new PagedRunner());
  r->cm_ = std::move(*cm);
  r->n_vocab_ = n_vocab;
  const CompiledModel& c = *r->cm_;
  if (c.signature().caches.empty())
    return make_error("PagedRunner: the model has no paged caches", "convert it with SDPAToPagedAttention");
  if (auto st = c.bind_inputs({{&r->in_ids_, "input_ids"}, {&r->in_pos_, "position_ids"}, {&r->in_past_, "past_lens"},
                          {&r->in_sb_, "subsequence_begins"}, {&r->in_bi_, "block_indices"},
                          {&r->in_bib_, "block_indices_begins"}, {&r->in_max_, "max_context_len"},
                          {&r->in_sampled_, "sampled_tokens_indices"}}); !st) return st.error();
  if (auto st = r->lora_in_.bind(c, std::move(lora_factors)); !st) return st.error();
  auto lo = c.output("logits");
  if (!lo) return lo.error();
  r->out_logits_ = *lo;
  r->inputs_.resize(c.n_inputs());
  if (auto s = r->cm_->resize_caches(num_blocks); !s) return s.error();
  return r;
}

Result<LogitsRows> PagedRunner::forward(const ScheduledBatch& b) {
  const int64_t T = b.num_tokens(), B = b.num_seqs(), R = static_cast<int64_t>(b.sampled_tokens_indices.size());
  auto type = [&](size_t i) { return cm_->model().parameters()[cm_->signature().inputs[i]]->out_type(); };
  ints(inputs_[in_ids_], type(in_ids_), {T}, b.input_ids);                          // [T]
  ints(inputs_[in_pos_], type(in_pos_), {T}, b.position_ids);                       // [T]
  ints(inputs_[in_past_], type(in_past_), {B}, b.past_lens);                        // [B]
  ints(inputs_[in_sb_], type(in_sb_), {B + 1}, b.subsequence_begins);               // [B+1]
  ints(inputs_[in_bi_], type(in_bi_), {static_cast<int64_t>(b.block_indices.size())}, b.block_indices);
  ints(inputs_[in_bib_], type(in_bib_), {B + 1}, b.block_indices_begins);           // [B+1]
  ints(inputs_[in_max_], type(in_max_), {}, std::span<const int32_t>(&b.max_context_len, 1));
  ints(inputs_[in_sampled_], type(in_sampled_), {R}, b.sampled_tokens_indices);     // [R]
  if (lora_in_.size() > 0) {
    if (!b.lora.empty() && static_cast<int64_t>(b.lora.size()) != B)
      return make_error("PagedRunner: the batch names LoRA adapters for " + std::to_string(b.lora.size()) + " of its " + std::to_string(B) +
                        " subsequences", "give one adapter mask per subsequence");
    token_lora_.assign(static_cast<size_t>(T), 0);
    for (int64_t s = 0; s < static_cast<int64_t>(b.lora.size()); ++s) {
      if (auto st = lora_in_.check(b.lora[s]); !st) return st.error();
      std::fill(token_lora_.begin() + b.subsequence_begins[s], token_lora_.begin() + b.subsequence_begins[s + 1], b.lora[s]);
    }
    lora_in_.fill(inputs_, {T}, token_lora_);                                         // f32 [T]
  } else {
    for (uint64_t a : b.lora)
      if (auto st = lora_in_.check(a); !st) return st.error();
  }
  if (kv_poison_enabled())  // debug: the blocks handed out again hold NaN until this step writes them
    for (int32_t block : b.fresh_blocks) cm_->poison_cache_rows(block, 1);
  if (auto s = cm_->run(inputs_); !s) return s.error();
  const ir::Tensor& l = cm_->output(out_logits_);                                    // f32 [R, 1, V]
  if (l.type() != ir::ElementType::f32 || l.numel() != R * n_vocab_)
    return make_error("PagedRunner: logits are " + l.summary(0) + ", expected f32 with " + std::to_string(R * n_vocab_) + " values");
  return LogitsRows{n_vocab_, std::span<const float>(l.data<float>(), static_cast<size_t>(l.numel()))};
}

int PagedRunner::add_sequence() {
  seqs_.emplace_back();
  return static_cast<int>(seqs_.size()) - 1;
}

Result<LogitsRows> PagedRunner::step(const std::vector<Chunk>& chunks) {
  constexpr int32_t BS = ScheduledBatch::kBlockSize;
  ScheduledBatch b;
  b.subsequence_begins = {0};
  b.block_indices_begins = {0};
  int32_t next = next_block_;
  std::vector<bool> seen(seqs_.size(), false);
  for (const Chunk& c : chunks) {
    if (c.seq < 0 || c.seq >= static_cast<int>(seqs_.size()) || c.tokens.empty() || seen[c.seq])
      return make_error("PagedRunner::step: chunk of unknown sequence " + std::to_string(c.seq) +
                            ", without tokens, or a second chunk of the same sequence",
                        "one chunk per sequence and step");
    seen[c.seq] = true;
    Seq& s = seqs_[c.seq];
    const int64_t n = static_cast<int64_t>(c.tokens.size()), len = s.past + n;
    std::vector<int32_t> table = s.blocks;
    while (static_cast<int64_t>(table.size()) * BS < len) table.push_back(next++);  // tables grow in order
    for (int64_t i = 0; i < n; ++i) {
      b.input_ids.push_back(c.tokens[i]);
      b.position_ids.push_back(static_cast<int32_t>(s.past + i));
    }
    b.past_lens.push_back(static_cast<int32_t>(s.past));
    b.lora.push_back(c.lora);
    b.subsequence_begins.push_back(b.subsequence_begins.back() + static_cast<int32_t>(n));
    b.sampled_tokens_indices.push_back(b.subsequence_begins.back() - 1);  // the chunk's last row
    b.block_indices.insert(b.block_indices.end(), table.begin(), table.end());
    b.block_indices_begins.push_back(static_cast<int32_t>(b.block_indices.size()));
    b.max_context_len = std::max(b.max_context_len, static_cast<int32_t>(len));
  }
  if (next > cm_->cache_rows())  // the pool grows by doubling
    if (auto s = cm_->resize_caches(std::max<int64_t>(next, 2 * cm_->cache_rows())); !s) return s.error();
  auto rows = forward(b);
  if (!rows) return rows.error();
  next_block_ = next;
  for (size_t i = 0; i < chunks.size(); ++i) {
    Seq& s = seqs_[chunks[i].seq];
    s.past += static_cast<int64_t>(chunks[i].tokens.size());
    s.blocks.assign(b.block_indices.begin() + b.block_indices_begins[i], b.block_indices.begin() + b.block_indices_begins[i + 1]);
  }
  return rows;
}

}  // namespace ggflow::runtime
