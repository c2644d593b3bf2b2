// AdaptToGenAI = FixEmbdAxis, then FixInpOutIdsRowSelect, then GenAIInterface (see the header).
// The two structural fixes match from the raw Parameters inp_tokens / inp_out_ids, so they run
// before GenAIInterface replaces those inputs.
#include "transforms/adapt_to_genai/adapt_to_genai.h"

namespace ggflow::transforms {

Result<bool> AdaptToGenAI::run(ir::Model& model) {
  if (!model.parameter("inp_tokens")) {
    log_.push_back("AdaptToGenAI: no Parameter 'inp_tokens': not a graph of the builder, nothing to do");
    return false;
  }
  bool changed = false;
  pattern::MatcherPass embd = fix_embd_axis(), rows = fix_inp_out_ids_row_select();
  auto iface = genai_interface(options_);
  for (pattern::Pass* p : std::initializer_list<pattern::Pass*>{&embd, &rows, iface.get()}) {
    auto r = p->run(model);
    log_.insert(log_.end(), p->log().begin(), p->log().end());
    if (!r) return make_error("AdaptToGenAI: " + r.error().what, r.error().hint);
    changed = changed || *r;
    if (auto s = model.infer(); !s) return make_error("AdaptToGenAI after " + p->name() + ": " + s.error().what, s.error().hint);
  }
  return changed;
}

Result<GenAIOptions> genai_options_from_file(const gguf::File& file, const std::string& path) {
  GenAIOptions o;
  std::string arch(file.architecture());
  if (auto w = file.get<int64_t>(arch + ".attention.sliding_window")) o.sliding_window = *w;
  for (const auto& kv : file.metadata()) {
    std::string key(kv.key);
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const gguf::Value& v = kv.value;
    if (v.type == gguf::ValueType::STRING) o.tokenizer[key] = std::string(v.s);
    else if (v.type == gguf::ValueType::BOOL) o.tokenizer[key] = v.u != 0;
    else if (v.is_float()) o.tokenizer[key] = v.f;
    else if (v.is_integer())
      o.tokenizer[key] = v.type == gguf::ValueType::UINT64 || v.type == gguf::ValueType::UINT32 ||
                                 v.type == gguf::ValueType::UINT16 || v.type == gguf::ValueType::UINT8
                             ? static_cast<int64_t>(v.u) : v.i;
    else if (v.type == gguf::ValueType::ARRAY && v.arr) o.tokenizer[key + ".size"] = static_cast<int64_t>(v.arr->size);
  }
  o.tokenizer["gguf.path"] = path.empty() ? file.path() : path;
  return o;
}

}  // namespace ggflow::transforms
