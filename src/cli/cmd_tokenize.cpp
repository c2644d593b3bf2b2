// `ggflow tokenize -m FILE [--no-bos] [--no-special] [--pieces] TEXT`: print the token ids of
// TEXT, space-separated on one line, using the tokenizer stored in the GGUF file. BOS/EOS are
// added as the file says (--no-bos drops the BOS); special-token text such as "<|im_start|>"
// becomes its id unless --no-special is given. TEXT "-" reads standard input.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "cli/commands.h"
#include "text/tokenizer.h"
#include "gguf/file.h"

namespace ggflow::cli {
namespace cmd_tokenize {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool no_special = false;
  bool pieces = false;
};

int run_tokenize(const TokenizeArgs& a) {
  auto file = gguf::File::open(a.model);
  if (!file) return fail("tokenize", file.error());
  auto tok = text::Tokenizer::from_file(*file);
  if (!tok) return fail("tokenize", tok.error());
  std::string text = a.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
  text::EncodeOptions opt;
  opt.parse_special = !a.no_special;
  auto ids = tok->encode(text, opt);
  if (!ids) return fail("tokenize", ids.error());
  if (a.no_bos && tok->add_bos() && !ids->empty() && ids->front() == tok->bos())
    ids->erase(ids->begin());
  std::string line;
  for (int32_t id : *ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
    if (a.pieces) {
      auto p = tok->piece(id, true);
      line += ":";
      line += p ? *p : std::string("?");
    }
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

void add_tokenize(CLI::App& app, int& rc) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  cmd->add_option("-m,--model", args->model, "GGUF file whose tokenizer to use")->required();
  cmd->add_flag("--no-bos", args->no_bos, "do not add the BOS token");
  cmd->add_flag("--no-special", args->no_special,
                "treat special-token text (e.g. <|im_start|>) as plain text");
  cmd->add_flag("--pieces", args->pieces, "print id:piece pairs instead of bare ids");
  cmd->add_option("text", args->text, "text to tokenize ('-' reads standard input)")->required();
  cmd->callback([args, &rc] { rc = run_tokenize(*args); });
}

}  // namespace cmd_tokenize
}  // namespace ggflow::cli

GGFLOW_COMMAND(tokenize, ggflow::cli::cmd_tokenize::add_tokenize);
