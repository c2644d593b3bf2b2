// LLMPipeline: one request at a time. Prompt text or chat messages in, text out (streamed), with
// the model's tokenizer and chat template, the sampler and the stop rules (stop ids, the
// vocabulary's end-of-generation tokens, stop strings, max_tokens, the context size).
//
// Model of a request: encode the prompt (special tokens parsed: chat templates write them), reset
// the model's KV state, prefill the whole prompt in one step, then sample, detokenize
// incrementally (never half a UTF-8 character), pass the text through the stop rules and stream
// what they release, and feed the token back, until a rule ends the generation.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/sampler.h"
#include "text/sampler_stop.h"
#include "pipeline/constrained_sampler.h"
#include "pipeline/prompt.h"
#include "runtime/model_file.h"
#include "runtime/sequence_runner.h"

namespace ggflow::pipeline {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens whose KV was reused (prefix cache)
  int64_t completion_tokens = 0;
};

struct Timing {
  double time_to_first_token_s = 0;
  double time_per_output_token_s = 0;  // after the first token
  double total_s = 0;
};

struct GenerationResult {
  std::string text;
  std::vector<int32_t> tokens;
  text::FinishReason finish = text::FinishReason::None;
  Usage usage;
  Timing timing;
};

// Receives text as it becomes final; return false to stop the generation early.
using Streamer = std::function<bool(std::string_view)>;

class LLMPipeline {
 public:
  // The tokenizer and chat template from `file`; `runner` runs the graph (raw or SDPA layout).
  static Result<std::unique_ptr<LLMPipeline>> create(const runtime::ModelFile& file,
                                                     std::unique_ptr<runtime::SequenceRunner> runner);
  // The file's model in `layout`, compiled with `options.compile`.
  static Result<std::unique_ptr<LLMPipeline>> open(const runtime::ModelFile& file, transforms::Layout layout,
                                                   const runtime::RunnerOptions& options = {});

  // A `constraint` holds the answer to its grammar (constrained_sampler.h).
  Result<GenerationResult> generate(std::string_view prompt, const text::SamplingParams& params,
                                    const Streamer& stream = {}, const Constraint& constraint = {});
  // Renders `messages` with the model's chat template (add_generation_prompt), then generate().
  Result<GenerationResult> chat(const nlohmann::ordered_json& messages, const text::SamplingParams& params,
                                const Streamer& stream = {}, const Constraint& constraint = {});

  const text::Tokenizer& tokenizer() const { return format_->tokenizer(); }
  const PromptFormat& format() const { return *format_; }
  runtime::SequenceRunner& runner() { return *model_; }

 private:
  LLMPipeline() = default;
  std::shared_ptr<const PromptFormat> format_;
  std::unique_ptr<runtime::SequenceRunner> model_;
  std::unique_ptr<MaskWorker> mask_worker_;  // started by the first constrained request
};

}  // namespace ggflow::pipeline
