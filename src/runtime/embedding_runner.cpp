#include "runtime/embedding_runner.h"

#include <cmath>

#include "frontend/translate.h"
#include "transforms/fusion/fusion.h"

namespace ggflow::runtime {

std::vector<float> pool_and_normalize(std::span<const float> hidden, int64_t T, int64_t E, builder::Pooling pooling) {
  std::vector<float> v(static_cast<size_t>(E), 0.0f);
  if (pooling == builder::Pooling::mean) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) v[e] += hidden[t * E + e];
    const float inv = 1.0f / static_cast<float>(T);
    for (float& x : v) x *= inv;
  } else {
    const int64_t row = pooling == builder::Pooling::cls ? 0 : T - 1;
    for (int64_t e = 0; e < E; ++e) v[e] = hidden[row * E + e];
  }
  double sum = 0;
  for (float x : v) sum += double(x) * double(x);
  const double norm = std::sqrt(sum);
  if (norm > 0)
    for (float& x : v) x = static_cast<float>(x / norm);
  return v;
}

Result<std::unique_ptr<EmbeddingRunner>> EmbeddingRunner::open(const std::string& path, const CompileOptions& options) {
  auto f = gguf::File::open(path);
  if (!f) return f.error();
  auto built = builder::build_encoder(*f);
  if (!built) return built.error();
  auto m = frontend::translate(built->graph);
  if (!m) return m.error();
  if (auto s = transforms::fuse_for_execution(*m, nullptr); !s) return s.error();
  auto cm = compile(std::move(*m), options);
  if (!cm) return cm.error();
  std::unique_ptr<EmbeddingRunner> r(new EmbeddingRunner());
  r->file_ = f->bytes();
  r->params_ = built->params;
  r->cm_ = std::move(*cm);
  if (auto s = r->cm_->bind_inputs({{&r->in_tokens_, "inp_tokens"}, {&r->in_pos_, "inp_pos"}}); !s) return s.error();
  auto out = r->cm_->output("embd");
  if (!out) return out.error();
  r->out_embd_ = *out;
  r->inputs_.resize(r->cm_->n_inputs());
  return r;
}

Result<std::vector<float>> EmbeddingRunner::embed(std::span<const int32_t> ids) {
  const int64_t T = static_cast<int64_t>(ids.size()), E = params_.n_embd;
  if (T == 0) return make_error("nothing to embed: no tokens", "give a non-empty text");
  if (T > params_.n_ctx_train)
    return make_error(std::to_string(T) + " tokens are more than the model's context of " + std::to_string(params_.n_ctx_train),
                      "shorten the text or split it");
  std::vector<int64_t> tok(ids.begin(), ids.end()), pos(T);
  for (int64_t i = 0; i < T; ++i) {
    if (tok[i] < 0 || tok[i] >= params_.n_vocab)
      return make_error("token id " + std::to_string(tok[i]) + " is outside the vocabulary [0, " + std::to_string(params_.n_vocab) + ")",
                        "give ids from this model's tokenizer");
    pos[i] = i;
  }
  inputs_[in_tokens_] = ir::Tensor::i32({1, 1, 1, T}, tok);
  inputs_[in_pos_] = ir::Tensor::i32({1, 1, 1, T}, pos);
  if (auto s = cm_->run(inputs_); !s) return s.error();
  const ir::Tensor& h = cm_->output(out_embd_);
  if (h.type() != ir::ElementType::f32 || h.numel() != T * E)
    return make_error("embedding runner: hidden states are " + h.summary(0) + ", expected f32 with " + std::to_string(T * E) + " values");
  return pool_and_normalize(std::span<const float>(h.data<float>(), static_cast<size_t>(h.numel())), T, E, params_.pooling);
}

}  // namespace ggflow::runtime
