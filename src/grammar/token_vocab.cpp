#include "grammar/token_vocab.h"

#include <algorithm>

#include "grammar/codepoints.h"
#include "text/tokenizer.h"

namespace ggflow::grammar {

Result<std::shared_ptr<const TokenVocab>> TokenVocab::from_pieces(std::vector<std::string> pieces, std::span<const int32_t> special,
                                                                  std::span<const int32_t> eog, const Options& options) {
  if (pieces.empty()) return make_error("token vocabulary: no tokens", "pass one piece (byte string) per token id");
  if (pieces.size() > (size_t{1} << 30)) return make_error("token vocabulary: " + std::to_string(pieces.size()) + " tokens is too many", "at most 2^30");
  std::shared_ptr<TokenVocab> v(new TokenVocab());
  v->options_ = options;
  v->flags_.assign(pieces.size(), 0);
  auto check = [&](int32_t id, const char* what) -> Status {
    if (id < 0 || static_cast<size_t>(id) >= pieces.size())
      return make_error(std::string("token vocabulary: ") + what + " id " + std::to_string(id) + " is outside the vocabulary",
                        "ids are 0.." + std::to_string(pieces.size() - 1));
    return {};
  };
  for (int32_t id : special) {
    if (auto s = check(id, "special"); !s) return s.error();
    v->flags_[id] |= kSpecial;
  }
  for (int32_t id : eog) {
    if (auto s = check(id, "end-of-generation"); !s) return s.error();
    if (!(v->flags_[id] & kEog)) v->eog_ids_.push_back(id);
    v->flags_[id] |= kSpecial | kEog;
  }
  std::sort(v->eog_ids_.begin(), v->eog_ids_.end());

  // The trie, from the ordinary tokens sorted by bytes: consecutive tokens share their common
  // prefix, so a node opens per byte past it and closes when a later token diverges above it.
  std::vector<int32_t> order;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (!(v->flags_[i] & kSpecial) && !pieces[i].empty()) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b] || (pieces[a] == pieces[b] && a < b); });
  std::vector<uint32_t> path;  // open nodes, one per byte of the previous token
  auto close = [&] {
    v->trie_[path.back()].subtree_end = static_cast<uint32_t>(v->trie_.size());
    path.pop_back();
  };
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = pieces[id];
    if (s.size() > UINT16_MAX)
      return make_error("token vocabulary: token " + std::to_string(id) + " has " + std::to_string(s.size()) + " bytes",
                        "tokens longer than 65535 bytes are not supported");
    size_t common = 0;
    if (prev)
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    while (path.size() > common) close();
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(v->trie_.size()));
      v->trie_.push_back({0, static_cast<uint32_t>(v->trie_tokens_.size()), static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d]), 0, 0});
    }
    v->trie_tokens_.push_back(id);  // at the deepest open node: tokens follow the nodes' order
    v->max_token_bytes_ = std::max(v->max_token_bytes_, s.size());
    prev = &s;
  }
  while (!path.empty()) close();
  v->trie_.push_back({static_cast<uint32_t>(v->trie_.size() + 1), static_cast<uint32_t>(v->trie_tokens_.size()), 0, 0, 0, 0});  // sentinel
  // Per node, in order: the UTF-8 decoding of the path so far (kBoundary); then, children before
  // parents, what lies below (bytes, validity, ASCII only, height).
  const size_t n = v->trie_.size() - 1;
  struct Utf8 {
    uint8_t bytes[4];
    uint8_t have, total;  // have == total == 0: at a boundary
    bool valid;
  };
  std::vector<Utf8> at(v->max_token_bytes_ + 1);
  at[0] = {{0, 0, 0, 0}, 0, 0, true};
  std::vector<uint8_t> valid_here(n);
  std::vector<uint32_t> parent_at(v->max_token_bytes_ + 1, 0);
  std::vector<uint32_t> parent(n);
  for (uint32_t i = 0; i < n; ++i) {
    TrieNode& t = v->trie_[i];
    const uint16_t d = t.depth;
    parent_at[d] = i;
    parent[i] = d > 1 ? parent_at[d - 1] : UINT32_MAX;
    Utf8 u = at[d - 1];
    if (u.valid) {
      if (u.have == 0) {
        u.total = static_cast<uint8_t>(t.byte < 0x80 ? 1 : utf8_length(t.byte));
        u.valid = u.total != 0;
      }
      if (u.valid) {
        u.bytes[u.have++] = t.byte;
        uint32_t lo, hi, cp;
        u.valid = u.have == u.total ? utf8_decode(u.bytes, u.have, &cp) : utf8_prefix_range(u.bytes, u.have, u.total, &lo, &hi);
        if (u.have == u.total) u.have = u.total = 0;
      }
    }
    at[d] = u;
    valid_here[i] = u.valid;
    t.flags = static_cast<uint8_t>((u.valid && u.have == 0 ? kBoundary : 0) | kValidBelow | kAsciiBelow);
  }
  v->below_bytes_.assign(n, {0, 0});
  for (uint32_t i = static_cast<uint32_t>(n); i-- > 0;) {
    const TrieNode& t = v->trie_[i];
    if (parent[i] == UINT32_MAX) continue;
    TrieNode& p = v->trie_[parent[i]];
    auto& pb = v->below_bytes_[parent[i]];
    pb[0] |= v->below_bytes_[i][0];
    pb[1] |= v->below_bytes_[i][1];
    if (t.byte < 0x80) pb[t.byte >> 6] |= uint64_t{1} << (t.byte & 63);
    if (!valid_here[i] || !(t.flags & kValidBelow)) p.flags &= ~kValidBelow;
    if (t.byte >= 0x80 || !(t.flags & kAsciiBelow)) p.flags &= ~kAsciiBelow;
    p.height = static_cast<uint8_t>(std::max<int>(p.height, std::min<int>(t.height + 1, 255)));
  }
  v->pieces_ = std::move(pieces);
  return std::shared_ptr<const TokenVocab>(std::move(v));
}

Result<std::shared_ptr<const TokenVocab>> TokenVocab::from_tokenizer(const text::Tokenizer& tok, const Options& options) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> pieces(n);
  std::vector<int32_t> special, eog;
  for (int32_t id = 0; id < n; ++id) {
    const auto type = tok.token_type(id);
    if (tok.is_eog(id)) eog.push_back(id);
    else if (tok.is_control(id) || type == text::TokenType::Unknown || type == text::TokenType::Unused) special.push_back(id);
    auto p = tok.piece(id);
    if (!p) return p.error();
    pieces[id] = std::move(*p);
  }
  return from_pieces(std::move(pieces), special, eog, options);
}

std::shared_ptr<const TokenVocab::CachedMask> TokenVocab::cache_find(const std::string& key) const {
  if (options_.mask_cache_bytes == 0) return nullptr;
  std::lock_guard lock(cache_.mu);
  auto it = cache_.index.find(key);
  if (it == cache_.index.end()) {
    ++cache_.misses;
    return nullptr;
  }
  ++cache_.hits;
  cache_.lru.splice(cache_.lru.begin(), cache_.lru, it->second);
  return it->second->second;
}

void TokenVocab::cache_put(const std::string& key, std::shared_ptr<const CachedMask> mask) const {
  const size_t cost = key.size() + mask->bits.size() * 4 + 128;
  if (options_.mask_cache_bytes == 0 || cost > options_.mask_cache_bytes) return;
  std::lock_guard lock(cache_.mu);
  if (cache_.index.count(key)) return;  // another request computed it meanwhile
  cache_.lru.emplace_front(key, std::move(mask));
  cache_.index.emplace(cache_.lru.front().first, cache_.lru.begin());
  cache_.bytes += cost;
  while (cache_.bytes > options_.mask_cache_bytes) {
    auto& last = cache_.lru.back();
    cache_.bytes -= last.first.size() + last.second->bits.size() * 4 + 128;
    cache_.index.erase(last.first);
    cache_.lru.pop_back();
  }
}

TokenVocab::CacheStats TokenVocab::cache_stats() const {
  std::lock_guard lock(cache_.mu);
  return {cache_.hits, cache_.misses, cache_.lru.size(), cache_.bytes};
}

void TokenVocab::cache_clear() const {
  std::lock_guard lock(cache_.mu);
  cache_.index.clear();
  cache_.lru.clear();
  cache_.bytes = 0;
}

}  // namespace ggflow::grammar
