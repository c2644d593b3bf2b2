// ChatTemplate: parse once, render many (see template.h).
#include "text/template.h"

#include <ctime>

namespace ggflow::text {

static Error to_error(const jinja::TemplateError& e) {
  std::string where = e.line > 0 ? "chat template line " + std::to_string(e.line) + ": " : "chat template: ";
  return make_error(where + e.what(),
                    "the template uses a construct ggflow does not support or rejected its input; "
                    "check the messages, or pass another template with --template");
}

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  try {
    t.program_ = jinja::parse_template(source);
  } catch (const jinja::TemplateError& e) {
    return to_error(e);
  }
  t.strftime_now = strftime_local_now;
  return t;
}

Result<std::string> ChatTemplate::render(const ChatInputs& in) const {
  using jinja::Value;
  if (!in.messages.is_array()) return make_error("chat template: messages must be a JSON array");
  Value globals = Value::make_dict();
  for (const auto& [k, v] : in.extra.items()) globals.dict->set(k, Value::from_json(v));
  globals.dict->set("messages", Value::from_json(in.messages));
  globals.dict->set("add_generation_prompt", Value::boolean(in.add_generation_prompt));
  globals.dict->set("bos_token", Value::string(in.bos_token));
  globals.dict->set("eos_token", Value::string(in.eos_token));
  if (!in.tools.is_null()) globals.dict->set("tools", Value::from_json(in.tools));
  try {
    jinja::Interpreter interp(limits, strftime_now ? strftime_now : strftime_local_now);
    return interp.render(*program_, globals);
  } catch (const jinja::TemplateError& e) {
    return to_error(e);
  }
}

std::string strftime_local_now(const std::string& format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
  return std::string(buf, n);
}

}  // namespace ggflow::text
