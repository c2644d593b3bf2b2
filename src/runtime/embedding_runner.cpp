#include "runtime/embedding_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
  if (auto s = r->cm_->bind_inputs({{&r->in_tokens_, "inp_tokens"}, {&r->in_pos_, "inp_pos"}, {&r->in_mask_, "inp_kq_mask"}}); !s) return s.error();
  auto out = r->cm_->output("embd");
  if (!out) return out.error();
  r->out_embd_ = *out;
  if (r->is_reranker()) {
    if (auto s = r->cm_->bind_inputs({{&r->in_cls_, "inp_cls"}}); !s) return s.error();
    auto score = r->cm_->output("score");
    if (!score) return score.error();
    r->out_score_ = *score;
  }
  r->inputs_.resize(r->cm_->n_inputs());
  return r;
}

Result<std::vector<float>> EmbeddingRunner::embed(std::span<const int32_t> ids) {
  const std::span<const int32_t> one[1] = {ids};
  auto v = embed_many(one);
  if (!v) return v.error();
  return std::move((*v)[0]);
}

Result<std::vector<std::vector<float>>> EmbeddingRunner::embed_many(std::span<const std::span<const int32_t>> seqs) {
  if (is_reranker())
    return make_error("the model is a reranker (pooling rank): it scores query-document pairs, it does not embed texts",
                      "score pairs with it (POST /v1/rerank), or embed with an embedding model");
  return run_all(seqs);
}

Result<std::vector<std::vector<float>>> EmbeddingRunner::score_many(std::span<const std::span<const int32_t>> seqs) {
  if (!is_reranker())
    return make_error("the model is not a reranker (its pooling is not rank): it embeds texts, it does not score pairs",
                      "embed with it (POST /v1/embeddings), or rerank with a reranker model");
  return run_all(seqs);
}

Result<std::vector<std::vector<float>>> EmbeddingRunner::run_all(std::span<const std::span<const int32_t>> seqs) {
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t T = static_cast<int64_t>(seqs[s].size());
    const std::string which = seqs.size() > 1 ? "sequence " + std::to_string(s) + ": " : "";
    if (T == 0) return make_error(which + "nothing to embed: no tokens", "give a non-empty text");
    if (T > params_.n_ctx_train)
      return make_error(which + std::to_string(T) + " tokens are more than the model's context of " + std::to_string(params_.n_ctx_train),
                        "shorten the text or split it");
    for (int32_t id : seqs[s])
      if (id < 0 || id >= params_.n_vocab)
        return make_error(which + "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(params_.n_vocab) + ")",
                          "give ids from this model's tokenizer");
  }
  std::vector<std::vector<float>> out;
  out.reserve(seqs.size());
  for (size_t b = 0; b < seqs.size();) {
    size_t e = b + 1;
    int64_t tokens = static_cast<int64_t>(seqs[b].size());
    while (e < seqs.size() && tokens + static_cast<int64_t>(seqs[e].size()) <= kPackTokens) tokens += static_cast<int64_t>(seqs[e++].size());
    if (auto st = run_pack(seqs.subspan(b, e - b), out); !st) return st.error();
    b = e;
  }
  return out;
}

Status EmbeddingRunner::run_pack(std::span<const std::span<const int32_t>> seqs, std::vector<std::vector<float>>& out) {
  int64_t T = 0;
  for (const auto& s : seqs) T += static_cast<int64_t>(s.size());
  const int64_t E = params_.n_embd;
  std::vector<int64_t> tok, pos;
  tok.reserve(static_cast<size_t>(T));
  pos.reserve(static_cast<size_t>(T));
  // mask [T queries, T keys]: 0 on the keys of the query's own sequence, -inf elsewhere
  std::vector<float> mask(static_cast<size_t>(T * T), -std::numeric_limits<float>::infinity());
  for (const auto& s : seqs) {
    const int64_t b = static_cast<int64_t>(tok.size()), n = static_cast<int64_t>(s.size());
    for (int64_t i = 0; i < n; ++i) tok.push_back(s[i]), pos.push_back(i);
    for (int64_t q = b; q < b + n; ++q) std::fill_n(mask.begin() + q * T + b, n, 0.0f);
  }
  inputs_[in_tokens_] = ir::Tensor::i32({1, 1, 1, T}, std::move(tok));
  inputs_[in_pos_] = ir::Tensor::i32({1, 1, 1, T}, std::move(pos));
  inputs_[in_mask_] = ir::Tensor::f32({1, 1, T, T}, std::move(mask));
  if (is_reranker()) {  // each sequence's first token
    std::vector<int64_t> first;
    for (int64_t b = 0; const auto& s : seqs) first.push_back(b), b += static_cast<int64_t>(s.size());
    const int64_t S = static_cast<int64_t>(first.size());
    inputs_[in_cls_] = ir::Tensor::i32({1, 1, 1, S}, std::move(first));
  }
  if (auto s = cm_->run(inputs_); !s) return s.error();
  if (is_reranker()) {
    const ir::Tensor& sc = cm_->output(out_score_);
    const int64_t n = params_.n_cls_out, S = static_cast<int64_t>(seqs.size());
    if (sc.type() != ir::ElementType::f32 || sc.numel() != S * n)
      return make_error("embedding runner: scores are " + sc.summary(0) + ", expected f32 with " + std::to_string(S * n) + " values");
    for (int64_t s = 0; s < S; ++s) out.emplace_back(sc.data<float>() + s * n, sc.data<float>() + (s + 1) * n);
    return {};
  }
  const ir::Tensor& h = cm_->output(out_embd_);
  if (h.type() != ir::ElementType::f32 || h.numel() != T * E)
    return make_error("embedding runner: hidden states are " + h.summary(0) + ", expected f32 with " + std::to_string(T * E) + " values");
  const float* hid = h.data<float>();
  int64_t b = 0;
  for (const auto& s : seqs) {
    const int64_t n = static_cast<int64_t>(s.size());
    out.push_back(pool_and_normalize(std::span<const float>(hid + b * E, static_cast<size_t>(n * E)), n, E, params_.pooling));
    b += n;
  }
  return {};
}

}  // namespace ggflow::runtime
