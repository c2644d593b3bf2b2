// SequenceRunner: one sequence at a time, in any layout. Feed the next tokens (a prompt or one
// decode token), get the logits of the last one; the KV state lives inside. LLMPipeline, `ggflow
// run --tokens` and the layout tests use it; the three layouts give the same bits.
//
//   raw    RawRunner (raw_runner.h): the translated GGML graph, caches cache_k_lN / cache_v_lN
//   sdpa   the stateful SDPA model: input_ids [1,T], attention_mask [1,P+T] (ones),
//          position_ids [1,T] = P.., beam_idx {0}; the KV are the compiled model's variables
//   paged  PagedRunner (paged_runner.h) with one sequence whose block table it fills itself
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "runtime/compiled_model.h"
#include "runtime/lora_inputs.h"
#include "runtime/model_file.h"
#include "transforms/layouts.h"

namespace ggflow::runtime {

class SequenceRunner {
 public:
  virtual ~SequenceRunner() = default;
  // f32 [n_vocab]: the logits after the last of `tokens`, valid until the next call. Errors: no
  // tokens, a token outside the vocabulary, the context full, execution.
  virtual Result<std::span<const float>> step(std::span<const int32_t> tokens) = 0;
  virtual void reset() = 0;  // forget the sequence
  virtual int64_t n_past() const = 0;
  virtual const CompiledModel& compiled() const = 0;
  int64_t n_vocab() const { return n_vocab_; }
  int64_t n_ctx() const { return n_ctx_; }
  // The LoRA adapters of the following steps: bit i = ModelFile's adapter i (0, the default:
  // none). Errors: no such adapter.
  Status set_lora(uint64_t mask) {
    if (auto s = lora_in_.check(mask); !s) return s;
    lora_ = mask;
    return {};
  }

 protected:
  // The checks every layout makes before it runs `tokens`.
  Status check_step(std::span<const int32_t> tokens) const;
  int64_t n_vocab_ = 0, n_ctx_ = 0;
  LoraInputs lora_in_;
  uint64_t lora_ = 0;
};

struct RunnerOptions {
  int64_t n_ctx = 0;        // context limit; 0: the model's training context
  CompileOptions compile;
};

// Converts the file's model to `layout`, compiles it and wraps it.
Result<std::unique_ptr<SequenceRunner>> open_sequence_runner(const ModelFile& file, transforms::Layout layout,
                                                             const RunnerOptions& options = {});

}  // namespace ggflow::runtime
