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

#include "genai/sampler.h"
#include "genai/sampler_stop.h"
#include "pipeline/prompt.h"
#include "pipeline/sequence_model.h"

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
  genai::FinishReason finish = genai::FinishReason::None;
  Usage usage;
  Timing timing;
};

// Receives text as it becomes final; return false to stop the generation early.
using Streamer = std::function<bool(std::string_view)>;

class LLMPipeline {
 public:
  // Reads the tokenizer and chat template from the file; `model` runs the graph.
  static Result<std::unique_ptr<LLMPipeline>> create(const std::string& path, std::unique_ptr<SequenceModel> model);

  Result<GenerationResult> generate(std::string_view prompt, const genai::SamplingParams& params,
                                    const Streamer& stream = {});
  // Renders `messages` with the model's chat template (add_generation_prompt), then generate().
  Result<GenerationResult> chat(const nlohmann::ordered_json& messages, const genai::SamplingParams& params,
                                const Streamer& stream = {});

  const genai::Tokenizer& tokenizer() const { return format_->tokenizer(); }
  const PromptFormat& format() const { return *format_; }
  SequenceModel& model() { return *model_; }

 private:
  LLMPipeline() = default;
  std::shared_ptr<const PromptFormat> format_;
  std::unique_ptr<SequenceModel> model_;
};

}  // namespace ggflow::pipeline
