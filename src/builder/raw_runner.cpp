#include "builder/raw_runner.h"

#include <cstring>
#include <limits>
#include <map>

#include "frontend/translate.h"
#include "ir/evaluator.h"

namespace ggflow::builder {

int32_t argmax(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

Result<std::unique_ptr<RawRunner>> RawRunner::open(const std::string& path, const BuildOptions& opt) {
  auto f = gguf::File::open(path);
  if (!f) return f.error();
  auto built = build(*f, opt);
  if (!built) return built.error();
  auto m = frontend::translate(built->graph);
  if (!m) return m.error();
  std::unique_ptr<RawRunner> r(new RawRunner());
  r->hp_ = built->hp;
  r->model_ = std::move(*m);
  r->reset();
  return r;
}

void RawRunner::reset() {
  n_past_ = 0;
  cache_k_.assign(hp_.n_layer, ir::Tensor(ir::ElementType::f32, {1, 1, 0, hp_.n_embd_kv()}));
  cache_v_ = cache_k_;
}

namespace {
// The cache grown by `t` zero rows: f32 [1, 1, past + t, e].
ir::Tensor grow(const ir::Tensor& c, int64_t t) {
  const auto& s = c.shape();
  ir::Tensor g(ir::ElementType::f32, {1, 1, s[2] + t, s[3]});
  if (c.nbytes()) std::memcpy(g.mutable_bytes(), c.bytes(), c.nbytes());
  return g;
}
}  // namespace

Result<std::vector<float>> RawRunner::step(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t T = static_cast<int64_t>(tokens.size()), P = n_past_, KV = P + T;
  if (T == 0) return make_error("step: no tokens", "pass at least one token");
  std::vector<int64_t> tok(tokens.begin(), tokens.end()), pos(T), outs;
  for (int64_t i = 0; i < T; ++i) pos[i] = P + i;
  for (int64_t i = all_logits ? 0 : T - 1; i < T; ++i) outs.push_back(i);
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> mask(T * KV), mask_swa(T * KV);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < KV; ++j) {
      bool causal = j <= P + i;
      mask[i * KV + j] = causal ? 0.0f : ninf;
      mask_swa[i * KV + j] = causal && (hp_.n_swa <= 0 || P + i - j < hp_.n_swa) ? 0.0f : ninf;
    }
  const int64_t O = static_cast<int64_t>(outs.size());
  std::map<std::string, ir::Tensor> in{
      {"inp_tokens", ir::Tensor::i32({1, 1, 1, T}, tok)},
      {"inp_pos", ir::Tensor::i32({1, 1, 1, T}, pos)},
      {"inp_out_ids", ir::Tensor::i32({1, 1, 1, O}, outs)},
      {"self_kv_idxs", ir::Tensor::i64({1, 1, 1, T}, pos)},
      {"self_kq_mask", ir::Tensor::f32({1, 1, T, KV}, mask)},
      {"self_kq_mask_swa", ir::Tensor::f32({1, 1, T, KV}, mask_swa)},
  };
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    in[cache_k_name(il)] = grow(cache_k_[il], T);
    in[cache_v_name(il)] = grow(cache_v_[il], T);
  }
  std::vector<ir::Tensor> args;
  for (const auto& p : model_.parameters()) {
    auto it = in.find(p->name());
    if (it == in.end()) return make_error("raw runner: no value for graph input '" + p->name() + "'");
    args.push_back(it->second);
  }
  auto r = ir::evaluate(model_, args);
  if (!r) return r.error();
  std::vector<float> logits;
  for (size_t i = 0; i < model_.results().size(); ++i) {
    const std::string& name = model_.results()[i]->name();
    if (name == "logits") logits = (*r)[i].to_f32();
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      if (name == cache_k_name(il) + "_out") cache_k_[il] = (*r)[i];
      if (name == cache_v_name(il) + "_out") cache_v_[il] = (*r)[i];
    }
  }
  if (static_cast<int64_t>(logits.size()) != O * hp_.n_vocab)
    return make_error("raw runner: logits have " + std::to_string(logits.size()) + " values, expected " +
                      std::to_string(O * hp_.n_vocab));
  n_past_ = KV;
  return logits;
}

Result<std::vector<int32_t>> RawRunner::generate_greedy(std::span<const int32_t> prompt, int n, std::vector<float>* rows) {
  std::vector<int32_t> out;
  auto l = step(prompt);
  if (!l) return l.error();
  for (int i = 0; i < n; ++i) {
    int32_t t = argmax(*l);
    out.push_back(t);
    if (rows) rows->insert(rows->end(), l->begin(), l->end());
    if (i + 1 == n) break;
    l = step(std::span<const int32_t>(&t, 1));
    if (!l) return l.error();
  }
  return out;
}

}  // namespace ggflow::builder
