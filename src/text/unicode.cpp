#include "text/unicode.h"

#include <unordered_map>

namespace ggflow::text {

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  const size_t left = s.size() - i;
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

size_t utf8_first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    const size_t n = utf8_valid_len(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

std::string utf8_sanitize(std::string_view s) {
  size_t bad = utf8_first_invalid(s);
  if (bad == s.size()) return std::string(s);
  std::string out(s.substr(0, bad));
  out.reserve(s.size() + 16);
  size_t i = bad;
  while (i < s.size()) {
    const size_t n = utf8_valid_len(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t need = utf8_len(c);
    if (need > k && c >= 0xC2 && c <= 0xF4) {
      // Hold back only a prefix that can still become a valid character.
      if (k > 1) {
        const unsigned char c1 = static_cast<unsigned char>(s[s.size() - k + 1]);
        if (c == 0xE0 && c1 < 0xA0) return 0;
        if (c == 0xED && c1 >= 0xA0) return 0;
        if (c == 0xF0 && c1 < 0x90) return 0;
        if (c == 0xF4 && c1 >= 0x90) return 0;
      }
      return k;
    }
    return 0;
  }
  return 0;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's table: printable Latin-1 bytes map to themselves; the 68 others (controls, space,
// DEL, NBSP, soft hyphen) map, in byte order, to U+0100, U+0101, ...
static std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cp[b] = printable ? b : next++;
  }
  return cp;
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    const auto cp = byte_code_points();
    for (size_t b = 0; b < 256; ++b) utf8_append(t[b], cp[b]);
    return t;
  }();
  return table;
}

std::string byte_level_decode(std::string_view text) {
  static const std::unordered_map<uint32_t, uint8_t> back = [] {
    std::unordered_map<uint32_t, uint8_t> m;
    const auto cp = byte_code_points();
    for (uint32_t b = 0; b < 256; ++b) m[cp[b]] = static_cast<uint8_t>(b);
    return m;
  }();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t n = utf8_valid_len(text, i);
    if (n == 0) {  // not UTF-8: copy the byte through
      out += text[i++];
      continue;
    }
    uint32_t cp = static_cast<unsigned char>(text[i]);
    if (n == 2) cp = ((cp & 0x1F) << 6) | (text[i + 1] & 0x3F);
    if (n == 3) cp = ((cp & 0x0F) << 12) | ((text[i + 1] & 0x3F) << 6) | (text[i + 2] & 0x3F);
    if (n == 4)
      cp = ((cp & 0x07) << 18) | ((text[i + 1] & 0x3F) << 12) | ((text[i + 2] & 0x3F) << 6) |
           (text[i + 3] & 0x3F);
    auto it = back.find(cp);
    if (it != back.end()) {
      out += static_cast<char>(it->second);
    } else {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace ggflow::text
