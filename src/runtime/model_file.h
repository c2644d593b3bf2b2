// ModelFile: one .gguf file, opened once per process. It holds the mapping, the hyper-parameters
// and the raw-layout IR model built and translated from it (builder -> frontend). Everything
// downstream is made from this one object: the tokenizer and chat template read its metadata
// (pipeline/prompt.h), and each layout's model is a clone of the raw graph converted by the
// layout passes. Nobody opens the path a second time.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "builder/build.h"
#include "gguf/file.h"
#include "ir/model.h"
#include "transforms/layouts.h"

namespace ggflow::runtime {

// A LoRA adapter to apply (--lora FILE[:SCALE]): builder/lora.h.
struct LoraSpec {
  std::string path;
  float scale = 1.0f;
};
// "FILE" or "FILE:SCALE" (llama.cpp's --lora / --lora-scaled in one). Errors: no file, a scale
// that is not a finite number.
Result<LoraSpec> parse_lora_spec(std::string_view arg);

class ModelFile {
 public:
  // Errors: the file (named, with the byte offset), the architecture, a missing, mistyped or
  // inconsistent key (zero counts, head counts that do not divide, unknown RoPE scaling, a layer
  // count or vocabulary that does not match the tensors), a missing or wrong-shaped tensor, a NaN
  // or Inf in any weight (a float element, or the scale of a quantized block). Each names the key
  // or tensor; nothing is left to fail when a token first reaches the broken part.
  // `loras`: adapters built into the graph unmerged (adapter i: the input lora_scale_i); each
  // sequence picks one or none at run time. Errors also: an adapter that does not fit (lora.h).
  static Result<std::shared_ptr<const ModelFile>> open(const std::string& path, const builder::BuildOptions& opt = {},
                                                       std::span<const LoraSpec> loras = {});

  const gguf::File& file() const { return file_; }
  const std::string& path() const { return file_.path(); }
  const builder::HParams& hparams() const { return hp_; }
  int64_t n_vocab() const { return hp_.n_vocab; }
  // Logits per row: n_vocab, or BuildOptions::logit_rows where that cuts the LM head.
  int64_t n_logits() const { return opt_.logit_rows > 0 ? std::min(opt_.logit_rows, hp_.n_vocab) : hp_.n_vocab; }
  // The training context ({arch}.context_length), or 4096 when the file has none.
  int64_t n_ctx_train() const { return hp_.n_ctx_train > 0 ? hp_.n_ctx_train : 4096; }
  bool flash_attn() const { return opt_.flash_attn; }
  // The adapters, in the order given: each one's file and factor (scale · alpha / rank).
  size_t n_loras() const { return opt_.loras.size(); }
  const builder::LoraAdapter& lora(size_t i) const { return *opt_.loras[i]; }
  const std::vector<float>& lora_factors() const { return lora_factors_; }
  // The paged layout's KV cache element type: F32, F16 or Q8_0 (BuildOptions::kv_type).
  gguf::GgmlType kv_type() const { return opt_.kv_type; }

  // A fresh model in `layout`: the raw graph cloned (weights shared), then the layout passes and
  // the fusions for execution (transforms/fusion), the same in every layout. `log` receives the
  // passes' logs.
  Result<ir::Model> layout_model(transforms::Layout layout, std::vector<std::string>* log = nullptr) const;

 private:
  ModelFile(gguf::File f) : file_(std::move(f)) {}
  gguf::File file_;
  builder::BuildOptions opt_;
  std::vector<float> lora_factors_;
  builder::HParams hp_;
  ir::Model raw_;
};

}  // namespace ggflow::runtime
