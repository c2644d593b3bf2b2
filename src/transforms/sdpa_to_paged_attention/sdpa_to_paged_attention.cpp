// SDPAToPagedAttention (see the header). Preconditions, each with its own error: the GenAI
// inputs exist (AdaptToGenAI), there is at least one ScaledDotProductAttention, each one's k and
// v come from a stateful cache Concat (MakeStateful), q is rank 4 with static heads and head size.
#include "transforms/sdpa_to_paged_attention/sdpa_to_paged_attention.h"
#include "transforms/lm_head.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/ops.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::transforms {

namespace o = ir::ops;

namespace {

Error precondition(const std::string& what, const std::string& hint) {
  return Error{"SDPAToPagedAttention: precondition failed: " + what, hint};
}

// Walk up from v through single-data-input layout ops to the stateful Concat.
struct CacheChain {
  ir::NodePtr concat, read_value;
};
std::optional<CacheChain> find_cache(ir::Value v) {
  for (int i = 0; i < 16; ++i) {
    ir::NodePtr n = v.node;
    switch (n->type()) {
      case ir::OpType::Transpose: case ir::OpType::Reshape: case ir::OpType::Convert:
      case ir::OpType::Squeeze: case ir::OpType::Unsqueeze:
        v = n->input(0);
        continue;
      case ir::OpType::Concat: {
        if (n->n_inputs() != 2) return std::nullopt;
        ir::NodePtr p = n->input(0).node;
        if (p->type() == ir::OpType::Gather) p = p->input(0).node;
        if (p->type() != ir::OpType::ReadValue) return std::nullopt;
        return CacheChain{n, p};
      }
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

// The sliding window of the mask feeding an SDPA: rt_info "sliding_window" on the mask or on a
// producer reached through single-input ops.
int64_t window_of(const ir::NodePtr& sdpa) {
  if (sdpa->n_inputs() < 4) return 0;
  ir::NodePtr n = sdpa->input(3).node;
  for (int i = 0; i < 8 && n; ++i) {
    auto it = n->rt_info().find(kSlidingWindow);
    if (it != n->rt_info().end() && std::holds_alternative<int64_t>(it->second)) return std::get<int64_t>(it->second);
    if (n->n_inputs() != 1) break;
    n = n->input(0).node;
  }
  return 0;
}

// The new rows of a cache Concat as f32, and the paged cache's element type: a Convert to the
// cache's type (an f16 cache) is peeled, as is a round trip f32 -> q8_0 -> f32 (a q8_0 cache: the
// stateful cache holds the rounded values in f32, the paged one the q8_0 blocks); PagedAttention
// takes f32 k / v and rounds them into the cache itself.
struct CacheRows {
  ir::Value rows;
  ir::ElementType type;
};
bool is_convert_from(const ir::Value& v, ir::ElementType from) {
  return v.node->type() == ir::OpType::Convert && v.node->input(0).type() == from;
}
CacheRows cache_rows(ir::Value v) {
  if (is_convert_from(v, ir::ElementType::q8_0) && v.type() == ir::ElementType::f32 &&
      is_convert_from(v.node->input(0), ir::ElementType::f32))
    return {v.node->input(0).node->input(0), ir::ElementType::q8_0};
  if (is_convert_from(v, ir::ElementType::f32)) return {v.node->input(0), v.type()};
  return {v, v.type()};
}

ir::NodePtr param(ir::ElementType t, ir::Shape s, const std::string& name) {
  auto p = o::parameter(t, std::move(s), name);
  p->out_names().insert(name);
  return p;
}

}  // namespace

Result<bool> SDPAToPagedAttention::run(ir::Model& m) {
  for (const char* name : {"input_ids", "position_ids", "attention_mask", "beam_idx"})
    if (!m.parameter(name))
      return precondition(std::string("the model has no Parameter '") + name + "'", "run AdaptToGenAI and MakeStateful first");
  auto order = m.ordered();
  if (!order) return order.error();
  std::vector<ir::NodePtr> sdpas;
  for (const auto& n : *order)
    if (n->type() == ir::OpType::ScaledDotProductAttention) sdpas.push_back(n);
  if (sdpas.empty())
    return precondition("the model has no ScaledDotProductAttention",
                        "build the raw graph with flash attention (BuildOptions::flash_attn) so that attention is one op");
  struct Layer { ir::NodePtr sdpa; CacheChain k, v; int64_t H, Hkv, D, Dv; };
  std::vector<Layer> layers;
  for (const auto& s : sdpas) {
    auto k = find_cache(s->input(1)), v = find_cache(s->input(2));
    if (!k || !v)
      return precondition(s->describe() + ": its " + std::string(!k ? "key" : "value") +
                              " input does not come from a stateful cache Concat(Gather(ReadValue, beam_idx), new)",
                          "run MakeStateful first");
    const ir::Shape &q = s->input(0).shape(), &ks = s->input(1).shape(), &vs = s->input(2).shape();
    if (q.rank() != 4 || ks.rank() != 4 || vs.rank() != 4 || !q[1].is_static() || !q[3].is_static() || !ks[1].is_static() ||
        !vs[3].is_static())
      return precondition(s->describe() + ": q " + q.str() + ", k " + ks.str() + ", v " + vs.str() +
                              " are not rank 4 with static heads and head sizes",
                          "PagedAttention needs [B, H, S, D] with known H and D");
    if (s->attrs<ir::SdpaAttrs>().causal)
      return precondition(s->describe() + " is causal without a mask", "the GenAI graph masks with attention_mask");
    // PagedAttention scores in q8_0 arithmetic exactly when its cache is q8_0
    const bool q8_cache = cache_rows(k->concat->input(1)).type == ir::ElementType::q8_0;
    if (s->attrs<ir::SdpaAttrs>().q8_0_scores != q8_cache)
      return precondition(s->describe() + (q8_cache ? " reads a q8_0 key cache with f32 scores" : " has q8_0 scores over a key cache that is not q8_0"),
                          "build a q8_0 KV cache with BuildOptions::kv_type, which sets both");
    layers.push_back({s, *k, *v, q[1].value(), ks[1].value(), q[3].value(), vs[3].value()});
  }

  pattern::Rewriter rw(m);
  const ir::Symbol T = ir::Symbol::named("T"), Bs = ir::Symbol::named("Bseq"), B1 = ir::Symbol::named("Bseq+1"),
                   NB = ir::Symbol::named("blocks"), NBT = ir::Symbol::named("table"), R = ir::Symbol::named("R");
  // input_ids / position_ids: i64 [T], Unsqueeze(1) [T,1] in front of the old consumers
  std::vector<ir::NodePtr> front;
  for (const char* name : {"input_ids", "position_ids"}) {
    ir::NodePtr old = m.parameter(name), p = param(ir::ElementType::i64, {T}, name);
    auto u = o::unsqueeze(p, {1});                                                        // i64 [T,1]
    (void)rw.replace_value(ir::Value(old, 0), u, false);
    rw.remove_parameter(old);
    front.push_back(p);
  }
  // LoRA factors f32 [B,S] -> [T], Unsqueeze(1) [T,1], as the ids
  for (size_t i = 0;; ++i) {
    ir::NodePtr old = m.parameter(lora_scale_name(i));
    if (!old) break;
    ir::NodePtr p = param(ir::ElementType::f32, {T}, lora_scale_name(i));
    (void)rw.replace_value(ir::Value(old, 0), o::unsqueeze(p, {1}), false);               // f32 [T,1]
    rw.remove_parameter(old);
    front.push_back(p);
  }
  // re-infer: every activation now has its tokens on axis 0 ([T,1,1,E]), q below becomes [T, H·D]
  if (auto s = m.infer(); !s)
    return make_error("SDPAToPagedAttention: the graph does not take input_ids [T]: " + s.error().what, s.error().hint);
  auto past_lens = param(ir::ElementType::i32, {Bs}, "past_lens");
  auto sub_begins = param(ir::ElementType::i32, {B1}, "subsequence_begins");
  auto block_indices = param(ir::ElementType::i32, {NBT}, "block_indices");
  auto block_begins = param(ir::ElementType::i32, {B1}, "block_indices_begins");
  auto max_ctx = param(ir::ElementType::i32, ir::Shape{}, "max_context_len");
  for (auto& p : {past_lens, sub_begins, block_indices, block_begins, max_ctx}) front.push_back(p);

  std::set<std::string> vars;
  std::vector<ir::NodePtr> caches;
  // A cache Concat -> the last PagedAttention that wrote its caches, and the cache's number N.
  struct Writer { ir::NodePtr pa; std::string N; };
  std::map<const ir::Node*, Writer> last_writer;
  std::vector<const ir::Node*> owned;              // the Concats with caches of their own, in layer order
  for (size_t il = 0; il < layers.size(); ++il) {
    const Layer& L = layers[il];
    const std::string N = std::to_string(il);
    // An SDPA over a cache an earlier one already reads (gemma4's shared KV layers): it takes the
    // caches the last PagedAttention on them wrote and writes the same new rows again (the same
    // values: the caches do not change), so each cache is one chain of in-place writers and the
    // Results read its last one; it has no cache of its own.
    const auto shared = last_writer.find(L.k.concat.get());
    const auto shared_v = last_writer.find(L.v.concat.get());
    if ((shared == last_writer.end()) != (shared_v == last_writer.end()) ||
        (shared != last_writer.end() && shared->second.pa != shared_v->second.pa))
      return precondition(L.sdpa->describe() + " reads the key cache and the value cache of different earlier attentions",
                          "a layer reads both caches of one earlier layer or has its own");
    ir::Value kc, vc;
    if (shared != last_writer.end()) {
      kc = ir::Value(shared->second.pa, 1), vc = ir::Value(shared->second.pa, 2);
    } else {
      // the caches keep the new rows' rounding (f32, f16 or q8_0: PagedAttention rounds as it writes)
      auto kp = param(cache_rows(L.k.concat->input(1)).type, {NB, L.Hkv, options_.block_size, L.D}, "key_cache." + N);
      auto vp = param(cache_rows(L.v.concat->input(1)).type, {NB, L.Hkv, options_.block_size, L.Dv}, "value_cache." + N);
      caches.push_back(kp), caches.push_back(vp);
      kc = kp, vc = vp;
    }
    auto q = o::reshape(o::transpose(L.sdpa->input(0), {0, 2, 1, 3}), std::vector<int64_t>{0, -1}, true);    // [T, H·D]
    auto k = o::reshape(cache_rows(L.k.concat->input(1)).rows, std::vector<int64_t>{0, -1}, true);            // [T, Hkv·D]
    auto v = o::reshape(cache_rows(L.v.concat->input(1)).rows, std::vector<int64_t>{0, -1}, true);            // [T, Hkv·Dv]
    const auto& attrs = L.sdpa->attrs<ir::SdpaAttrs>();
    ir::ops::PagedAttentionInputs in{q, k, v, kc, vc, past_lens, sub_begins, block_indices, block_begins, max_ctx,
                                     o::scalar_f32(attrs.scale),                                  // f32 []
                                     o::const_i32({window_of(L.sdpa)}, std::vector<int64_t>{}),  // i32 []
                                     o::const_f32({}, std::vector<int64_t>{0})};                  // f32 [0]
    if (attrs.logit_softcap != 0.0f) in.logit_softcap = o::scalar_f32(attrs.logit_softcap);      // f32 [], input 13
    auto pa = o::paged_attention(in);                                                     // [T, H·Dv]
    pa->set_name("paged_attention." + N);
    if (pa->error())
      return make_error("SDPAToPagedAttention: the PagedAttention replacing " + L.sdpa->describe() + ": " + pa->error()->what,
                        pa->error()->hint);
    auto out = rw.make(ir::OpType::Transpose, {o::reshape(ir::Value(pa, 0), {0, 1, L.H, L.Dv}, true)},
                       ir::TransposeAttrs{{0, 2, 1, 3}}, L.sdpa);                          // [T, H, 1, Dv]
    if (auto s = rw.replace_node(L.sdpa, out); !s) return s.error();
    if (shared != last_writer.end()) {
      shared->second.pa = shared_v->second.pa = pa;
      continue;
    }
    last_writer[L.k.concat.get()] = last_writer[L.v.concat.get()] = Writer{pa, N};
    owned.push_back(L.k.concat.get());
    vars.insert(L.k.read_value->attrs<ir::VariableAttrs>().id);
    vars.insert(L.v.read_value->attrs<ir::VariableAttrs>().id);
  }
  for (const ir::Node* c : owned) {
    const Writer& w = last_writer.at(c);
    rw.add_result(o::result(ir::Value(w.pa, 1), "key_cache." + w.N + "_out"));
    rw.add_result(o::result(ir::Value(w.pa, 2), "value_cache." + w.N + "_out"));
  }
  for (const auto& s : std::vector<ir::NodePtr>(m.sinks()))
    if (vars.count(s->attrs<ir::VariableAttrs>().id)) rw.remove_sink(s);
  for (const char* name : {"beam_idx", "attention_mask"}) rw.remove_parameter(m.parameter(name));

  if (options_.sampled_tokens_indices) {
    ir::NodePtr head = lm_head(m);
    if (!head) return precondition("no Result 'logits' reading a MatMul (the LM head)", "run AdaptToGenAI first");
    auto idx = param(ir::ElementType::i64, {R}, "sampled_tokens_indices");
    rw.set_input(head, 0, o::gather(head->input(0), idx, 0));                             // [R,1,E]
    caches.push_back(idx);
  }
  std::vector<ir::NodePtr> params = front;
  for (const auto& p : m.parameters()) params.push_back(p);
  params.insert(params.end(), caches.begin(), caches.end());
  m.parameters() = params;
  log_.push_back("SDPAToPagedAttention: " + std::to_string(layers.size()) + " PagedAttention ops");
  return true;
}

}  // namespace ggflow::transforms
