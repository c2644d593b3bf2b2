// ContinuousBatchingPipeline: many requests at once over a paged KV cache. Text (or chat
// messages) in, text out per request, streamed; the scheduling, block management and prefix
// caching are serving::ContinuousBatchingEngine's, the model is any runtime::BatchRunner (the paged
// model, or the RecomputeRunner reference).
//
// Model of a request: encode the prompt, hand the ids to the engine with the request's own
// sampler; every token the engine produces goes through the request's StreamDecoder (never half
// a UTF-8 character) and StopCondition (stop ids, the vocabulary's end-of-generation tokens, stop
// strings across token boundaries, max_tokens); released text is appended to the request's text
// and streamed; a stop string ends the request in the engine at once (its blocks are freed).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/sampler.h"
#include "text/sampler_stop.h"
#include "serving/scheduler_engine.h"
#include "text/tokenizer_stream.h"
#include "pipeline/constrained_sampler.h"
#include "pipeline/llm_pipeline.h"
#include "pipeline/prompt.h"
#include "pipeline/speculative.h"
#include "runtime/compiled_model.h"
#include "runtime/model_file.h"
#include "runtime/paged_batch.h"

namespace ggflow::pipeline {

using RequestId = serving::RequestId;
// Receives a request's text as it becomes final; return false to stop that request.
using RequestStreamer = std::function<bool(RequestId, std::string_view)>;

class ContinuousBatchingPipeline {
 public:
  // The file's paged model, compiled with `options`, with a pool of `config.num_blocks` blocks
  // (the one setting of the pool size: the runner and the block manager both take it from here).
  // With `spec` enabled, speculative decoding (a draft model: its own paged model and pool of the
  // same size, on the target's thread pool; or prompt lookup).
  static Result<std::unique_ptr<ContinuousBatchingPipeline>> open(const runtime::ModelFile& file,
                                                                  const serving::EngineConfig& config,
                                                                  const runtime::CompileOptions& options = {},
                                                                  const SpeculativeOptions& spec = {});
  // Over another runner (the RecomputeRunner reference, tests): it must outlive the pipeline and
  // use a pool of `config.num_blocks` blocks.
  static Result<std::unique_ptr<ContinuousBatchingPipeline>> create(const runtime::ModelFile& file,
                                                                    runtime::BatchRunner& runner,
                                                                    const serving::EngineConfig& config);

  // Queues a request. Errors (the other requests go on): invalid sampling parameters, an empty
  // prompt, a prompt that does not fit the context, a grammar that cannot start. A `constraint`
  // holds the answer to its grammar (constrained_sampler.h). `lora`: the model's LoRA adapters the
  // request runs with (a mask, serving::RequestParams::lora; 0: none).
  Result<RequestId> add_request(std::string_view prompt, const text::SamplingParams& params,
                                RequestStreamer stream = {}, const Constraint& constraint = {}, uint64_t lora = 0);
  // The same from token ids (already encoded, e.g. by a server thread with format().encode()).
  Result<RequestId> add_request_tokens(std::vector<int32_t> ids, const text::SamplingParams& params,
                                       RequestStreamer stream = {}, const Constraint& constraint = {}, uint64_t lora = 0);
  Result<RequestId> add_chat_request(const nlohmann::ordered_json& messages, const text::SamplingParams& params,
                                     RequestStreamer stream = {}, const Constraint& constraint = {}, uint64_t lora = 0);
  // Sees the logits row each generated token of every later request was chosen from (tests).
  void set_logits_observer(serving::LogitsCallback observer) { logits_observer_ = std::move(observer); }
  Status cancel(RequestId id);               // frees the request's blocks at once
  Result<serving::StepStats> step();
  Status run_until_done();
  // Forgets a finished request (its result() is gone); a no-op for one still running.
  void release(RequestId id);
  // A finished (or running) request's text, tokens, finish reason, usage and timing.
  Result<GenerationResult> result(RequestId id) const;
  // Runs every prompt to completion together; results in the order of `prompts`.
  Result<std::vector<GenerationResult>> generate(const std::vector<std::string>& prompts,
                                                 const text::SamplingParams& params);

  const text::Tokenizer& tokenizer() const { return format_->tokenizer(); }
  // Shared and immutable: safe to use from other threads than the one that steps the pipeline.
  std::shared_ptr<const PromptFormat> format() const { return format_; }
  serving::ContinuousBatchingEngine& engine() { return *engine_; }
  // The paged model open() compiled (nullptr over another runner).
  const runtime::CompiledModel* compiled_model() const { return compiled_; }
  // Speculative decoding on or off for the following steps (benchmarks compare both on one
  // pipeline; no effect without a proposer).
  void set_speculation(bool on) { engine_->set_proposer(on && spec_ ? spec_->proposer.get() : nullptr); }
  // The speculative decoding proposer (nullptr: off).
  const serving::Proposer* proposer() const { return spec_ ? spec_->proposer.get() : nullptr; }

 private:
  struct Request {
    std::unique_ptr<text::StreamDecoder> decoder;
    std::unique_ptr<text::StopCondition> stop;
    RequestStreamer stream;
    std::string text;
    text::FinishReason finish = text::FinishReason::None;  // set by the stop rules
    std::shared_ptr<ConstrainedSampler> constrained;       // null: free text
  };
  ContinuousBatchingPipeline() = default;
  bool on_token(RequestId id, int32_t token);
  void emit(RequestId id, Request& r, const std::string& text);

  std::unique_ptr<Speculation> spec_;                   // open() with speculative decoding
  std::unique_ptr<runtime::BatchRunner> owned_runner_;  // open(): the paged runner
  const runtime::CompiledModel* compiled_ = nullptr;
  std::shared_ptr<const PromptFormat> format_;
  std::unique_ptr<serving::ContinuousBatchingEngine> engine_;
  std::map<RequestId, Request> requests_;
  std::unique_ptr<MaskWorker> mask_worker_;  // started by the first constrained request
  serving::LogitsCallback logits_observer_;
};

}  // namespace ggflow::pipeline
