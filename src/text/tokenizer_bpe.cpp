#include "text/tokenizer_bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "text/unicode.h"

namespace ggflow::text {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct Symbol {
  int32_t prev, next;
  uint32_t start, len;  // bytes of the word
  int32_t id;           // token id, or -1 when the text is not a token
};

struct Pair {
  int32_t rank;
  int32_t left, right;
  uint32_t size;  // left.len + right.len when pushed; a mismatch later means the pair is stale
  int32_t merged;
};

struct PairOrder {  // min-heap on rank, then on left position
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

Result<BpeMerger> BpeMerger::create(const std::vector<std::string>& merges,
                                    const TokenLookup& ids, bool byte_level) {
  BpeMerger m;
  m.byte_level_ = byte_level;
  for (int b = 0; b < 256; ++b) {
    if (byte_level) {
      m.byte_token_[b] = ids.find(byte_to_unicode()[b]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      m.byte_token_[b] = ids.find(buf);
    }
  }
  m.merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    // The separator is the first space after the first character (a token never starts with
    // the separator, but may in principle contain a literal space later on).
    size_t sep = line.find(' ', 1);
    if (sep == std::string::npos) {
      return make_error("tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + line +
                            "' is not of the form 'left right'",
                        "the file's merges are damaged; re-convert the model");
    }
    std::string_view left(line.data(), sep), right(line.data() + sep + 1, line.size() - sep - 1);
    const int32_t l = ids.find(left), r = ids.find(right);
    joined.assign(left);
    joined += right;
    const int32_t merged = ids.find(joined);
    if (l < 0 || r < 0 || merged < 0) continue;
    m.merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), merged});
  }
  return m;
}

void BpeMerger::encode_word(std::string_view word, const TokenLookup& ids, bool ignore_merges,
                            std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    int32_t whole = -1;
    if (byte_level_) {
      std::string enc;
      enc.reserve(word.size() * 2);
      for (unsigned char c : word) enc += byte_to_unicode()[c];
      whole = ids.find(enc);
    } else {
      whole = ids.find(word);
    }
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  std::vector<Symbol> sym;
  sym.reserve(byte_level_ ? word.size() : word.size() / 2 + 1);
  for (uint32_t i = 0; i < word.size();) {
    const uint32_t n =
        byte_level_ ? 1
                    : static_cast<uint32_t>(std::min<size_t>(
                          word.size() - i, utf8_len(static_cast<unsigned char>(word[i]))));
    const int32_t id = byte_level_ ? byte_token_[static_cast<unsigned char>(word[i])]
                                   : ids.find(word.substr(i, n));
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({idx - 1, idx + 1, i, n, id});
    i += n;
  }
  sym.back().next = -1;

  std::vector<Pair> heap_storage;
  heap_storage.reserve(sym.size());
  std::priority_queue<Pair, std::vector<Pair>, PairOrder> heap(PairOrder{},
                                                               std::move(heap_storage));
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, l, r, sym[l].len + sym[r].len, it->second.merged});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_pair(i, i + 1);

  while (!heap.empty()) {
    const Pair p = heap.top();
    heap.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.size) continue;
    l.len += r.len;
    l.id = p.merged;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {  // no token for this text: one token per byte
      const int32_t b = byte_token_[static_cast<unsigned char>(word[s.start + k])];
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace ggflow::text
