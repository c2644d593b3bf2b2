#include "text/tokenizer_special.h"

#include <algorithm>

#include "text/tokenizer_vocab.h"

namespace ggflow::text {

SpecialMatcher::SpecialMatcher(const std::vector<std::string>& tokens,
                               const std::vector<int32_t>& types)
    : tokens_(&tokens), user_defined_(tokens.size(), 0) {
  node_token_.push_back(-1);  // root
  for (size_t id = 0; id < types.size() && id < tokens.size(); ++id) {
    const auto t = static_cast<TokenType>(types[id]);
    if (t != TokenType::Control && t != TokenType::UserDefined && t != TokenType::Unknown) continue;
    const std::string& text = tokens[id];
    if (text.empty()) continue;
    user_defined_[id] = t == TokenType::UserDefined;
    first_byte_[static_cast<unsigned char>(text[0])] = true;
    int32_t node = 0;
    for (unsigned char c : text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        const int32_t child = static_cast<int32_t>(node_token_.size());
        node_token_.push_back(-1);
        edges_.emplace(key, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    node_token_[node] = static_cast<int32_t>(id);  // a repeated text: the later id wins
  }
}

void SpecialMatcher::partition(std::string_view text, bool parse_special,
                               std::vector<Fragment>& out) const {
  const size_t base = out.size();
  if (text.empty()) return;
  // 1. Which candidates occur anywhere in the text (trie walk from every position).
  std::vector<int32_t> present;
  if (node_token_.size() > 1) {
    std::vector<uint8_t> seen;
    for (size_t i = 0; i < text.size(); ++i) {
      if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
      int32_t node = 0;
      for (size_t j = i; j < text.size(); ++j) {
        auto it = edges_.find((static_cast<uint64_t>(node) << 8) |
                              static_cast<unsigned char>(text[j]));
        if (it == edges_.end()) break;
        node = it->second;
        const int32_t id = node_token_[node];
        if (id < 0 || (!parse_special && !user_defined_[id])) continue;
        if (seen.empty()) seen.assign(tokens_->size(), 0);
        if (!seen[id]) {
          seen[id] = 1;
          present.push_back(id);
        }
      }
    }
  }
  out.push_back({-1, 0, static_cast<uint32_t>(text.size())});
  if (present.empty()) return;
  // 2. Longest first (then lowest id, for a deterministic order), split the raw fragments.
  const auto& toks = *tokens_;
  std::sort(present.begin(), present.end(), [&](int32_t a, int32_t b) {
    return toks[a].size() != toks[b].size() ? toks[a].size() > toks[b].size() : a < b;
  });
  std::vector<Fragment> next;
  for (int32_t id : present) {
    const std::string& tok = toks[id];
    next.clear();
    for (size_t k = base; k < out.size(); ++k) {
      const Fragment f = out[k];
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.start, f.len);
      size_t pos = 0;
      for (size_t hit = raw.find(tok); hit != std::string_view::npos; hit = raw.find(tok, pos)) {
        if (hit > pos) next.push_back({-1, f.start + static_cast<uint32_t>(pos),
                                       static_cast<uint32_t>(hit - pos)});
        next.push_back({id, f.start + static_cast<uint32_t>(hit), static_cast<uint32_t>(tok.size())});
        pos = hit + tok.size();
      }
      if (pos < raw.size())
        next.push_back({-1, f.start + static_cast<uint32_t>(pos), static_cast<uint32_t>(raw.size() - pos)});
    }
    out.resize(base);
    out.insert(out.end(), next.begin(), next.end());
  }
}

}  // namespace ggflow::text
