#include "pipeline/prompt.h"

#include <algorithm>

namespace ggflow::pipeline {

Result<std::shared_ptr<const PromptFormat>> PromptFormat::from_file(const gguf::File& file) {
  auto tok = text::Tokenizer::from_file(file);
  if (!tok) return tok.error();
  std::shared_ptr<PromptFormat> p(new PromptFormat());
  p->tok_ = std::make_unique<text::Tokenizer>(std::move(*tok));
  if (auto src = file.get<std::string>("tokenizer.chat_template")) {
    auto t = text::ChatTemplate::parse(*src);
    if (!t) return t.error();
    p->tmpl_ = std::make_unique<text::ChatTemplate>(std::move(*t));
    p->tool_template_ = ToolTemplate::analyze(*p->tmpl_, *src);
  }
  for (int32_t id = 0; id < p->tok_->n_vocab(); ++id)
    if (p->tok_->is_eog(id)) p->eog_ids_.push_back(id);
  return std::shared_ptr<const PromptFormat>(std::move(p));
}

Result<std::string> PromptFormat::apply_chat_template(const nlohmann::ordered_json& messages,
                                                      bool add_generation_prompt) const {
  if (!tmpl_)
    return make_error("the model file has no chat template (tokenizer.chat_template)",
                      "pass the prompt as plain text, without --chat");
  text::ChatInputs in;
  in.messages = messages;
  in.add_generation_prompt = add_generation_prompt;
  if (tok_->bos() >= 0) in.bos_token = tok_->token_text(tok_->bos());
  if (tok_->eos() >= 0) in.eos_token = tok_->token_text(tok_->eos());
  return tmpl_->render(in);
}

Result<std::string> PromptFormat::apply_chat_template(const nlohmann::ordered_json& messages, const ToolRequest& tools,
                                                      bool add_generation_prompt) const {
  if (!tmpl_)
    return make_error("the model file has no chat template (tokenizer.chat_template)",
                      "pass the prompt as plain text, without --chat");
  const std::string bos = tok_->bos() >= 0 ? tok_->token_text(tok_->bos()) : std::string();
  const std::string eos = tok_->eos() >= 0 ? tok_->token_text(tok_->eos()) : std::string();
  return render_with_tools(*tmpl_, tool_template_, messages, tools, add_generation_prompt, bos, eos);
}

bool PromptFormat::has_infill() const {
  return tok_->fim_pre() != text::kNoToken && tok_->fim_suf() != text::kNoToken && tok_->fim_mid() != text::kNoToken;
}

Result<std::vector<int32_t>> PromptFormat::encode_infill(std::string_view prefix, std::string_view suffix) const {
  if (!has_infill())
    return make_error("the model has no fill-in-the-middle tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, or <PRE>, "
                      "<SUF>, <MID>)",
                      "use a code model such as Qwen2.5-Coder");
  const text::EncodeOptions plain{.add_special = false, .parse_special = false};
  auto pre = tok_->encode(prefix, plain);
  if (!pre) return pre.error();
  auto suf = tok_->encode(suffix, plain);
  if (!suf) return suf.error();
  std::vector<int32_t> ids;
  if (tok_->add_bos() && tok_->bos() != text::kNoToken) ids.push_back(tok_->bos());
  ids.push_back(tok_->fim_pre());
  ids.insert(ids.end(), pre->begin(), pre->end());
  ids.push_back(tok_->fim_suf());
  ids.insert(ids.end(), suf->begin(), suf->end());
  ids.push_back(tok_->fim_mid());
  return ids;
}

Result<std::vector<int32_t>> PromptFormat::encode(std::string_view prompt) const {
  if (prompt.empty()) return make_error("the prompt is empty", "pass some text");
  auto ids = tok_->encode(prompt, text::EncodeOptions{});
  if (!ids) return ids.error();
  // A template that writes the BOS text itself, on a vocabulary that also adds BOS, would give it
  // twice; llama.cpp warns and keeps both, ggflow keeps one.
  if (ids->size() >= 2 && tok_->bos() >= 0 && (*ids)[0] == tok_->bos() && (*ids)[1] == tok_->bos())
    ids->erase(ids->begin());
  return ids;
}

std::vector<int32_t> PromptFormat::stop_ids(std::vector<int32_t> own) const {
  for (int32_t id : eog_ids_)
    if (std::find(own.begin(), own.end(), id) == own.end()) own.push_back(id);
  return own;
}

Result<std::shared_ptr<const grammar::TokenVocab>> PromptFormat::grammar_vocab() const {
  std::call_once(vocab_once_, [&] { grammar_vocab_ = grammar::TokenVocab::from_tokenizer(*tok_); });
  return grammar_vocab_;
}

}  // namespace ggflow::pipeline
