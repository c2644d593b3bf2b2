// `ggflow run --engine raw -m FILE --tokens 1,2,3 -n N [--dump-logits FILE] [--no-flash-attn]`:
// greedy generation from token ids with the raw runner (the translated GGML-layout graph on the
// IR reference evaluator). Prints the generated ids, comma-separated, on one line.
// --dump-logits writes the logits each generated token was chosen from as raw little-endian f32,
// [n, n_vocab]. Text prompts (-p) need the tokenizer and are not handled here yet.
#include <chrono>
#include <cstdio>
#include <sstream>

#include "builder/raw_runner.h"
#include "cli/commands.h"

namespace ggflow::cli {
namespace {

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return make_error("--tokens: '" + item + "' is not a token id", "write ids as 1,2,3");
    }
  }
  if (ids.empty()) return make_error("--tokens is empty", "write ids as 1,2,3");
  return ids;
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("run", "Generate greedily from token ids");
  struct Opts {
    std::string engine = "raw", model, tokens, prompt, dump;
    int n = 16;
    bool no_fa = false, timing = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--engine", o->engine, "execution engine (raw: the reference evaluator)");
  cmd->add_option("-m,--model", o->model, "the .gguf model")->required();
  cmd->add_option("--tokens", o->tokens, "prompt token ids, comma-separated");
  cmd->add_option("-p,--prompt", o->prompt, "prompt text (not supported yet)");
  cmd->add_option("-n", o->n, "tokens to generate");
  cmd->add_option("--dump-logits", o->dump, "write the logits of each generated token (raw f32) here");
  cmd->add_flag("--no-flash-attn", o->no_fa, "build attention from MUL_MAT + SOFT_MAX instead of FLASH_ATTN_EXT");
  cmd->add_flag("--timing", o->timing, "print the time taken on stderr");
  cmd->callback([o, &rc] {
    if (o->engine != "raw") { rc = fail("run", make_error("engine '" + o->engine + "' is not available", "use --engine raw")); return; }
    if (!o->prompt.empty() || o->tokens.empty()) {
      rc = fail("run", make_error(o->prompt.empty() ? "no prompt" : "text prompts (-p) are not supported by `run` yet",
                                  "pass token ids with --tokens 1,2,3 (e.g. from `ggflow tokenize`)"));
      return;
    }
    auto ids = parse_ids(o->tokens);
    if (!ids) { rc = fail("run", ids.error()); return; }
    auto t0 = std::chrono::steady_clock::now();
    auto r = builder::RawRunner::open(o->model, builder::BuildOptions{.flash_attn = !o->no_fa});
    if (!r) { rc = fail("run", r.error()); return; }
    for (int32_t id : *ids)
      if (id >= (*r)->hparams().n_vocab) {
        rc = fail("run", make_error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                                        std::to_string((*r)->hparams().n_vocab) + " tokens)"));
        return;
      }
    std::vector<float> logits;
    auto out = (*r)->generate_greedy(*ids, o->n, o->dump.empty() ? nullptr : &logits);
    if (!out) { rc = fail("run", out.error()); return; }
    std::string line;
    for (size_t i = 0; i < out->size(); ++i) line += (i ? "," : "") + std::to_string((*out)[i]);
    std::printf("%s\n", line.c_str());
    if (!o->dump.empty()) {
      FILE* f = std::fopen(o->dump.c_str(), "wb");
      if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size()) {
        if (f) std::fclose(f);
        rc = fail("run", make_error("cannot write '" + o->dump + "'"));
        return;
      }
      std::fclose(f);
    }
    if (o->timing)
      std::fprintf(stderr, "ggflow run: %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  });
}

}  // namespace

GGFLOW_COMMAND(run, add);

}  // namespace ggflow::cli
