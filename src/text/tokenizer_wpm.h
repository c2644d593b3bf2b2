// WordPiece tokenization ("bert" vocabularies, e.g. BGE), as BERT's tokenizer does it.
//
// Model: normalize each character (drop NUL, U+FFFD and control characters; NFD, drop
// nonspacing marks, lowercase: unicode_tables.h), split words at whitespace, and make every
// punctuation character and CJK ideograph a word of its own. Each word is then cut greedily
// into the longest vocabulary pieces from the left: the first piece is looked up as U+2581 +
// text (the GGUF form of a word-initial piece), later ones as plain text (the GGUF form of
// BERT's "##" pieces). A word that cannot be cut, or is longer than 100 characters, becomes the
// unknown token.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/tokenizer_lookup.h"

namespace ggflow::text {

class WpmSplitter {
 public:
  explicit WpmSplitter(int32_t unk) : unk_(unk) {}
  void encode(std::string_view text, const TokenLookup& ids, std::vector<int32_t>& out) const;

 private:
  void encode_word(const std::vector<uint32_t>& word, const TokenLookup& ids,
                   std::vector<int32_t>& out) const;
  int32_t unk_;
};

}  // namespace ggflow::text
