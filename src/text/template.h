// Chat templates: renders a model's `tokenizer.chat_template` (Jinja) with a conversation, the way
// Hugging Face transformers' apply_chat_template does (trim_blocks, lstrip_blocks, loop controls,
// `raise_exception`, `strftime_now`, transformers' `tojson`), in ggflow's own sandboxed engine
// (text/jinja_*.h): no host objects, no imports, bounded loops, recursion and output.
//
// Templates come from model files, so they are untrusted (server-side template injection): the
// engine has no attribute that leads out of the template (Python internals such as `__class__`
// and `__globals__` are refused by name), no file system ({% include/import/extends %} are refused
// tags), and every resource a template can consume has a limit, TemplateLimits below (documented
// in text/jinja_value.h with their default values); going past one fails the render with an Error
// naming the limit and its value. tests/text/test_template_sandbox.cpp holds the published
// payloads against Jinja in GGUF files and what each one gets.
//
// Variables seen by the template: messages, add_generation_prompt, bos_token, eos_token, tools
// (only when given) and any `extra` variables. A template that uses an unsupported construct
// fails with an Error naming the construct and the template line; it never renders wrong text.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja_interp.h"
#include "base/result.h"

namespace ggflow::text {

// The sandbox limits: source bytes, output bytes, string bytes, list items, range() length, loop
// iterations, macro recursion, nesting of the source and of values, run-time nesting, evaluation
// steps and bytes of strings per render.
using TemplateLimits = jinja::Limits;

struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;                                // null: `tools` is undefined
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
};

class ChatTemplate {
 public:
  // Parses the template (syntax errors and unknown tags are reported here, with the line).
  // `limits.max_source` and `max_nesting` apply to the source here; the others apply to render().
  static Result<ChatTemplate> parse(const std::string& source, const TemplateLimits& limits = {});
  Result<std::string> render(const ChatInputs& in) const;

  TemplateLimits limits;
  // strftime_now(format) as seen by templates; the default formats the local time now.
  std::function<std::string(const std::string&)> strftime_now;

 private:
  std::shared_ptr<jinja::Program> program_;
};

// strftime of the local time now (the default of ChatTemplate::strftime_now).
std::string strftime_local_now(const std::string& format);

}  // namespace ggflow::text
