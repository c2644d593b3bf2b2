// SentencePiece-style tokenization ("llama" vocabularies: LLaMA/Mistral SPM, Phi-3, Gemma).
//
// Model: the fragment (spaces already written as U+2581, the optional leading space already
// added) starts as one symbol per UTF-8 character. Repeatedly, the adjacent pair whose
// concatenation is a token with the highest score (leftmost on ties) is merged. Symbols are
// always contiguous in the text, so a pair's text is a view of the input: no strings are built.
// A final symbol that is not a token is written as `<0xNN>` byte tokens (byte fallback), or as
// the unknown token when the vocabulary has no byte tokens. O(n log n) in the fragment length.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/tokenizer_lookup.h"

namespace ggflow::text {

class SpmMerger {
 public:
  SpmMerger(const std::vector<float>& scores, const TokenLookup& ids, int32_t unk);
  void encode(std::string_view text, const TokenLookup& ids, std::vector<int32_t>& out) const;

 private:
  const std::vector<float>* scores_;
  int32_t unk_;
  int32_t byte_token_[256];
};

}  // namespace ggflow::text
