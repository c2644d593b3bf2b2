// Token text -> id. Keys are views into the vocabulary's strings, which must outlive the lookup.
// When a text appears twice in a vocabulary the later id wins (as in llama.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ggflow::text {

class TokenLookup {
 public:
  explicit TokenLookup(const std::vector<std::string>& tokens) {
    map_.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) map_[tokens[i]] = static_cast<int32_t>(i);
  }
  int32_t find(std::string_view text) const {
    auto it = map_.find(text);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  std::unordered_map<std::string_view, int32_t> map_;
};

}  // namespace ggflow::text
