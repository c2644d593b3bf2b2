// Pre-tokenizer: splits text into the "words" that BPE merges never cross.
//
// Model: a pre-tokenizer is an ordered list of Unicode regexes (PCRE2, UTF + UCP, JIT). The text
// starts as one piece; each regex in turn splits every current piece into the regex's matches
// and the runs between them (both kept, in order: Hugging Face's `Split(behavior=Isolated)`).
// The list is chosen by the GGUF key `tokenizer.ggml.pre` (gpt-2, llama-bpe, qwen2, qwen35,
// deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact, command-r, smollm, ...).
// Pieces are views into the input, which must be valid UTF-8 (the Tokenizer checks that first).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ggflow::text {

struct PretokSpec {
  std::string name;                   // the `tokenizer.ggml.pre` value it was chosen for
  std::vector<std::string> patterns;  // applied in order
  bool ignore_merges = false;         // a word that is itself a token is emitted whole
};

// The regex list for a `tokenizer.ggml.pre` value ("" and "default" give llama.cpp's default
// list). Errors: an unknown name (the hint lists the known ones).
Result<PretokSpec> pretok_spec_for(std::string_view pre);
// Every name pretok_spec_for accepts.
std::vector<std::string> pretok_known_names();

class Pretokenizer {
 public:
  // Compile the patterns. Errors: a pattern PCRE2 rejects (names the pattern and the offset).
  static Result<Pretokenizer> create(const PretokSpec& spec);

  // Append the pieces of `text` (valid UTF-8) to `out`. Errors: the regex engine gave up
  // (resource limits); the message says so and on which piece.
  Status split(std::string_view text, std::vector<std::string_view>& out) const;

  const PretokSpec& spec() const { return spec_; }

 private:
  struct Compiled;
  PretokSpec spec_;
  std::vector<std::shared_ptr<const Compiled>> regexes_;
};

}  // namespace ggflow::text
