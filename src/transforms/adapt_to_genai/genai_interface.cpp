// GenAIInterface: the raw inputs become functions of the GenAI inputs (DESIGN.md section 3).
//
//   input_ids, attention_mask, position_ids  i64 [?B, ?S]     beam_idx  i32 [?B]
//   inp_tokens   = Convert(Reshape(input_ids, [1,1] + shape(input_ids)))    [1,1,B,S]
//                  SDPA [1,1,1,T]; PA (input_ids [T,1]) [1,1,T,1]
//   inp_pos      = Convert(Reshape(position_ids, {0,1,1,-1}, special_zero))  SDPA [1,1,1,T]; PA [T,1,1,1]
//   self_kv_idxs = the same in the raw index type
//   self_kq_mask = Select(key <= pos && attention_mask[key] != 0, 0, -inf)  f32 [B,1,S,KV]
//   self_kq_mask_swa: the same AND pos - key < window; rt_info "sliding_window" = window
//   logits       = Result <- MatMul(Squeeze(x, axis 1) [B,1,E], W)           [B,1,V]
//   lora_scale_I = Reshape(lora_scale_I [?B, ?S] f32, {0,1,-1,1})             [B,1,S,1]: a factor
//                  per token, shaped as the activations [B,1,S,E] (LoRA adapters, builder/lora.h)
// The mask ops are intended outer products of positions [.,.,S,1] and keys [KV]: they say so with
// rt_info allow_outer_broadcast (the verifier refuses unmarked ones).
#include <limits>

#include "ir/ops.h"
#include "ir/verifier.h"
#include "transforms/adapt_to_genai/adapt_to_genai.h"
#include "transforms/lm_head.h"

namespace ggflow::transforms {

std::string lora_scale_name(size_t i) { return "lora_scale_" + std::to_string(i); }

namespace {

namespace o = ir::ops;

ir::NodePtr outer(ir::NodePtr n) {  // an intended outer-product broadcast
  n->rt_info()[ir::kAllowOuterBroadcast] = true;
  return n;
}

ir::NodePtr as_type(ir::NodePtr v, ir::ElementType t) {
  return v->out_type() == t ? v : o::convert(v, t);
}

class GenAIInterface : public pattern::Pass {
 public:
  explicit GenAIInterface(GenAIOptions opt) : opt_(std::move(opt)) {}
  std::string name() const override { return "GenAIInterface"; }

  Result<bool> run(ir::Model& m) override {
    ir::NodePtr tokens = m.parameter("inp_tokens");
    if (!tokens) {
      log_.push_back("GenAIInterface: no Parameter 'inp_tokens': not a builder graph, nothing to do");
      return false;
    }
    pattern::Rewriter rw(m);
    const ir::Symbol B = ir::Symbol::named("B"), S = ir::Symbol::named("S"), KV = ir::Symbol::named("KV");
    auto input_ids = o::parameter(ir::ElementType::i64, {B, S}, "input_ids");            // i64 [B,S]
    auto attention_mask = o::parameter(ir::ElementType::i64, {B, KV}, "attention_mask"); // i64 [B,KV]
    auto position_ids = o::parameter(ir::ElementType::i64, {B, S}, "position_ids");      // i64 [B,S]
    auto beam_idx = o::parameter(ir::ElementType::i32, {B}, "beam_idx");                 // i32 [B]
    for (auto& p : {input_ids, attention_mask, position_ids, beam_idx}) p->out_names().insert(p->name());

    // inp_tokens: [1,1] + shape(input_ids)
    auto tok_shape = o::concat({o::const_i64({1, 1}), o::shape_of(input_ids)}, 0);       // i64 [4]
    replace_param(rw, tokens, as_type(o::reshape(input_ids, tok_shape), tokens->out_type()));  // [1,1,B,S]
    auto pos4 = o::reshape(position_ids, {0, 1, 1, -1}, true);                            // i64 [B,1,1,S]
    if (auto p = m.parameter("inp_pos")) replace_param(rw, p, as_type(pos4, p->out_type()));
    if (auto p = m.parameter("self_kv_idxs")) replace_param(rw, p, as_type(pos4, p->out_type()));

    // LoRA factors: one per token, as position_ids
    std::vector<ir::NodePtr> lora;
    for (size_t i = 0;; ++i) {
      ir::NodePtr p = m.parameter(lora_scale_name(i));
      if (!p) break;
      auto np = o::parameter(ir::ElementType::f32, {B, S}, lora_scale_name(i));  // f32 [B,S]
      np->out_names().insert(np->name());
      replace_param(rw, p, o::reshape(np, {0, 1, -1, 1}, true));                         // [B,1,S,1]
      lora.push_back(np);
    }

    // masks
    auto qpos = o::reshape(position_ids, {0, 1, -1, 1}, true);                            // i64 [B,1,S,1]
    auto kv_len = o::gather(o::shape_of(attention_mask), o::scalar_i64(1), 0);            // i64 []
    auto keys = o::range(o::scalar_i64(0), kv_len, o::scalar_i64(1));                    // i64 [KV]
    auto am = o::less(o::scalar_i64(0), o::reshape(attention_mask, {0, 1, 1, -1}, true)); // bool [B,1,1,KV]
    auto visible = outer(o::logical_and(outer(o::less_equal(keys, qpos)), am));          // bool [B,1,S,KV]
    const float ninf = -std::numeric_limits<float>::infinity();
    auto make_mask = [&](ir::NodePtr vis) {
      return o::select(vis, o::scalar_f32(0.0f), o::scalar_f32(ninf));                   // f32 [B,1,S,KV]
    };
    if (auto p = m.parameter("self_kq_mask")) replace_param(rw, p, make_mask(visible));
    if (auto p = m.parameter("self_kq_mask_swa")) {
      if (opt_.sliding_window <= 0)
        return make_error("GenAIInterface: the graph has self_kq_mask_swa but no sliding window was given",
                          "pass GenAIOptions::sliding_window (runtime::ModelFile reads it from the file)");
      auto in_window = outer(o::less(outer(o::subtract(qpos, keys)), o::scalar_i64(opt_.sliding_window)));
      auto mask = make_mask(outer(o::logical_and(visible, in_window)));
      mask->rt_info()[kSlidingWindow] = opt_.sliding_window;
      replace_param(rw, p, mask);
    }
    if (auto p = m.parameter("inp_out_ids")) {
      if (p->consumer_count() > 0)
        return make_error("GenAIInterface: inp_out_ids is still read by " + p->consumers()[0].node->describe(),
                          "FixInpOutIdsRowSelect must rewrite every inp_out_ids row gather first");
      rw.remove_parameter(p);
    }
    if (auto s = fix_lm_head(rw); !s) return s.error();
    std::vector<ir::NodePtr> params = {input_ids, attention_mask, position_ids, beam_idx};
    params.insert(params.end(), lora.begin(), lora.end());
    for (auto& p : m.parameters()) params.push_back(p);
    m.parameters() = params;
    log_.push_back("GenAIInterface: applied");
    return true;
  }

 private:
  void replace_param(pattern::Rewriter& rw, const ir::NodePtr& p, const ir::NodePtr& v) {
    v->set_name(p->name());  // diagnostics still say 'inp_pos'
    (void)rw.replace_value(ir::Value(p, 0), v, false);
    rw.remove_parameter(p);
  }

  // The LM head: Result 'logits' <- MatMul(x [B,1,1,E] -> Squeeze(1) -> [B,1,E], W) -> [B,1,V],
  // possibly through elementwise ops with scalars (the soft-cap).
  Status fix_lm_head(pattern::Rewriter& rw) {
    for (const auto& r : rw.model().results()) {
      if (r->name() != "logits") continue;
      ir::NodePtr mm = lm_head(rw.model());
      if (!mm)
        return make_error("GenAIInterface: the LM head " + r->input(0).node->describe() + " is not a MatMul",
                          "the Result 'logits' must read a MatMul (through scalar ops at most) so that a row gather can sit in front");
      if (mm->input(0).shape().rank() == 4) {
        auto x3 = o::squeeze(mm->input(0), {1});                                             // [B,1,E]
        rw.set_input(mm, 0, x3);
      }
      return {};
    }
    return make_error("GenAIInterface: the model has no Result 'logits'");
  }

  GenAIOptions opt_;
};

}  // namespace

std::unique_ptr<pattern::Pass> genai_interface(GenAIOptions options) {
  return std::make_unique<GenAIInterface>(std::move(options));
}

}  // namespace ggflow::transforms
