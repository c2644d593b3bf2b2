// EmbeddingRunner: an encoder model (builder/encoder.cpp: BERT as llama.cpp converts it) compiled
// once, turning token ids into one embedding vector: the last layer's hidden states pooled as the
// file says (mean, CLS or last token) and L2-normalized, as llama.cpp's embedding tool returns
// them with --embd-normalize 2 (the caller tokenizes: text::Tokenizer::from_file on the same file). No KV cache: each call runs the whole sequence (attention over
// all of its tokens in both directions).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "builder/build.h"
#include "runtime/compiled_model.h"

namespace ggflow::runtime {

class EmbeddingRunner {
 public:
  // Errors: the file's, not an encoder, the compiler's.
  static Result<std::unique_ptr<EmbeddingRunner>> open(const std::string& path, const CompileOptions& options = {});

  // One sequence's vector, f32 [n_embd]. Errors: no tokens, more than the model's context, an id
  // outside the vocabulary.
  Result<std::vector<float>> embed(std::span<const int32_t> ids);
  const builder::EncoderParams& params() const { return params_; }
  const CompiledModel& compiled() const { return *cm_; }

 private:
  EmbeddingRunner() = default;
  std::shared_ptr<const void> file_;  // the mapped file the weights point into
  builder::EncoderParams params_;
  std::unique_ptr<CompiledModel> cm_;
  size_t in_tokens_ = 0, in_pos_ = 0, out_embd_ = 0;
  std::vector<ir::Tensor> inputs_;
};

// Pools hidden states f32 [T, E] (row-major: token t's E values at t·E) into one vector: the mean
// of the rows (summed in token order), the first row or the last; then divides by its L2 norm
// (summed in double, as llama.cpp's common_embd_normalize). A zero vector stays zero.
std::vector<float> pool_and_normalize(std::span<const float> hidden, int64_t T, int64_t E, builder::Pooling pooling);

}  // namespace ggflow::runtime
