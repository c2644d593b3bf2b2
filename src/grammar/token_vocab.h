// A model's tokens as the grammar layer needs them, built once per model and shared by every
// request: each token's bytes, which tokens are special, a byte trie of the others, and the mask
// cache shared by all grammars used with this vocabulary.
//
// Special tokens (control tokens, unknown/unused ones) are never allowed by a grammar, except the
// end-of-generation ones (EOS, EOT, ...), which are allowed exactly when the grammar may end.
// Tokens with no bytes are never allowed either (they would not advance the grammar).
//
// The trie lists the other tokens in byte order, depth first, so a mask walks each shared prefix
// once (matcher.cpp). The mask cache is a least-recently-used map from (grammar fingerprint,
// parse state) to the mask, bounded in bytes, safe to use from many threads: requests that reach
// the same state of the same grammar (compiled once or per request: the fingerprint is of the
// compiled rules) share one mask.
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace ggflow::text {
class Tokenizer;
}

namespace ggflow::grammar {

class TokenVocab {
 public:
  struct Options {
    size_t mask_cache_bytes = size_t{64} << 20;  // 0 disables the shared mask cache
  };
  // `pieces[i]` holds the bytes of token i; `special` the ids never allowed; `eog` the ids that
  // end generation (allowed when the grammar is complete; they count as special too).
  static Result<std::shared_ptr<const TokenVocab>> from_pieces(std::vector<std::string> pieces, std::span<const int32_t> special,
                                                               std::span<const int32_t> eog, const Options& options);
  static Result<std::shared_ptr<const TokenVocab>> from_pieces(std::vector<std::string> pieces, std::span<const int32_t> special,
                                                               std::span<const int32_t> eog) {
    return from_pieces(std::move(pieces), special, eog, Options{});
  }
  // From a model's tokenizer: pieces by Tokenizer::piece; control, unknown and unused tokens are
  // special; Tokenizer::is_eog says which end generation.
  static Result<std::shared_ptr<const TokenVocab>> from_tokenizer(const text::Tokenizer& tok, const Options& options);
  static Result<std::shared_ptr<const TokenVocab>> from_tokenizer(const text::Tokenizer& tok) { return from_tokenizer(tok, Options{}); }

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  size_t mask_words() const { return (pieces_.size() + 31) / 32; }  // uint32 words of a mask
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  bool is_special(int32_t id) const { return flags_[id] & kSpecial; }
  bool is_eog(int32_t id) const { return flags_[id] & kEog; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // Trie nodes in depth-first order (a node's subtree is the nodes up to subtree_end), then one
  // sentinel node; tokens are numbered in the same order, so the tokens whose bytes end at node i
  // are trie_tokens()[trie[i].tok_begin, trie[i + 1].tok_begin) and those of its whole subtree
  // end at trie[subtree_end].tok_begin.
  struct TrieNode {
    uint32_t subtree_end;  // index after the last node below this one
    uint32_t tok_begin;
    uint16_t depth;        // 1 for the first byte of a token
    uint8_t byte;
    uint8_t flags;         // kBoundary | kValidBelow | kAsciiBelow
    uint8_t height;        // levels of nodes below (0 for a leaf; 255: 255 or more)
  };
  static constexpr uint8_t kBoundary = 1;    // the bytes up to here are valid UTF-8, whole characters
  static constexpr uint8_t kValidBelow = 2;  // every path below continues as valid UTF-8 (maybe cut short)
  static constexpr uint8_t kAsciiBelow = 4;  // the nodes below hold only bytes < 0x80
  const std::vector<TrieNode>& trie() const { return trie_; }
  size_t trie_size() const { return trie_.size() - 1; }  // without the sentinel
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  // The bytes (< 0x80) of the nodes below node i, as a 128-bit set.
  const uint64_t* below_bytes(size_t i) const { return below_bytes_[i].data(); }
  size_t max_token_bytes() const { return max_token_bytes_; }

  // The shared mask cache (the matcher's; thread-safe).
  struct CachedMask {
    std::vector<uint32_t> bits;
    uint32_t allowed = 0;
  };
  std::shared_ptr<const CachedMask> cache_find(const std::string& key) const;
  void cache_put(const std::string& key, std::shared_ptr<const CachedMask> mask) const;
  struct CacheStats {
    uint64_t hits = 0, misses = 0;
    size_t entries = 0, bytes = 0;
  };
  CacheStats cache_stats() const;
  void cache_clear() const;

 private:
  static constexpr uint8_t kSpecial = 1, kEog = 2;
  TokenVocab() = default;

  std::vector<std::string> pieces_;
  std::vector<uint8_t> flags_;
  std::vector<int32_t> eog_ids_;
  std::vector<TrieNode> trie_;
  std::vector<std::array<uint64_t, 2>> below_bytes_;
  std::vector<int32_t> trie_tokens_;
  size_t max_token_bytes_ = 0;
  Options options_;

  struct Cache {
    std::mutex mu;
    std::list<std::pair<std::string, std::shared_ptr<const CachedMask>>> lru;  // most recent first
    std::unordered_map<std::string_view, decltype(lru)::iterator> index;       // views into lru keys
    size_t bytes = 0;
    uint64_t hits = 0, misses = 0;
  };
  mutable Cache cache_;
};

}  // namespace ggflow::grammar
