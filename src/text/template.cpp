// ChatTemplate: parse once, render many (see template.h).
#include "text/template.h"

#include <ctime>

namespace ggflow::text {

static Error to_error(const jinja::TemplateError& e) {
  std::string where = e.line > 0 ? "chat template line " + std::to_string(e.line) + ": " : "chat template: ";
  std::string what = e.what();
  // The sandbox's refusals name a limit ("(Limits::max_...)") or the sandbox itself.
  const bool sandbox = what.find("(Limits::") != std::string::npos || what.find("in the sandbox") != std::string::npos;
  // The template controls parts of some messages (raise_exception's text, names): keep them short,
  // cut on a UTF-8 character boundary.
  constexpr size_t kMaxMessage = 1000;
  if (what.size() > kMaxMessage) {
    size_t n = kMaxMessage;
    while (n > 0 && (static_cast<unsigned char>(what[n]) & 0xc0) == 0x80) --n;
    what = what.substr(0, n) + "... (" + std::to_string(what.size()) + " bytes)";
  }
  if (sandbox)
    return make_error(where + what,
                      "the template sandbox refused this chat template: it is broken or malicious, or the input is "
                      "far larger than any chat; pass another template with --template, or shorten the input");
  return make_error(where + what,
                    "the template uses a construct ggflow does not support or rejected its input; "
                    "check the messages, or pass another template with --template");
}

// Anything else thrown below (std::bad_alloc at worst) is a failed render, never an abort.
static Error to_error(const std::exception& e) {
  return make_error(std::string("chat template: rendering failed: ") + e.what(),
                    "the template or its input needs more than this process can give; check the messages, or pass "
                    "another template with --template");
}

Result<ChatTemplate> ChatTemplate::parse(const std::string& source, const TemplateLimits& limits) {
  ChatTemplate t;
  t.limits = limits;
  try {
    t.program_ = jinja::parse_template(source, limits);
  } catch (const jinja::TemplateError& e) {
    return to_error(e);
  } catch (const std::exception& e) {
    return to_error(e);
  }
  t.strftime_now = strftime_local_now;
  return t;
}

Result<std::string> ChatTemplate::render(const ChatInputs& in) const {
  using jinja::Value;
  if (!in.messages.is_array()) return make_error("chat template: messages must be a JSON array");
  try {
    Value globals = Value::make_dict();
    const int depth = limits.max_nesting;
    for (const auto& [k, v] : in.extra.items()) globals.dict->set(k, Value::from_json(v, depth));
    globals.dict->set("messages", Value::from_json(in.messages, depth));
    globals.dict->set("add_generation_prompt", Value::boolean(in.add_generation_prompt));
    globals.dict->set("bos_token", Value::string(in.bos_token));
    globals.dict->set("eos_token", Value::string(in.eos_token));
    if (!in.tools.is_null()) globals.dict->set("tools", Value::from_json(in.tools, depth));
    jinja::Interpreter interp(limits, strftime_now ? strftime_now : strftime_local_now);
    return interp.render(*program_, globals);
  } catch (const jinja::TemplateError& e) {
    return to_error(e);
  } catch (const std::exception& e) {
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
