#include "text/tokenizer_spm.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "text/unicode.h"

namespace ggflow::text {

namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t start, len;
};

struct Bigram {
  float score;
  int32_t left, right;
  uint32_t size;
  int32_t id;
};

struct BigramOrder {  // max-heap on score, then leftmost first
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmMerger::SpmMerger(const std::vector<float>& scores, const TokenLookup& ids, int32_t unk)
    : scores_(&scores), unk_(unk) {
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    byte_token_[b] = ids.find(buf);
  }
}

void SpmMerger::encode(std::string_view text, const TokenLookup& ids,
                       std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (uint32_t i = 0; i < text.size();) {
    const uint32_t n = static_cast<uint32_t>(
        std::min<size_t>(text.size() - i, utf8_len(static_cast<unsigned char>(text[i]))));
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, idx + 1, i, n});
    i += n;
  }
  sym.back().next = -1;

  const std::vector<float>& scores = *scores_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> heap;
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = sym[l].len + sym[r].len;
    const int32_t id = ids.find(text.substr(sym[l].start, size));
    if (id < 0) return;
    const float score = static_cast<size_t>(id) < scores.size() ? scores[id] : 0.0f;
    heap.push({score, l, r, size, id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_pair(i, i + 1);

  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_pair(l.prev, b.left);
    try_pair(b.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    const std::string_view piece = text.substr(s.start, s.len);
    const int32_t id = ids.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : piece) {  // byte fallback
      const int32_t b = byte_token_[c];
      if (b >= 0) {
        out.push_back(b);
      } else if (unk_ >= 0) {
        out.push_back(unk_);
        break;  // one unknown token per missing character
      }
    }
  }
}

}  // namespace ggflow::text
