// BPE merging for one pre-tokenized word.
//
// Model: the word starts as one symbol per byte (byte-level "gpt2" vocabularies, each byte read
// through the GPT-2 alphabet) or per UTF-8 character ("gemma4"). Repeatedly, the adjacent pair
// with the lowest merge rank (leftmost on ties) is replaced by the merged token, until no pair
// has a merge. Pairs live in a min-heap with lazy invalidation, so a word of n symbols costs
// O(n log n). Merges are keyed by the two token ids, never by strings, and nothing is cached
// across calls.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer_lookup.h"
#include "base/result.h"

namespace ggflow::text {

class BpeMerger {
 public:
  // Parse the merges ("left right", rank = index). Merges naming tokens the vocabulary lacks are
  // skipped (the reference tokenizers cannot apply them either).
  static Result<BpeMerger> create(const std::vector<std::string>& merges, const TokenLookup& ids,
                                  bool byte_level);

  // Append the ids of `word` (raw UTF-8 bytes) to `out`. `ignore_merges`: a word that is itself a
  // token is emitted whole. Symbols without a token fall back to `<0xNN>` tokens (RawBpe) or are
  // dropped (byte-level: every byte has a token in a well-formed vocabulary).
  void encode_word(std::string_view word, const TokenLookup& ids, bool ignore_merges,
                   std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  bool byte_level_ = true;
  int32_t byte_token_[256];  // byte-level: id of each byte's GPT-2 character; RawBpe: <0xNN>
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace ggflow::text
