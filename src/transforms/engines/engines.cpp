#include "transforms/engines/engines.h"

#include <cstring>
#include <map>

#include "builder/build.h"
#include "builder/raw_runner.h"
#include "frontend/translate.h"
#include "gguf/file.h"

namespace ggflow::transforms {

namespace {

struct Loaded {
  ir::Model model;
  int64_t n_vocab;
};

Result<Loaded> load(const std::string& path, Layout layout, const EngineOptions& opt,
                    std::vector<std::string>* log = nullptr) {
  auto f = gguf::File::open(path);
  if (!f) return f.error();
  auto built = builder::build(*f, builder::BuildOptions{.flash_attn = opt.flash_attn});
  if (!built) return built.error();
  auto m = frontend::translate(built->graph);
  if (!m) return m.error();
  auto g = genai_options_from_file(*f, path);
  if (!g) return g.error();
  if (auto s = to_layout(*m, layout, *g, {}, log); !s) return s.error();
  return Loaded{std::move(*m), built->hp.n_vocab};
}

Result<std::vector<float>> result_f32(const ir::Model& m, const std::vector<ir::Tensor>& out, const std::string& name) {
  for (size_t i = 0; i < m.results().size(); ++i)
    if (m.results()[i]->name() == name) return out[i].to_f32();
  return make_error("the model has no Result '" + name + "'");
}

class RawEngine : public SequenceEngine {
 public:
  explicit RawEngine(std::unique_ptr<builder::RawRunner> r) : r_(std::move(r)) {}
  Result<std::vector<float>> step(std::span<const int32_t> t) override { return r_->step(t); }
  int64_t n_vocab() const override { return r_->hparams().n_vocab; }
  int64_t n_past() const override { return r_->n_past(); }
  void reset() override { r_->reset(); }

 private:
  std::unique_ptr<builder::RawRunner> r_;
};

class SdpaEngine : public SequenceEngine {
 public:
  SdpaEngine(ir::Model m, int64_t v) : m_(std::move(m)), vocab_(v) {}
  int64_t n_vocab() const override { return vocab_; }
  int64_t n_past() const override { return past_; }
  void reset() override { state_.values.clear(), past_ = 0; }
  Result<std::vector<float>> step(std::span<const int32_t> tokens) override {
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<int64_t> ids(tokens.begin(), tokens.end()), pos(T);
    for (int64_t i = 0; i < T; ++i) pos[i] = past_ + i;
    std::map<std::string, ir::Tensor> in{
        {"input_ids", ir::Tensor::i64({1, T}, ids)},                                   // i64 [1,T]
        {"attention_mask", ir::Tensor::i64({1, past_ + T}, std::vector<int64_t>(past_ + T, 1))},
        {"position_ids", ir::Tensor::i64({1, T}, pos)},
        {"beam_idx", ir::Tensor::i32({1}, {0})}};
    auto out = ir::evaluate_named(m_, in, &state_);
    if (!out) return out.error();
    auto l = result_f32(m_, *out, "logits");                                           // [1,1,V]
    if (l) past_ += T;
    return l;
  }

 private:
  ir::Model m_;
  int64_t vocab_;
  ir::StateStore state_;
  int64_t past_ = 0;
};

class PagedSequence : public SequenceEngine {
 public:
  explicit PagedSequence(std::unique_ptr<PagedEngine> e) : e_(std::move(e)), seq_(e_->add_sequence()) {}
  int64_t n_vocab() const override { return e_->n_vocab(); }
  int64_t n_past() const override { return e_->past(seq_); }
  void reset() override { seq_ = e_->add_sequence(); }
  Result<std::vector<float>> step(std::span<const int32_t> t) override {
    auto r = e_->step({{seq_, std::vector<int32_t>(t.begin(), t.end())}});
    if (!r) return r.error();
    return std::move((*r)[0]);
  }

 private:
  std::unique_ptr<PagedEngine> e_;
  int seq_;
};

}  // namespace

Result<ir::Model> load_layout_model(const std::string& path, Layout layout, const EngineOptions& opt, int64_t* n_vocab,
                                    std::vector<std::string>* log) {
  auto l = load(path, layout, opt, log);
  if (!l) return l.error();
  if (n_vocab) *n_vocab = l->n_vocab;
  return std::move(l->model);
}

Result<std::unique_ptr<SequenceEngine>> open_engine(const std::string& path, Layout layout, const EngineOptions& opt) {
  if (layout == Layout::raw) {
    auto r = builder::RawRunner::open(path, builder::BuildOptions{.flash_attn = opt.flash_attn});
    if (!r) return r.error();
    return std::unique_ptr<SequenceEngine>(new RawEngine(std::move(*r)));
  }
  if (layout == Layout::paged) {
    auto e = PagedEngine::open(path, opt);
    if (!e) return e.error();
    return std::unique_ptr<SequenceEngine>(new PagedSequence(std::move(*e)));
  }
  auto l = load(path, layout, opt);
  if (!l) return l.error();
  return std::unique_ptr<SequenceEngine>(new SdpaEngine(std::move(l->model), l->n_vocab));
}

Result<std::vector<int32_t>> generate_greedy(SequenceEngine& e, std::span<const int32_t> prompt, int n,
                                             std::vector<float>* rows) {
  std::vector<int32_t> out;
  auto l = e.step(prompt);
  for (int i = 0; i < n; ++i) {
    if (!l) return l.error();
    int32_t best = 0;
    for (size_t j = 1; j < l->size(); ++j)
      if ((*l)[j] > (*l)[best]) best = static_cast<int32_t>(j);
    out.push_back(best);
    if (rows) rows->insert(rows->end(), l->begin(), l->end());
    if (i + 1 == n) break;
    l = e.step(std::span<const int32_t>(&best, 1));
  }
  if (n <= 0 && !l) return l.error();
  return out;
}

// ---- PagedEngine

Result<std::unique_ptr<PagedEngine>> PagedEngine::open(const std::string& path, const EngineOptions& opt) {
  auto l = load(path, Layout::paged, opt);
  if (!l) return l.error();
  return from_model(std::move(l->model), l->n_vocab);
}

Result<std::unique_ptr<PagedEngine>> PagedEngine::from_model(ir::Model model, int64_t n_vocab) {
  std::unique_ptr<PagedEngine> e(new PagedEngine());
  e->model_ = std::move(model);
  e->n_vocab_ = n_vocab;
  for (size_t il = 0;; ++il) {
    auto k = e->model_.parameter("key_cache." + std::to_string(il)), v = e->model_.parameter("value_cache." + std::to_string(il));
    if (!k || !v) break;
    auto shape = [](const ir::NodePtr& p) {  // [0, Hkv, 32, D]
      auto s = p->out_shape().to_vector();
      s[0] = 0;
      return s;
    };
    e->kcache_.emplace_back(ir::ElementType::f32, shape(k));
    e->vcache_.emplace_back(ir::ElementType::f32, shape(v));
  }
  if (e->kcache_.empty()) return make_error("PagedEngine: the model has no key_cache.0", "convert it with SDPAToPagedAttention");
  if (auto s = e->grow(8); !s) return s.error();
  return e;
}

Status PagedEngine::grow(int64_t blocks) {
  if (blocks <= n_blocks_) return {};
  for (auto* caches : {&kcache_, &vcache_})
    for (auto& c : *caches) {
      auto s = c.shape();
      s[0] = blocks;
      ir::Tensor g(ir::ElementType::f32, s);
      if (c.nbytes()) std::memcpy(g.mutable_bytes(), c.bytes(), c.nbytes());
      c = g;
    }
  n_blocks_ = blocks;
  return {};
}

int PagedEngine::add_sequence() {
  seqs_.emplace_back();
  return static_cast<int>(seqs_.size()) - 1;
}

Result<std::vector<std::vector<float>>> PagedEngine::step(const std::vector<Chunk>& chunks) {
  const int64_t BS = kcache_[0].shape()[2];
  Inputs in;
  in.subsequence_begins = {0};
  in.block_indices_begins = {0};
  int64_t need = next_block_;
  std::vector<bool> seen(seqs_.size(), false);
  for (const Chunk& c : chunks) {
    if (c.seq < 0 || c.seq >= static_cast<int>(seqs_.size()) || c.tokens.empty() || seen[c.seq])
      return make_error("PagedEngine::step: chunk of unknown sequence " + std::to_string(c.seq) +
                            ", without tokens, or a second chunk of the same sequence",
                        "one chunk per sequence and step");
    seen[c.seq] = true;
    Seq& s = seqs_[c.seq];
    const int64_t n = static_cast<int64_t>(c.tokens.size()), len = s.past + n;
    while (static_cast<int64_t>(s.blocks.size()) * BS < len) s.blocks.push_back(need++);  // tables grow in order
    for (int64_t i = 0; i < n; ++i) in.input_ids.push_back(c.tokens[i]), in.position_ids.push_back(s.past + i);
    in.past_lens.push_back(s.past);
    in.subsequence_begins.push_back(in.subsequence_begins.back() + n);
    in.sampled_tokens_indices.push_back(in.subsequence_begins.back() - 1);  // the chunk's last row
    in.block_indices.insert(in.block_indices.end(), s.blocks.begin(), s.blocks.end());
    in.block_indices_begins.push_back(static_cast<int64_t>(in.block_indices.size()));
    in.max_context_len = std::max(in.max_context_len, len);
  }
  next_block_ = need;
  int64_t cap = std::max<int64_t>(n_blocks_, 1);
  while (cap < next_block_) cap *= 2;
  auto logits = forward(in, cap);
  if (!logits) return logits.error();
  std::vector<std::vector<float>> rows;
  for (size_t b = 0; b < chunks.size(); ++b)
    rows.emplace_back(logits->begin() + b * n_vocab_, logits->begin() + (b + 1) * n_vocab_);
  for (const Chunk& c : chunks) seqs_[c.seq].past += static_cast<int64_t>(c.tokens.size());
  return rows;
}

Result<std::vector<float>> PagedEngine::forward(const Inputs& x, int64_t num_blocks) {
  if (auto s = grow(num_blocks); !s) return s.error();
  const int64_t T = static_cast<int64_t>(x.input_ids.size()), B = static_cast<int64_t>(x.past_lens.size()),
                R = static_cast<int64_t>(x.sampled_tokens_indices.size());
  std::map<std::string, ir::Tensor> in{
      {"input_ids", ir::Tensor::i64({T}, x.input_ids)},                                       // i64 [T]
      {"position_ids", ir::Tensor::i64({T}, x.position_ids)},                                 // i64 [T]
      {"past_lens", ir::Tensor::i32({B}, x.past_lens)},                                       // i32 [B]
      {"subsequence_begins", ir::Tensor::i32({B + 1}, x.subsequence_begins)},                 // i32 [B+1]
      {"block_indices", ir::Tensor::i32({static_cast<int64_t>(x.block_indices.size())}, x.block_indices)},
      {"block_indices_begins", ir::Tensor::i32({B + 1}, x.block_indices_begins)},
      {"max_context_len", ir::Tensor::i32({}, {x.max_context_len})},
      {"sampled_tokens_indices", ir::Tensor::i64({R}, x.sampled_tokens_indices)}};            // i64 [R]
  for (size_t il = 0; il < kcache_.size(); ++il) {
    in["key_cache." + std::to_string(il)] = kcache_[il];
    in["value_cache." + std::to_string(il)] = vcache_[il];
  }
  auto out = ir::evaluate_named(model_, in);
  if (!out) return out.error();
  std::vector<float> logits;
  for (size_t i = 0; i < model_.results().size(); ++i) {
    const std::string& name = model_.results()[i]->name();
    if (name == "logits") logits = (*out)[i].to_f32();                                        // [R,1,V]
    for (size_t il = 0; il < kcache_.size(); ++il) {
      if (name == "key_cache." + std::to_string(il) + "_out") kcache_[il] = (*out)[i];
      if (name == "value_cache." + std::to_string(il) + "_out") vcache_[il] = (*out)[i];
    }
  }
  if (static_cast<int64_t>(logits.size()) != R * n_vocab_)
    return make_error("PagedEngine: logits have " + std::to_string(logits.size()) + " values, expected " +
                      std::to_string(R * n_vocab_));
  return logits;
}

}  // namespace ggflow::transforms
