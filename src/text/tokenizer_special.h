// Special tokens written in the text: found before pre-tokenization, so "<|im_start|>" becomes
// one id instead of the pieces of its characters.
//
// Model (as llama.cpp does it, so ids agree): the candidates are the control, user-defined and
// unknown tokens. Longest candidates go first: each splits every remaining raw fragment at its
// non-overlapping left-to-right occurrences. With parse_special off (untrusted input), control
// and unknown tokens are plain text and only user-defined tokens (which the model's own
// tokenizer also matches in plain text, e.g. Gemma's whitespace runs) are matched.
// To stay linear in the text with thousands of candidates (Gemma has ~6400), a byte trie first
// finds which candidates occur at all; only those run the longest-first passes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ggflow::text {

struct Fragment {
  int32_t token;    // >= 0: a special token; -1: raw text [start, start + len)
  uint32_t start;
  uint32_t len;
};

class SpecialMatcher {
 public:
  SpecialMatcher() = default;
  SpecialMatcher(const std::vector<std::string>& tokens, const std::vector<int32_t>& types);

  // Split `text` into raw fragments and special tokens, in order.
  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;

 private:
  const std::vector<std::string>* tokens_ = nullptr;
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> node_token_;              // token ending at node, or -1
  std::vector<uint8_t> user_defined_;            // token id -> 1 when matched even in plain text
  bool first_byte_[256] = {};
};

}  // namespace ggflow::text
