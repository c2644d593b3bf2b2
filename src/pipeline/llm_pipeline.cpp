#include "pipeline/llm_pipeline.h"

#include <chrono>

#include "runtime/greedy.h"
#include "text/tokenizer_stream.h"

namespace ggflow::pipeline {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<LLMPipeline>> LLMPipeline::create(const runtime::ModelFile& file,
                                                         std::unique_ptr<runtime::SequenceRunner> runner) {
  auto format = PromptFormat::from_file(file.file());
  if (!format) return format.error();
  std::unique_ptr<LLMPipeline> p(new LLMPipeline());
  p->format_ = std::move(*format);
  p->model_ = std::move(runner);
  return p;
}

Result<std::unique_ptr<LLMPipeline>> LLMPipeline::open(const runtime::ModelFile& file, transforms::Layout layout,
                                                       const runtime::RunnerOptions& options) {
  auto r = runtime::open_sequence_runner(file, layout, options);
  if (!r) return r.error();
  return create(file, std::move(*r));
}

Result<GenerationResult> LLMPipeline::chat(const nlohmann::ordered_json& messages, const text::SamplingParams& params,
                                           const Streamer& stream, const Constraint& constraint) {
  auto prompt = format_->apply_chat_template(messages, true);
  if (!prompt) return prompt.error();
  return generate(*prompt, params, stream, constraint);
}

Result<GenerationResult> LLMPipeline::generate(std::string_view prompt, const text::SamplingParams& params,
                                               const Streamer& stream, const Constraint& constraint) {
  if (auto s = params.validate(model_->n_vocab()); !s) return s.error();
  const auto t0 = Clock::now();
  auto ids = format_->encode(prompt);
  if (!ids) return ids.error();
  const int64_t n_prompt = static_cast<int64_t>(ids->size());
  if (n_prompt >= model_->n_ctx())
    return make_error("the prompt has " + std::to_string(n_prompt) + " tokens; the context holds " +
                          std::to_string(model_->n_ctx()),
                      "shorten the prompt");

  text::SamplingParams p = params;
  if (!p.ignore_eos) p.stop_token_ids = format_->stop_ids(p.stop_token_ids);
  text::Sampler sampler(p, *ids);
  std::shared_ptr<ConstrainedSampler> constrained;
  if (constraint) {
    auto vocab = format_->grammar_vocab();
    if (!vocab) return vocab.error();
    if (!mask_worker_) mask_worker_ = std::make_unique<MaskWorker>();
    auto cs = ConstrainedSampler::create(p, *ids, constraint.grammar, *vocab, mask_worker_.get());
    if (!cs) return cs.error();
    constrained = *cs;
  }
  text::StopCondition stop(p);
  text::StreamDecoder decoder(format_->tokenizer());
  GenerationResult out;
  out.usage.prompt_tokens = n_prompt;

  // A step whose logits hold NaN/Inf ends the generation (a token sampled from them is noise).
  auto check_logits = [&](std::span<const float> row) -> Status {
    if (const char* bad = runtime::non_finite(row))
      return make_error("the model produced " + std::string(bad) + " logits at step " + std::to_string(out.tokens.size()) +
                            " (position " + std::to_string(model_->n_past() - 1) + "); the weights or the input are broken",
                        "the weights were checked at load, so an activation overflowed: report the model and the prompt");
    return {};
  };
  model_->reset();
  auto logits = model_->step(*ids);
  if (!logits) return logits.error();
  if (auto s = check_logits(*logits); !s) return s.error();
  auto t_first = Clock::now();
  bool cancelled = false;
  auto emit = [&](const std::string& text) {
    if (text.empty() || cancelled) return;
    out.text += text;
    if (stream && !stream(text)) cancelled = true;
  };
  while (true) {
    const int32_t token = constrained ? constrained->sample(*logits) : sampler.sample(*logits);
    if (out.tokens.empty()) t_first = Clock::now();
    out.tokens.push_back(token);
    auto piece = decoder.push(token);
    if (!piece) return piece.error();
    emit(stop.push(token, *piece));
    if (stop.done() || cancelled) break;
    if (model_->n_past() + 1 > model_->n_ctx()) {
      out.finish = text::FinishReason::Length;
      break;
    }
    logits = model_->step(std::span(&token, 1));
    if (!logits) return logits.error();
    if (auto s = check_logits(*logits); !s) return s.error();
  }
  if (constrained)
    if (std::string why = constrained->error(); !why.empty())
      return make_error("the grammar stopped the generation: " + why,
                        "the grammar or schema is too ambiguous for the matcher's limits, or no token can continue it");
  if (stop.done()) out.finish = stop.reason();
  if (out.finish != text::FinishReason::Stop) emit(decoder.finish());
  if (cancelled && out.finish == text::FinishReason::None) out.finish = text::FinishReason::Stop;
  // The stop token itself is not part of the completion text but is a generated token.
  out.usage.completion_tokens = static_cast<int64_t>(out.tokens.size());
  const auto t_end = Clock::now();
  out.timing.total_s = std::chrono::duration<double>(t_end - t0).count();
  out.timing.time_to_first_token_s = std::chrono::duration<double>(t_first - t0).count();
  if (out.tokens.size() > 1)
    out.timing.time_per_output_token_s =
        std::chrono::duration<double>(t_end - t_first).count() / static_cast<double>(out.tokens.size() - 1);
  return out;
}

}  // namespace ggflow::pipeline
