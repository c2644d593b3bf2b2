// One request's model, as the single-request pipeline sees it: feed the next tokens, get the
// logits of the last one. The KV state lives inside; reset() empties it between requests.
// Implementations: the raw runner (raw GGML layout, the numeric reference) and the stateful SDPA
// model (LLMPipeline's default); both run on the IR reference evaluator.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/result.h"
#include "transforms/engines/engines.h"

namespace ggflow::pipeline {

class SequenceModel {
 public:
  virtual ~SequenceModel() = default;
  virtual void reset() = 0;
  // f32 [n_vocab]: the logits after the last of `tokens`. Errors: context exhausted, evaluation.
  virtual Result<std::vector<float>> step(std::span<const int32_t> tokens) = 0;
  virtual int64_t n_past() const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_ctx() const = 0;
};

// A layout engine (transforms/engines) behind the SequenceModel interface; `n_ctx` 0: the
// model's training context (`{arch}.context_length`).
Result<std::unique_ptr<SequenceModel>> open_sequence_model(const std::string& path, transforms::Layout layout,
                                                           int64_t n_ctx = 0);
inline Result<std::unique_ptr<SequenceModel>> open_raw_model(const std::string& path, int64_t n_ctx = 0) {
  return open_sequence_model(path, transforms::Layout::raw, n_ctx);
}
inline Result<std::unique_ptr<SequenceModel>> open_sdpa_model(const std::string& path, int64_t n_ctx = 0) {
  return open_sequence_model(path, transforms::Layout::sdpa, n_ctx);
}

}  // namespace ggflow::pipeline
