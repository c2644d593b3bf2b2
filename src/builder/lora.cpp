#include "builder/lora.h"

#include "gguf/dequant.h"
#include "gguf/types.h"

namespace ggflow::builder {

namespace {

std::string ne_str(const std::vector<uint64_t>& ne) {
  std::string s;
  for (auto n : ne) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return "[" + s + "]";
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string lora_scale_name(size_t i) { return "lora_scale_" + std::to_string(i); }

Result<std::shared_ptr<const LoraAdapter>> open_lora(const std::string& path, const gguf::File& base) {
  auto f = gguf::File::open(path);
  if (!f) return make_error("LoRA adapter '" + path + "': " + f.error().what, f.error().hint);
  auto a = std::make_shared<LoraAdapter>();
  a->file = std::move(*f);
  const gguf::File& file = a->file;
  const std::string at = "LoRA adapter '" + path + "': ";
  const std::string remake = "make the adapter with llama.cpp's convert_lora_to_gguf.py for this base model";
  auto type = file.get<std::string>("general.type");
  if (!type || *type != "adapter")
    return make_error(at + "general.type is " + (type ? "'" + *type + "'" : std::string("missing")) + ", not 'adapter'",
                      "give a LoRA adapter file, not a model; " + remake);
  auto kind = file.get<std::string>("adapter.type");
  if (!kind || *kind != "lora")
    return make_error(at + "adapter.type is " + (kind ? "'" + *kind + "'" : std::string("missing")) + ", not 'lora'",
                      "ggflow applies LoRA adapters only; " + remake);
  auto arch = file.get<std::string>("general.architecture"), base_arch = base.get<std::string>("general.architecture");
  if (!arch || !base_arch || *arch != *base_arch)
    return make_error(at + "it is for architecture '" + (arch ? *arch : std::string("?")) + "', the model is '" +
                          (base_arch ? *base_arch : std::string("?")) + "'",
                      "use an adapter trained for this base model");
  if (file.has("adapter.lora.alpha")) {
    auto alpha = file.get<float>("adapter.lora.alpha");
    if (!alpha) return make_error(at + "adapter.lora.alpha is not a number", remake);
    a->alpha = *alpha;
  }
  for (const auto& t : file.tensors()) {
    const std::string name(t.name);
    const bool is_a = ends_with(name, ".lora_a"), is_b = ends_with(name, ".lora_b");
    if (!is_a && !is_b)
      return make_error(at + "tensor '" + name + "' is not a .lora_a or .lora_b tensor", remake);
    const std::string w = name.substr(0, name.size() - 7);
    auto& pair = a->pairs[w];
    (is_a ? pair.first : pair.second) = &t;
  }
  if (a->pairs.empty()) return make_error(at + "it holds no tensors", remake);
  for (const auto& [w, pair] : a->pairs) {
    if (!pair.first || !pair.second)
      return make_error(at + "'" + w + "' has " + (pair.first ? ".lora_a but no .lora_b" : ".lora_b but no .lora_a"),
                        "every adapted matrix needs both halves; " + remake);
    const gguf::TensorInfo* base_w = base.find_tensor(w);
    if (!base_w)
      return make_error(at + "it adapts '" + w + "', which the model does not have", "use an adapter trained for this base model");
    if (w == "token_embd.weight" || w == "per_layer_token_embd.weight")
      return make_error(at + "it adapts the token embedding '" + w + "'", "ggflow applies LoRA to the layers' matrix products only; leave the embedding out of the adapter");
    if (w == "output.weight")
      return make_error(at + "it adapts the LM head 'output.weight'", "ggflow applies LoRA to the layers' matrix products only; leave the LM head out of the adapter");
    const gguf::TensorInfo &A = *pair.first, &B = *pair.second;
    if (base_w->ne.size() != 2 || A.ne.size() != 2 || B.ne.size() != 2)
      return make_error(at + "'" + w + "' or its halves are not matrices", remake);
    if (A.ne[0] != base_w->ne[0] || B.ne[1] != base_w->ne[1])
      return make_error(at + "'" + w + "' is " + ne_str(base_w->ne) + " but its lora_a is " + ne_str(A.ne) + " and lora_b " + ne_str(B.ne) +
                            " (GGML order: lora_a [n_in, r], lora_b [r, n_out])",
                        "the adapter was made for another model size; use one trained for this base model");
    if (A.ne[1] != B.ne[0])
      return make_error(at + "'" + w + "': lora_a " + ne_str(A.ne) + " and lora_b " + ne_str(B.ne) + " disagree on the rank",
                        "lora_a must be [n_in, r] and lora_b [r, n_out] (an adapter from llama.cpp's old finetune example is transposed); " + remake);
    const int64_t r = static_cast<int64_t>(A.ne[1]);
    if (r <= 0) return make_error(at + "'" + w + "' has rank 0", remake);
    if (a->rank == 0) a->rank = r;
    if (a->rank != r)
      return make_error(at + "its matrices have ranks " + std::to_string(a->rank) + " and " + std::to_string(r),
                        "ggflow needs one rank per adapter; make the adapter with one rank for every matrix");
    for (const gguf::TensorInfo* t : {pair.first, pair.second})
      if (!gguf::can_dequantize(t->type))
        return make_error(at + "tensor '" + std::string(t->name) + "' has type " + std::string(gguf::traits(t->type).name) +
                              ", which ggflow cannot compute with",
                          "store the adapter in F32, F16, BF16 or Q8_0");
  }
  return std::shared_ptr<const LoraAdapter>(std::move(a));
}

}  // namespace ggflow::builder
