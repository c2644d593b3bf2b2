#include "grammar/codepoints.h"

#include <algorithm>
#include <cstdio>

namespace ggflow::grammar {

CodepointSet CodepointSet::of(std::vector<CodepointRange> ranges, bool negated) {
  for (auto& r : ranges) {
    r.hi = std::min(r.hi, kMaxCodepoint);
  }
  std::erase_if(ranges, [](const CodepointRange& r) { return r.lo > r.hi; });
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;  // sorted, disjoint, non-adjacent
  for (const auto& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  CodepointSet s;
  if (negated) {
    uint32_t next = 0;  // first code point not yet covered
    for (const auto& r : merged) {
      if (r.lo > next) s.ranges_.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodepoint) s.ranges_.push_back({next, kMaxCodepoint});
  } else {
    s.ranges_ = std::move(merged);
  }
  for (const auto& r : s.ranges_)
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 127); ++c) s.ascii_[c >> 6] |= uint64_t{1} << (c & 63);
  return s;
}

bool CodepointSet::contains_slow(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp, [](uint32_t c, const CodepointRange& r) { return c < r.lo; });
  return it != ranges_.begin() && cp <= std::prev(it)->hi;
}

bool CodepointSet::intersects(uint32_t lo, uint32_t hi) const {
  // The first range that ends at or after lo must start at or before hi.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo, [](const CodepointRange& r, uint32_t c) { return r.hi < c; });
  return it != ranges_.end() && it->lo <= hi;
}

bool CodepointSet::contains_range(uint32_t lo, uint32_t hi) const {
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo, [](const CodepointRange& r, uint32_t c) { return r.hi < c; });
  return it != ranges_.end() && it->lo <= lo && hi <= it->hi;
}

bool CodepointSet::has_scalar_value() const {
  for (const auto& r : ranges_)
    if (r.lo < 0xD800 || r.hi > 0xDFFF) return true;
  return false;
}

std::string CodepointSet::to_gbnf() const {
  if (ranges_.size() == 1 && ranges_[0].lo == ranges_[0].hi) return "\"" + gbnf_escape_codepoint(ranges_[0].lo, "\"\\") + "\"";
  if (ranges_.size() == 1 && ranges_[0].lo == 0 && ranges_[0].hi == kMaxCodepoint) return ".";
  auto body = [](const std::vector<CodepointRange>& rs) {
    std::string out;
    for (const auto& r : rs) {
      out += gbnf_escape_codepoint(r.lo, "]\\-^");
      if (r.hi != r.lo) out += (r.hi == r.lo + 1 ? "" : "-") + gbnf_escape_codepoint(r.hi, "]\\-^");
    }
    return out;
  };
  std::vector<CodepointRange> complement;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.lo > next) complement.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
  if (ranges_.empty()) return "[^\\x00-\\U0010FFFF]";
  if (!complement.empty() && complement.size() < ranges_.size()) return "[^" + body(complement) + "]";
  return "[" + body(ranges_) + "]";
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {
// The smallest code point each sequence length may encode (shorter would be overlong).
constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxForLength[5] = {0, 0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};
}  // namespace

bool utf8_prefix_range(const uint8_t* prefix, int n, int total, uint32_t* lo, uint32_t* hi) {
  // Payload bits: the lead byte carries 7 - total bits (total > 1), each continuation 6.
  uint32_t bits = prefix[0] & (0x7F >> total);
  for (int i = 1; i < n; ++i) {
    if ((prefix[i] & 0xC0) != 0x80) return false;
    bits = (bits << 6) | (prefix[i] & 0x3F);
  }
  const int missing = 6 * (total - n);
  uint32_t l = bits << missing, h = (bits << missing) | ((1u << missing) - 1);
  l = std::max(l, kMinForLength[total]);
  h = std::min(h, kMaxForLength[total]);
  if (l > h) return false;
  if (l >= 0xD800 && h <= 0xDFFF) return false;  // only surrogates left
  *lo = l;
  *hi = h;
  return true;
}

bool utf8_decode(const uint8_t* s, int n, uint32_t* cp) {
  if (n < 1 || n > 4 || utf8_length(s[0]) != n) return false;
  if (n == 1) {
    *cp = s[0];
    return true;
  }
  uint32_t c = s[0] & (0x7F >> n);
  for (int i = 1; i < n; ++i) {
    if ((s[i] & 0xC0) != 0x80) return false;
    c = (c << 6) | (s[i] & 0x3F);
  }
  if (c < kMinForLength[n] || c > kMaxCodepoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
  *cp = c;
  return true;
}

bool utf8_next(std::string_view s, size_t* i, uint32_t* cp) {
  if (*i >= s.size()) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + *i;
  const int n = utf8_length(p[0]);
  if (n == 0 || *i + n > s.size() || !utf8_decode(p, n, cp)) return false;
  *i += n;
  return true;
}

std::string gbnf_escape_codepoint(uint32_t cp, std::string_view escape) {
  char buf[16];
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x80 && escape.find(static_cast<char>(cp)) != std::string_view::npos) return std::string("\\") + static_cast<char>(cp);
  if (cp >= 0x20 && cp < 0x7F) return std::string(1, static_cast<char>(cp));
  // Controls, DEL, C1 controls, surrogates, U+FFFE/FFFF and the separators: escaped, so a
  // printed grammar stays readable and a lone surrogate never has to be written as UTF-8.
  const bool plain = cp >= 0xA0 && !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF && cp != 0x2028 && cp != 0x2029;
  if (plain) return utf8_encode(cp);
  if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  size_t i = 0;
  while (i < utf8.size()) {
    uint32_t cp;
    if (!utf8_next(utf8, &i, &cp)) cp = static_cast<uint8_t>(utf8[i++]);
    out += gbnf_escape_codepoint(cp, "\"\\");
  }
  return out + "\"";
}

}  // namespace ggflow::grammar
