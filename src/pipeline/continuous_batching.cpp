#include "pipeline/continuous_batching.h"

namespace ggflow::pipeline {

Result<std::unique_ptr<ContinuousBatchingPipeline>> ContinuousBatchingPipeline::create(
    const std::string& path, genai::ModelRunner& runner, const genai::EngineConfig& config) {
  auto format = PromptFormat::from_file(path);
  if (!format) return format.error();
  genai::EngineConfig cfg = config;
  cfg.vocab_size = (*format)->tokenizer().n_vocab();
  auto engine = genai::ContinuousBatchingEngine::create(cfg, runner);
  if (!engine) return engine.error();
  std::unique_ptr<ContinuousBatchingPipeline> p(new ContinuousBatchingPipeline());
  p->format_ = std::move(*format);
  p->engine_ = std::move(*engine);
  return p;
}

Result<RequestId> ContinuousBatchingPipeline::add_chat_request(const nlohmann::ordered_json& messages,
                                                               const genai::SamplingParams& params,
                                                               RequestStreamer stream) {
  auto prompt = format_->apply_chat_template(messages, true);
  if (!prompt) return prompt.error();
  return add_request(*prompt, params, std::move(stream));
}

Result<RequestId> ContinuousBatchingPipeline::add_request(std::string_view prompt, const genai::SamplingParams& params,
                                                          RequestStreamer stream) {
  if (auto s = params.validate(format_->tokenizer().n_vocab()); !s) return s.error();
  auto ids = format_->encode(prompt);
  if (!ids) return ids.error();
  genai::SamplingParams p = params;
  p.stop_token_ids = format_->stop_ids(p.stop_token_ids);
  const int64_t room = engine_->max_model_len() - static_cast<int64_t>(ids->size());
  if (room < 1)
    return make_error("the prompt has " + std::to_string(ids->size()) + " tokens; the context holds " +
                          std::to_string(engine_->max_model_len()),
                      "shorten the prompt or give the KV cache more blocks");
  genai::RequestParams rp;
  rp.max_tokens = p.max_tokens > 0 ? std::min(p.max_tokens, room) : room;
  p.max_tokens = rp.max_tokens;  // the stop rules end on Length with the engine, releasing held text
  rp.stop_token_ids = p.stop_token_ids;
  rp.sample = genai::make_sampler_fn(p, *ids);
  rp.on_token = [this](RequestId id, int32_t token) { return on_token(id, token); };
  auto id = engine_->add_request(std::move(*ids), std::move(rp));
  if (!id) return id.error();
  Request& r = requests_[*id];
  r.decoder = std::make_unique<genai::StreamDecoder>(format_->tokenizer());
  r.stop = std::make_unique<genai::StopCondition>(p);
  r.stream = std::move(stream);
  return *id;
}

void ContinuousBatchingPipeline::emit(RequestId id, Request& r, const std::string& text) {
  if (text.empty()) return;
  r.text += text;
  if (r.stream && !r.stream(id, text)) r.finish = genai::FinishReason::Stop;
}

// Called by the engine for every token; false ends the request (its blocks are freed).
bool ContinuousBatchingPipeline::on_token(RequestId id, int32_t token) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return true;
  Request& r = it->second;
  if (r.finish != genai::FinishReason::None) return false;
  auto piece = r.decoder->push(token);
  emit(id, r, r.stop->push(token, piece ? *piece : std::string()));
  if (r.stop->done()) {
    if (r.stop->reason() == genai::FinishReason::Length) emit(id, r, r.decoder->finish());
    if (r.finish == genai::FinishReason::None) r.finish = r.stop->reason();
    return false;
  }
  return r.finish == genai::FinishReason::None;
}

Status ContinuousBatchingPipeline::cancel(RequestId id) { return engine_->cancel(id); }

Result<genai::StepStats> ContinuousBatchingPipeline::step() { return engine_->step(); }

Status ContinuousBatchingPipeline::run_until_done() { return engine_->run_until_done(); }

Result<GenerationResult> ContinuousBatchingPipeline::result(RequestId id) const {
  auto out = engine_->output(id);
  if (!out) return out.error();
  auto it = requests_.find(id);
  if (it == requests_.end()) return make_error("unknown request " + std::to_string(id));
  const Request& r = it->second;
  GenerationResult g;
  g.text = r.text;
  g.tokens = out->tokens;
  switch (out->end) {
    case genai::EndReason::Length: g.finish = genai::FinishReason::Length; break;
    case genai::EndReason::None: g.finish = genai::FinishReason::None; break;
    default: g.finish = r.finish == genai::FinishReason::None ? genai::FinishReason::Stop : r.finish;
  }
  if (out->end == genai::EndReason::Error) return make_error("request " + std::to_string(id) + " failed: " + out->error);
  g.usage = {out->usage.prompt_tokens, out->usage.cached_tokens, out->usage.completion_tokens};
  g.timing = {out->timing.time_to_first_token_s, out->timing.time_per_output_token_s, out->timing.total_s};
  return g;
}

Result<std::vector<GenerationResult>> ContinuousBatchingPipeline::generate(const std::vector<std::string>& prompts,
                                                                           const genai::SamplingParams& params) {
  std::vector<RequestId> ids;
  for (const auto& p : prompts) {
    auto id = add_request(p, params);
    if (!id) return id.error();
    ids.push_back(*id);
  }
  if (auto s = run_until_done(); !s) return s.error();
  std::vector<GenerationResult> out;
  for (RequestId id : ids) {
    auto r = result(id);
    if (!r) return r.error();
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace ggflow::pipeline
