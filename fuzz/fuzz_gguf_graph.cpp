// libFuzzer target for what reads a parsed GGUF file: when arbitrary bytes parse, do what opening
// a model does with them (runtime::ModelFile: the builder's hyper-parameters and graph, translated
// to the IR and verified; pipeline::PromptFormat: the tokenizer from the `tokenizer.*` keys and the
// chat template parsed) and use the result once (encode, decode and render a short conversation).
// Every step may fail with an Error (most inputs are not models); none may crash, leak or hit
// undefined behaviour, and every Error has a message. fuzz_gguf fuzzes the reader alone, faster.
// Seeds (scripts/fuzz.sh): tiny models of each architecture and tokenizer kind, and the tiny llama
// with each hyper-parameter at an extreme (write_seeds.cpp); the malformed-file corpus
// (tests/gguf/corpus.cpp); fuzz/regressions/fuzz_gguf_graph/.
#include <cstdint>
#include <string>
#include <vector>

#include "builder/build.h"
#include "frontend/translate.h"
#include "fuzz_common.h"
#include "gguf/file.h"
#include "ir/verifier.h"
#include "pipeline/prompt.h"

using namespace ggflow;

namespace {

// What runtime::ModelFile::open does after parsing (without the CPU executor).
size_t build_graph(const gguf::File& f) {
  auto built = builder::build(f);
  if (!built) {
    FUZZ_CHECK(!built.error().what.empty(), "builder error without a message");
    return 1;
  }
  auto raw = frontend::translate(built->graph);
  if (!raw) {
    FUZZ_CHECK(!raw.error().what.empty(), "translate error without a message");
    return 2;
  }
  return ir::verify(*raw).ok() ? 3 : 4;
}

// What pipeline::PromptFormat does with the file's tokenizer and template.
size_t use_prompt_format(const gguf::File& f) {
  auto p = pipeline::PromptFormat::from_file(f);
  if (!p) {
    FUZZ_CHECK(!p.error().what.empty(), "PromptFormat error without a message");
    return 1;
  }
  const auto& tok = (*p)->tokenizer();
  size_t sink = 0;
  auto ids = (*p)->encode("Hello world! <|im_start|> 123 \xC3\xA9\xE2\x96\x81 ");
  if (ids) {
    for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "encode gave id %d of %d", id, tok.n_vocab());
    sink += tok.decode(*ids).ok();
  }
  std::vector<int32_t> all;
  for (int32_t id = 0; id < tok.n_vocab() && id < 512; ++id) all.push_back(id);
  sink += tok.decode(all, {.render_special = true}).ok();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}});
  if (auto text = (*p)->apply_chat_template(messages)) sink += text->size();
  return sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gguf::ParseLimits lim;
  lim.max_array = 1u << 20;  // keep single inputs cheap; the limits themselves are unit-tested
  auto f = gguf::File::parse({data, size}, lim);
  if (!f) {
    FUZZ_CHECK(!f.error().what.empty(), "parse error without a message");
    return 0;
  }
  size_t sink = build_graph(*f);
  sink += use_prompt_format(*f);
  static volatile size_t g_sink;
  g_sink = sink;
  return 0;
}
