// `ggflow template (-m FILE | --template FILE.jinja) --messages FILE.json [--add-generation-prompt]
// [--bos S] [--eos S]`: render a chat template and print the prompt exactly (no newline added,
// nothing else on stdout). The messages file is a JSON array of messages, or an object with
// "messages" and optionally "tools" and other template variables. With -m, the template is the
// file's `tokenizer.chat_template` and BOS/EOS default to the file's own tokens.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "text/template.h"
#include "gguf/file.h"

namespace ggflow::cli {
namespace cmd_template {

struct TemplateArgs {
  std::string model, template_file, messages_file;
  std::string bos, eos;
  bool bos_given = false, eos_given = false;
  bool add_generation_prompt = false;
};

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(std::string("cannot read ") + what + " '" + path + "'", "check the path");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The token text of `key` (a token id) in the file's vocabulary, or "".
std::string special_token(const gguf::File& file, const char* key) {
  auto id = file.get<uint32_t>(key);
  auto tokens = file.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  if (!id || !tokens || *id >= tokens->size()) return {};
  return (*tokens)[*id];
}

int run_template(const TemplateArgs& a) {
  const char* cmd = "template";
  text::ChatInputs in;
  std::string source;
  if (!a.model.empty()) {
    auto file = gguf::File::open(a.model);
    if (!file) return fail(cmd, file.error());
    auto tpl = file->get<std::string>("tokenizer.chat_template");
    if (!tpl)
      return fail(cmd, make_error("'" + a.model + "' has no tokenizer.chat_template",
                                  "pass a template file with --template FILE.jinja"));
    source = *tpl;
    in.bos_token = special_token(*file, "tokenizer.ggml.bos_token_id");
    in.eos_token = special_token(*file, "tokenizer.ggml.eos_token_id");
  } else {
    auto text = read_file(a.template_file, "template");
    if (!text) return fail(cmd, text.error());
    source = *text;
  }
  if (a.bos_given) in.bos_token = a.bos;
  if (a.eos_given) in.eos_token = a.eos;

  auto text = read_file(a.messages_file, "messages file");
  if (!text) return fail(cmd, text.error());
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (doc.is_discarded())
    return fail(cmd, make_error("messages file '" + a.messages_file + "' is not valid JSON",
                                "give a JSON array of {\"role\", \"content\"} objects"));
  if (doc.is_array()) {
    in.messages = doc;
  } else if (doc.is_object() && doc.contains("messages")) {
    for (const auto& [k, v] : doc.items()) {
      if (k == "messages") in.messages = v;
      else if (k == "tools") in.tools = v;
      else in.extra[k] = v;
    }
  } else {
    return fail(cmd, make_error("messages file '" + a.messages_file + "' must hold an array or an object with \"messages\"",
                                "e.g. [{\"role\": \"user\", \"content\": \"Hello\"}]"));
  }
  in.add_generation_prompt = a.add_generation_prompt;

  auto tpl = text::ChatTemplate::parse(source);
  if (!tpl) return fail(cmd, tpl.error());
  auto out = tpl->render(in);
  if (!out) return fail(cmd, out.error());
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

void add_template(CLI::App& app, int& rc) {
  auto args = std::make_shared<TemplateArgs>();
  CLI::App* cmd = app.add_subcommand("template", "render a chat template with a list of messages");
  auto* m = cmd->add_option("-m,--model", args->model, "GGUF file whose tokenizer.chat_template to use");
  auto* t = cmd->add_option("--template", args->template_file, "Jinja chat template file");
  m->excludes(t);
  cmd->add_option("--messages", args->messages_file, "JSON file: array of messages, or {messages, tools, ...}")
      ->required();
  cmd->add_flag("--add-generation-prompt", args->add_generation_prompt, "end with the assistant turn's header");
  auto* bos = cmd->add_option("--bos", args->bos, "bos_token (default: the model's BOS token text, or empty)");
  auto* eos = cmd->add_option("--eos", args->eos, "eos_token (default: the model's EOS token text, or empty)");
  cmd->callback([args, m, t, bos, eos, &rc]() {
    if (m->count() + t->count() != 1) {
      rc = fail("template", make_error("give exactly one of -m FILE or --template FILE.jinja"));
      return;
    }
    args->bos_given = bos->count() > 0;
    args->eos_given = eos->count() > 0;
    rc = run_template(*args);
  });
}

}  // namespace cmd_template
}  // namespace ggflow::cli

GGFLOW_COMMAND(template, ggflow::cli::cmd_template::add_template);
