#include "runtime/raw_runner.h"

#include <algorithm>
#include <limits>

namespace ggflow::runtime {

Result<std::unique_ptr<RawRunner>> RawRunner::create(const ModelFile& file, const RunnerOptions& opt) {
  auto m = file.layout_model(transforms::Layout::raw);
  if (!m) return m.error();
  auto cm = compile(std::move(*m), opt.compile);
  if (!cm) return cm.error();
  std::unique_ptr<RawRunner> r(new RawRunner());
  r->hp_ = file.hparams();
  r->n_vocab_ = file.n_logits();
  r->n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : file.n_ctx_train();
  r->cm_ = std::move(*cm);
  const CompiledModel& c = *r->cm_;
  if (auto st = c.bind_inputs({{&r->in_tokens_, "inp_tokens"}, {&r->in_pos_, "inp_pos"},
                          {&r->in_out_ids_, "inp_out_ids"}, {&r->in_kv_idxs_, "self_kv_idxs"}}); !st) return st.error();
  if (auto i = c.input("self_kq_mask")) r->in_mask_ = static_cast<int>(*i);
  if (auto i = c.input("self_kq_mask_swa")) r->in_mask_swa_ = static_cast<int>(*i);
  if (auto st = r->lora_in_.bind(c, file.lora_factors()); !st) return st.error();
  auto lo = c.output("logits");
  if (!lo) return lo.error();
  r->out_logits_ = *lo;
  r->inputs_.resize(c.n_inputs());
  // Address space for the whole context up front, so growing by doubling never copies. Best
  // effort: where it cannot be had (a strict overcommit policy), resize_caches reserves what each
  // size needs and growth copies the rows in use.
  static_cast<void>(r->cm_->reserve_caches(r->n_ctx_));
  if (auto s = r->cm_->resize_caches(std::min<int64_t>(r->n_ctx_, 256)); !s) return s.error();
  return r;
}

Result<std::span<const float>> RawRunner::step(std::span<const int32_t> tokens, bool all_logits) {
  if (auto s = check_step(tokens); !s) return s.error();
  const int64_t T = static_cast<int64_t>(tokens.size()), P = n_past_, KV = P + T;
  if (KV > cm_->cache_rows())  // grow by doubling, up to the context
    if (auto s = cm_->resize_caches(std::min(n_ctx_, std::max(KV, 2 * cm_->cache_rows()))); !s) return s.error();
  std::vector<int64_t> tok(tokens.begin(), tokens.end()), pos(T), outs;
  for (int64_t i = 0; i < T; ++i) pos[i] = P + i;
  for (int64_t i = all_logits ? 0 : T - 1; i < T; ++i) outs.push_back(i);
  const int64_t O = static_cast<int64_t>(outs.size());
  inputs_[in_tokens_] = ir::Tensor::i32({1, 1, 1, T}, tok);
  inputs_[in_pos_] = ir::Tensor::i32({1, 1, 1, T}, pos);
  inputs_[in_out_ids_] = ir::Tensor::i32({1, 1, 1, O}, outs);
  inputs_[in_kv_idxs_] = ir::Tensor::i64({1, 1, 1, T}, pos);
  lora_in_.fill(inputs_, {1, 1, T, 1}, std::vector<uint64_t>(T, lora_));  // f32 [1,1,T,1]
  const float ninf = -std::numeric_limits<float>::infinity();
  for (auto [at, swa] : {std::pair{in_mask_, false}, {in_mask_swa_, true}}) {
    if (at < 0) continue;
    std::vector<float> mask(T * KV);  // f32 [1, 1, T, KV]
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < KV; ++j) {
        const bool causal = j <= P + i, in_window = !swa || hp_.n_swa <= 0 || P + i - j < hp_.n_swa;
        mask[i * KV + j] = causal && in_window ? 0.0f : ninf;
      }
    inputs_[at] = ir::Tensor::f32({1, 1, T, KV}, std::move(mask));
  }
  if (auto s = cm_->run(inputs_, KV); !s) return s.error();
  const ir::Tensor& l = cm_->output(out_logits_);
  if (l.type() != ir::ElementType::f32 || l.numel() != O * n_vocab_)
    return make_error("raw runner: logits are " + l.summary(0) + ", expected f32 with " + std::to_string(O * n_vocab_) + " values");
  n_past_ = KV;
  return std::span<const float>(l.data<float>(), static_cast<size_t>(l.numel()));
}

}  // namespace ggflow::runtime
