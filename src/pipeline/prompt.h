// PromptFormat: what both pipelines need from a model file to turn a request into token ids:
// the tokenizer, the chat template (if the file has one) and the end-of-generation tokens.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/token_vocab.h"
#include "pipeline/tool_calls.h"
#include "text/template.h"
#include "text/tokenizer.h"
#include "gguf/file.h"

namespace ggflow::pipeline {

class PromptFormat {
 public:
  // From the metadata of the already opened file (runtime::ModelFile::file()).
  static Result<std::shared_ptr<const PromptFormat>> from_file(const gguf::File& file);

  // Renders `messages` with the file's chat template, bos/eos tokens as text.
  Result<std::string> apply_chat_template(const nlohmann::ordered_json& messages, bool add_generation_prompt = true) const;
  // The same with tool calling (pipeline/tool_calls.h): `messages` may hold assistant tool_calls
  // and `tool` messages (validate_tool_messages first); the request's tools go in as the
  // template's format wants (render_with_tools).
  Result<std::string> apply_chat_template(const nlohmann::ordered_json& messages, const ToolRequest& tools,
                                          bool add_generation_prompt = true) const;
  // The template's tool-call format and capabilities (Generic without a template).
  const ToolTemplate& tool_template() const { return tool_template_; }
  // Encodes a prompt (special tokens parsed, BOS as the vocabulary says, never twice).
  // Errors: empty text, invalid input.
  Result<std::vector<int32_t>> encode(std::string_view prompt) const;
  // Fill-in-the-middle: the code before the gap and the code after it as
  // [BOS] <fim_prefix> prefix <fim_suffix> suffix <fim_middle> (both as plain text: no special
  // tokens parsed); the model then writes the middle. Error: a vocabulary without FIM tokens.
  bool has_infill() const;
  Result<std::vector<int32_t>> encode_infill(std::string_view prefix, std::string_view suffix) const;
  // The request's own stop ids plus every end-of-generation token of the vocabulary.
  std::vector<int32_t> stop_ids(std::vector<int32_t> own) const;

  const text::Tokenizer& tokenizer() const { return *tok_; }
  // The vocabulary as the grammar engine sees it (grammar/token_vocab.h), built on first use
  // (thread-safe; tens of milliseconds for a 150k vocabulary) and shared by every constrained
  // request of the model, with its mask cache.
  Result<std::shared_ptr<const grammar::TokenVocab>> grammar_vocab() const;

 private:
  PromptFormat() = default;
  std::unique_ptr<text::Tokenizer> tok_;
  std::unique_ptr<text::ChatTemplate> tmpl_;  // null: the file has no chat template
  std::vector<int32_t> eog_ids_;
  ToolTemplate tool_template_;
  mutable std::once_flag vocab_once_;
  mutable Result<std::shared_ptr<const grammar::TokenVocab>> grammar_vocab_ = std::shared_ptr<const grammar::TokenVocab>();
};

}  // namespace ggflow::pipeline
