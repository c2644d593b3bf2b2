// What the fuzz targets share: where the repository is (vocabularies, the SmolLM2 model), the
// vocabularies fuzz_tokenizer loads, and the property check that makes libFuzzer report a
// violated invariant as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "pipeline/prompt.h"

namespace ggflow::fuzz {

// The repository root: $GGFLOW_ROOT when set, else where fuzz/fuzz.mk built the target.
inline std::string root() {
  const char* r = std::getenv("GGFLOW_ROOT");
  return r && *r ? r : GGFLOW_ROOT;
}

// The vocabularies of fuzz_tokenizer, one per tokenizer algorithm and pre-tokenizer family
// (relative to the root). The first input byte picks one (write_seeds uses the same order).
inline const std::vector<std::string>& tokenizer_vocabs() {
  static const std::vector<std::string> v = {
      "../shared/data/tokenizer/ggml-vocab-gpt-2.gguf",      // byte-level BPE, GPT-2 pre-tokenizer
      "../shared/data/tokenizer/ggml-vocab-llama-spm.gguf",  // SentencePiece, byte fallback
      "../shared/data/tokenizer/ggml-vocab-bert-bge.gguf",   // WordPiece
      "../shared/data/tokenizer/ggml-vocab-llama-bpe.gguf",  // byte-level BPE, llama-3 pre-tokenizer
      "../shared/data/tokenizer/ggml-vocab-gemma-4.gguf",    // raw-character BPE (U+2581, <0xNN>)
  };
  return v;
}

// The model whose tokenizer and chat template fuzz_chat and fuzz_request use.
inline std::string smollm2_path() { return root() + "/models/smollm2-135m-instruct-q4_1.gguf"; }

// A failed precondition of the harness itself (missing data file): say so and stop the run.
[[noreturn]] inline void setup_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz setup failed: %s\n", what.c_str());
  std::exit(2);
}

// The tokenizer and chat template of `path` (a .gguf file), loaded once by the caller.
inline std::shared_ptr<const pipeline::PromptFormat> load_format(const std::string& path) {
  auto f = gguf::File::open(path);
  if (!f) setup_failed(path + ": " + f.error().str() + " (run scripts/setup.sh to install the models)");
  auto p = pipeline::PromptFormat::from_file(*f);
  if (!p) setup_failed(path + ": " + p.error().str());
  return *p;
}

}  // namespace ggflow::fuzz

// A property that must hold: when it does not, print what broke and trap, so libFuzzer stops
// with the input saved in its artifact directory.
#define FUZZ_CHECK(cond, ...)                                         \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "fuzz property violated: %s\n  ", #cond);  \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      __builtin_trap();                                               \
    }                                                                 \
  } while (0)
