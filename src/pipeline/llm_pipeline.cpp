#include "pipeline/llm_pipeline.h"

#include <algorithm>
#include <chrono>

#include "genai/tokenizer_stream.h"
#include "gguf/file.h"

namespace ggflow::pipeline {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> stop_ids_with_eog(const genai::Tokenizer& tok, std::vector<int32_t> own) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_eog(id) && std::find(own.begin(), own.end(), id) == own.end()) own.push_back(id);
  return own;
}

Result<std::unique_ptr<LLMPipeline>> LLMPipeline::create(const std::string& path, std::unique_ptr<SequenceModel> model) {
  auto file = gguf::File::open(path);
  if (!file) return file.error();
  auto tok = genai::Tokenizer::from_file(*file);
  if (!tok) return tok.error();
  std::unique_ptr<LLMPipeline> p(new LLMPipeline());
  p->tok_ = std::make_unique<genai::Tokenizer>(std::move(*tok));
  if (auto src = file->get<std::string>("tokenizer.chat_template")) {
    auto t = genai::ChatTemplate::parse(*src);
    if (!t) return t.error();
    p->tmpl_ = std::make_unique<genai::ChatTemplate>(std::move(*t));
  }
  p->model_ = std::move(model);
  p->eog_ids_ = stop_ids_with_eog(*p->tok_, {});
  return p;
}

Result<std::string> LLMPipeline::apply_chat_template(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  if (!tmpl_)
    return make_error("the model file has no chat template (tokenizer.chat_template)",
                      "pass the prompt as plain text, without --chat");
  genai::ChatInputs in;
  in.messages = messages;
  in.add_generation_prompt = add_generation_prompt;
  // Templates that write bos_token themselves get it as text; encode() then does not add it twice
  // when the vocabulary adds none (SmolLM2, Qwen); llama-3 style templates rely on the same rule.
  if (tok_->bos() >= 0) in.bos_token = tok_->token_text(tok_->bos());
  if (tok_->eos() >= 0) in.eos_token = tok_->token_text(tok_->eos());
  return tmpl_->render(in);
}

Result<GenerationResult> LLMPipeline::chat(const nlohmann::ordered_json& messages, const genai::SamplingParams& params,
                                           const Streamer& stream) {
  auto prompt = apply_chat_template(messages, true);
  if (!prompt) return prompt.error();
  return generate(*prompt, params, stream);
}

Result<GenerationResult> LLMPipeline::generate(std::string_view prompt, const genai::SamplingParams& params,
                                               const Streamer& stream) {
  if (auto s = params.validate(model_->n_vocab()); !s) return s.error();
  const auto t0 = Clock::now();
  if (prompt.empty()) return make_error("the prompt is empty", "pass some text");
  genai::EncodeOptions eo;
  auto ids = tok_->encode(prompt, eo);
  if (!ids) return ids.error();
  // A template that already wrote the BOS text gives it twice; llama.cpp warns and keeps both,
  // ggflow keeps one.
  if (ids->size() >= 2 && tok_->bos() >= 0 && (*ids)[0] == tok_->bos() && (*ids)[1] == tok_->bos())
    ids->erase(ids->begin());
  const int64_t n_prompt = static_cast<int64_t>(ids->size());
  if (n_prompt >= model_->n_ctx())
    return make_error("the prompt has " + std::to_string(n_prompt) + " tokens; the context holds " +
                          std::to_string(model_->n_ctx()),
                      "shorten the prompt");

  genai::SamplingParams p = params;
  p.stop_token_ids = stop_ids_with_eog(*tok_, p.stop_token_ids);
  genai::Sampler sampler(p, *ids);
  genai::StopCondition stop(p);
  genai::StreamDecoder decoder(*tok_);
  GenerationResult out;
  out.usage.prompt_tokens = n_prompt;

  model_->reset();
  auto logits = model_->step(*ids);
  if (!logits) return logits.error();
  auto t_first = Clock::now();
  bool cancelled = false;
  auto emit = [&](const std::string& text) {
    if (text.empty() || cancelled) return;
    out.text += text;
    if (stream && !stream(text)) cancelled = true;
  };
  while (true) {
    const int32_t token = sampler.sample(*logits);
    if (out.tokens.empty()) t_first = Clock::now();
    out.tokens.push_back(token);
    auto piece = decoder.push(token);
    if (!piece) return piece.error();
    emit(stop.push(token, *piece));
    if (stop.done() || cancelled) break;
    if (model_->n_past() + 1 > model_->n_ctx()) {
      out.finish = genai::FinishReason::Length;
      break;
    }
    logits = model_->step(std::span(&token, 1));
    if (!logits) return logits.error();
  }
  if (stop.done()) out.finish = stop.reason();
  if (out.finish != genai::FinishReason::Stop) emit(decoder.finish());
  if (cancelled && out.finish == genai::FinishReason::None) out.finish = genai::FinishReason::Stop;
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
