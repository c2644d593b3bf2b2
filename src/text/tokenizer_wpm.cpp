#include "text/tokenizer_wpm.h"

#include <string>

#include "text/unicode.h"
#include "text/unicode_tables.h"

namespace ggflow::text {

namespace {

uint32_t decode_cp(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
  if (n == 1) return b(0);
  if (n == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (n == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

constexpr size_t kMaxWordChars = 100;

}  // namespace

void WpmSplitter::encode(std::string_view text, const TokenLookup& ids,
                         std::vector<int32_t>& out) const {
  std::vector<uint32_t> word;
  auto flush = [&] {
    if (!word.empty()) encode_word(word, ids, out);
    word.clear();
  };
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_valid_len(text, i);
    if (n == 0) n = 1;  // the Tokenizer sanitized the text; stay safe anyway
    const uint32_t cp = decode_cp(text, i, n);
    i += n;
    const uint8_t cls = unicode_class(cp);
    if (cp == 0 || cp == 0xFFFD || (cls & kUniControl)) continue;
    if (cls & kUniWhitespace) {
      flush();
      continue;
    }
    if (cls & kUniCjk) {
      flush();
      word.push_back(cp);
      flush();
      continue;
    }
    const uint32_t* seq = &cp;
    size_t len = 1;
    bert_normalize(cp, &seq, &len);
    for (size_t k = 0; k < len; ++k) {
      if (unicode_class(seq[k]) & kUniPunctuation) {
        flush();
        word.push_back(seq[k]);
        flush();
      } else {
        word.push_back(seq[k]);
      }
    }
  }
  flush();
}

void WpmSplitter::encode_word(const std::vector<uint32_t>& word, const TokenLookup& ids,
                              std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordChars) {
    if (unk_ >= 0) out.push_back(unk_);
    return;
  }
  const size_t mark = out.size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    int32_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      piece.clear();
      if (start == 0) piece = "\xE2\x96\x81";
      for (size_t k = start; k < end; ++k) utf8_append(piece, word[k]);
      found = ids.find(piece);
      if (found >= 0) break;
    }
    if (found < 0) {  // the word cannot be cut into pieces: one unknown token for all of it
      out.resize(mark);
      if (unk_ >= 0) out.push_back(unk_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

}  // namespace ggflow::text
