#include "pipeline/continuous_batching.h"

#include "runtime/paged_runner.h"

namespace ggflow::pipeline {

Result<std::unique_ptr<ContinuousBatchingPipeline>> ContinuousBatchingPipeline::open(
    const runtime::ModelFile& file, const serving::EngineConfig& config, const runtime::CompileOptions& options,
    const SpeculativeOptions& spec) {
  if (config.num_blocks <= 0)
    return make_error("the KV cache needs a number of blocks, got " + std::to_string(config.num_blocks),
                      "set --kv-blocks (blocks of 32 tokens)");
  if (auto s = spec.validate(); !s) return s.error();
  runtime::CompileOptions opts = options;
  // A draft model and its target run one after the other: one set of threads for both.
  if (!spec.draft_model.empty() && !opts.pool && opts.executor == runtime::Executor::cpu)
    opts.pool = runtime::make_thread_pool(opts.threads);
  auto runner = runtime::PagedRunner::create(file, config.num_blocks, opts);
  if (!runner) return runner.error();
  std::unique_ptr<Speculation> sp;
  serving::EngineConfig cfg = config;
  if (spec.enabled()) {
    auto s = Speculation::create(file, spec, config.num_blocks, opts);
    if (!s) return s.error();
    sp = std::move(*s);
    cfg.spec = sp->config;
  }
  auto p = create(file, **runner, cfg);
  if (!p) return p.error();
  (*p)->compiled_ = &(*runner)->compiled();
  (*p)->owned_runner_ = std::move(*runner);
  if (sp) (*p)->engine_->set_proposer(sp->proposer.get());
  (*p)->spec_ = std::move(sp);
  return p;
}

Result<std::unique_ptr<ContinuousBatchingPipeline>> ContinuousBatchingPipeline::create(
    const runtime::ModelFile& file, runtime::BatchRunner& runner, const serving::EngineConfig& config) {
  auto format = PromptFormat::from_file(file.file());
  if (!format) return format.error();
  serving::EngineConfig cfg = config;
  cfg.vocab_size = (*format)->tokenizer().n_vocab();
  cfg.num_loras = static_cast<int32_t>(file.n_loras());
  auto engine = serving::ContinuousBatchingEngine::create(cfg, runner);
  if (!engine) return engine.error();
  std::unique_ptr<ContinuousBatchingPipeline> p(new ContinuousBatchingPipeline());
  p->format_ = std::move(*format);
  p->engine_ = std::move(*engine);
  return p;
}

Result<RequestId> ContinuousBatchingPipeline::add_chat_request(const nlohmann::ordered_json& messages,
                                                               const text::SamplingParams& params,
                                                               RequestStreamer stream, const Constraint& constraint,
                                                               uint64_t lora) {
  auto prompt = format_->apply_chat_template(messages, true);
  if (!prompt) return prompt.error();
  return add_request(*prompt, params, std::move(stream), constraint, lora);
}

Result<RequestId> ContinuousBatchingPipeline::add_request(std::string_view prompt, const text::SamplingParams& params,
                                                          RequestStreamer stream, const Constraint& constraint, uint64_t lora) {
  auto ids = format_->encode(prompt);
  if (!ids) return ids.error();
  return add_request_tokens(std::move(*ids), params, std::move(stream), constraint, lora);
}

Result<RequestId> ContinuousBatchingPipeline::add_request_tokens(std::vector<int32_t> prompt_ids,
                                                                 const text::SamplingParams& params,
                                                                 RequestStreamer stream, const Constraint& constraint,
                                                                 uint64_t lora) {
  if (auto s = params.validate(format_->tokenizer().n_vocab()); !s) return s.error();
  text::SamplingParams p = params;
  if (!p.ignore_eos) p.stop_token_ids = format_->stop_ids(p.stop_token_ids);
  const int64_t room = engine_->max_model_len() - static_cast<int64_t>(prompt_ids.size());
  if (room < 1)
    return make_error("the prompt has " + std::to_string(prompt_ids.size()) + " tokens; the context holds " +
                          std::to_string(engine_->max_model_len()),
                      "shorten the prompt or give the KV cache more blocks");
  serving::RequestParams rp;
  rp.max_tokens = p.max_tokens > 0 ? std::min(p.max_tokens, room) : room;
  p.max_tokens = rp.max_tokens;  // the stop rules end on Length with the engine, releasing held text
  rp.stop_token_ids = p.stop_token_ids;
  std::shared_ptr<ConstrainedSampler> constrained;
  if (constraint) {
    auto vocab = format_->grammar_vocab();
    if (!vocab) return vocab.error();
    if (!mask_worker_) mask_worker_ = std::make_unique<MaskWorker>();
    auto cs = ConstrainedSampler::create(p, prompt_ids, constraint.grammar, *vocab, mask_worker_.get());
    if (!cs) return cs.error();
    constrained = *cs;
    rp.sample = [cs = constrained](std::span<const float> logits) { return cs->sample(logits); };
    rp.speculate = false;
  } else {
    serving::set_sampler(rp, p, prompt_ids);
  }
  rp.on_token = [this](RequestId id, int32_t token) { return on_token(id, token); };
  rp.on_logits = logits_observer_;
  rp.logprobs = p.logprobs;
  rp.prompt_logprobs = p.prompt_logprobs;
  rp.lora = lora;
  auto id = engine_->add_request(std::move(prompt_ids), std::move(rp));
  if (!id) return id.error();
  Request& r = requests_[*id];
  r.decoder = std::make_unique<text::StreamDecoder>(format_->tokenizer());
  r.stop = std::make_unique<text::StopCondition>(p);
  r.stream = std::move(stream);
  r.constrained = std::move(constrained);
  return *id;
}

void ContinuousBatchingPipeline::emit(RequestId id, Request& r, const std::string& text) {
  if (text.empty()) return;
  r.text += text;
  if (r.stream && !r.stream(id, text)) r.finish = text::FinishReason::Stop;
}

// Called by the engine for every token; false ends the request (its blocks are freed).
bool ContinuousBatchingPipeline::on_token(RequestId id, int32_t token) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return true;
  Request& r = it->second;
  if (r.finish != text::FinishReason::None) return false;
  auto piece = r.decoder->push(token);
  emit(id, r, r.stop->push(token, piece ? *piece : std::string()));
  if (r.stop->done()) {
    if (r.stop->reason() == text::FinishReason::Length) emit(id, r, r.decoder->finish());
    if (r.finish == text::FinishReason::None) r.finish = r.stop->reason();
    return false;
  }
  return r.finish == text::FinishReason::None;
}

void ContinuousBatchingPipeline::release(RequestId id) {
  const serving::Sequence* s = engine_->sequence(id);
  if (s && s->state != serving::Sequence::State::Finished) return;
  engine_->release(id);
  requests_.erase(id);
}

Status ContinuousBatchingPipeline::cancel(RequestId id) { return engine_->cancel(id); }

Result<serving::StepStats> ContinuousBatchingPipeline::step() { return engine_->step(); }

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
  // The engine ends a request the stop rules ended with Stop; they know whether it was a stop
  // string, an end token or the length.
  g.finish = out->end == text::FinishReason::Stop && r.finish != text::FinishReason::None ? r.finish : out->end;
  if (out->end == text::FinishReason::Error) return make_error("request " + std::to_string(id) + " failed: " + out->error);
  if (r.constrained)
    if (std::string why = r.constrained->error(); !why.empty())
      return make_error("request " + std::to_string(id) + " stopped by its grammar: " + why,
                        "the grammar or schema is too ambiguous for the matcher's limits, or no token can continue it");
  g.usage = {out->usage.prompt_tokens, out->usage.cached_tokens, out->usage.completion_tokens};
  g.timing = {out->timing.time_to_first_token_s, out->timing.time_per_output_token_s, out->timing.total_s};
  return g;
}

Result<std::vector<GenerationResult>> ContinuousBatchingPipeline::generate(const std::vector<std::string>& prompts,
                                                                           const text::SamplingParams& params) {
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
