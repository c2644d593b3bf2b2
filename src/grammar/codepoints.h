// Sets of Unicode code points (the terminals of a grammar) and the UTF-8 helpers of the grammar
// layer. A grammar matches code points; tokens are bytes, so the matcher decodes UTF-8 itself and
// refuses invalid UTF-8 (overlong forms, surrogates, bytes C0 C1 F5..FF, above U+10FFFF).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ggflow::grammar {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
  bool operator==(const CodepointRange&) const = default;
};

// A set of code points as sorted, disjoint, non-adjacent ranges, with a bitmap for ASCII (the
// common case of every match).
class CodepointSet {
 public:
  CodepointSet() = default;
  // Any ranges (unsorted, overlapping); `negated` takes the complement within [0, U+10FFFF].
  static CodepointSet of(std::vector<CodepointRange> ranges, bool negated = false);
  static CodepointSet single(uint32_t cp) { return of({{cp, cp}}); }
  static CodepointSet any() { return of({{0, kMaxCodepoint}}); }

  bool contains(uint32_t cp) const {
    if (cp < 128) return (ascii_[cp >> 6] >> (cp & 63)) & 1;
    return contains_slow(cp);
  }
  bool intersects(uint32_t lo, uint32_t hi) const;      // some member in [lo, hi]
  bool contains_range(uint32_t lo, uint32_t hi) const;  // every member of [lo, hi]
  bool empty() const { return ranges_.empty(); }
  // Whether a valid UTF-8 text can hold a member (false for empty sets and lone surrogates).
  bool has_scalar_value() const;
  const std::vector<CodepointRange>& ranges() const { return ranges_; }
  // GBNF form: "x" for one printable character, else [..] (negated when that is shorter).
  std::string to_gbnf() const;
  bool operator==(const CodepointSet& o) const { return ranges_ == o.ranges_; }

 private:
  bool contains_slow(uint32_t cp) const;
  std::vector<CodepointRange> ranges_;
  uint64_t ascii_[2] = {0, 0};
};

// UTF-8 of one code point (cp <= U+10FFFF).
std::string utf8_encode(uint32_t cp);
// Bytes of the UTF-8 sequence a lead byte starts: 1..4, or 0 for a byte that cannot start one.
inline int utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}
// The code points a valid sequence starting with `prefix` (1..3 bytes of a longer sequence) can
// still encode: [lo, hi], or false when no valid sequence starts so (overlong, surrogate, too big).
bool utf8_prefix_range(const uint8_t* prefix, int n, int total, uint32_t* lo, uint32_t* hi);
// Decodes the complete sequence `s[0..n)` (n = utf8_length(s[0])); false when it is not valid.
bool utf8_decode(const uint8_t* s, int n, uint32_t* cp);
// Decodes one code point at s[*i], advancing *i; false on invalid UTF-8 (then *i is unchanged).
bool utf8_next(std::string_view s, size_t* i, uint32_t* cp);

// A code point as it reads in a GBNF literal or class: printable ASCII as itself (with `escape`
// characters backslashed), \n \r \t, \xNN, \uNNNN or \UNNNNNNNN for the rest of ASCII and
// non-printables; other code points as UTF-8.
std::string gbnf_escape_codepoint(uint32_t cp, std::string_view escape);
// A GBNF string literal "..." for UTF-8 text; a byte that is not valid UTF-8 is written \xNN,
// which a grammar reads as the code point U+00NN (callers pass valid UTF-8).
std::string gbnf_literal(std::string_view utf8);

}  // namespace ggflow::grammar
