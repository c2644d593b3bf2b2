#include "runtime/sequence_runner.h"

#include "runtime/paged_runner.h"
#include "runtime/raw_runner.h"

namespace ggflow::runtime {

Status SequenceRunner::check_step(std::span<const int32_t> tokens) const {
  if (tokens.empty()) return make_error("step: no tokens", "pass at least one token");
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab_)
      return make_error("token id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(n_vocab_) +
                        " tokens)", "pass ids in [0, n_vocab)");
  if (n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_)
    return make_error("the context of " + std::to_string(n_ctx_) + " tokens is full",
                      "shorten the prompt or lower max_tokens");
  return {};
}

namespace {

// The stateful SDPA model: the KV are the compiled model's variables.
class SdpaRunner final : public SequenceRunner {
 public:
  static Result<std::unique_ptr<SequenceRunner>> create(const ModelFile& file, const RunnerOptions& opt) {
    auto m = file.layout_model(transforms::Layout::sdpa);
    if (!m) return m.error();
    auto cm = compile(std::move(*m), opt.compile);
    if (!cm) return cm.error();
    std::unique_ptr<SdpaRunner> r(new SdpaRunner());
    r->n_vocab_ = file.n_vocab();
    r->n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : file.n_ctx_train();
    r->cm_ = std::move(*cm);
    if (auto st = r->cm_->bind_inputs({{&r->in_ids_, "input_ids"}, {&r->in_mask_, "attention_mask"},
                            {&r->in_pos_, "position_ids"}, {&r->in_beam_, "beam_idx"}}); !st) return st.error();
    if (auto st = r->lora_in_.bind(*r->cm_, file.lora_factors()); !st) return st.error();
    auto lo = r->cm_->output("logits");
    if (!lo) return lo.error();
    r->out_logits_ = *lo;
    r->inputs_.resize(r->cm_->n_inputs());
    return std::unique_ptr<SequenceRunner>(std::move(r));
  }

  Result<std::span<const float>> step(std::span<const int32_t> tokens) override {
    if (auto s = check_step(tokens); !s) return s.error();
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<int64_t> ids(tokens.begin(), tokens.end()), pos(T);
    for (int64_t i = 0; i < T; ++i) pos[i] = past_ + i;
    inputs_[in_ids_] = ir::Tensor::i64({1, T}, ids);                                         // i64 [1,T]
    inputs_[in_mask_] = ir::Tensor::i64({1, past_ + T}, std::vector<int64_t>(past_ + T, 1));  // i64 [1,P+T]
    inputs_[in_pos_] = ir::Tensor::i64({1, T}, pos);                                         // i64 [1,T]
    inputs_[in_beam_] = ir::Tensor::i32({1}, {0});                                           // i32 [1]
    lora_in_.fill(inputs_, {1, T}, std::vector<uint64_t>(T, lora_));                          // f32 [1,T]
    if (auto s = cm_->run(inputs_); !s) return s.error();
    const ir::Tensor& l = cm_->output(out_logits_);                                          // f32 [1,1,V]
    if (l.type() != ir::ElementType::f32 || l.numel() != n_vocab_)
      return make_error("SDPA runner: logits are " + l.summary(0) + ", expected f32 [1,1," + std::to_string(n_vocab_) + "]");
    past_ += T;
    return std::span<const float>(l.data<float>(), static_cast<size_t>(n_vocab_));
  }
  void reset() override {
    cm_->reset_state();
    past_ = 0;
  }
  int64_t n_past() const override { return past_; }
  const CompiledModel& compiled() const override { return *cm_; }

 private:
  std::unique_ptr<CompiledModel> cm_;
  size_t in_ids_ = 0, in_mask_ = 0, in_pos_ = 0, in_beam_ = 0, out_logits_ = 0;
  std::vector<ir::Tensor> inputs_;
  int64_t past_ = 0;
};

// PagedRunner with one sequence and its own block table.
class PagedSequenceRunner final : public SequenceRunner {
 public:
  static Result<std::unique_ptr<SequenceRunner>> create(const ModelFile& file, const RunnerOptions& opt) {
    auto p = PagedRunner::create(file, 8, opt.compile);
    if (!p) return p.error();
    std::unique_ptr<PagedSequenceRunner> r(new PagedSequenceRunner());
    r->n_vocab_ = file.n_vocab();
    r->n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : file.n_ctx_train();
    r->p_ = std::move(*p);
    r->seq_ = r->p_->add_sequence();
    r->lora_in_ = r->p_->lora_inputs();
    return std::unique_ptr<SequenceRunner>(std::move(r));
  }
  Result<std::span<const float>> step(std::span<const int32_t> tokens) override {
    if (auto s = check_step(tokens); !s) return s.error();
    auto r = p_->step({{seq_, std::vector<int32_t>(tokens.begin(), tokens.end()), lora_}});
    if (!r) return r.error();
    row_ = std::move(*r);
    return row_.row(0);
  }
  void reset() override { seq_ = p_->add_sequence(); }  // a new sequence; old blocks are not reused
  int64_t n_past() const override { return p_->past(seq_); }
  const CompiledModel& compiled() const override { return p_->compiled(); }

 private:
  std::unique_ptr<PagedRunner> p_;
  int seq_ = 0;
  LogitsRows row_;
};

}  // namespace

Result<std::unique_ptr<SequenceRunner>> open_sequence_runner(const ModelFile& file, transforms::Layout layout,
                                                             const RunnerOptions& opt) {
  switch (layout) {
    case transforms::Layout::raw: {
      auto r = RawRunner::create(file, opt);
      if (!r) return r.error();
      return std::unique_ptr<SequenceRunner>(std::move(*r));
    }
    case transforms::Layout::sdpa: return SdpaRunner::create(file, opt);
    case transforms::Layout::paged: return PagedSequenceRunner::create(file, opt);
  }
  return make_error("unknown layout");
}

}  // namespace ggflow::runtime
