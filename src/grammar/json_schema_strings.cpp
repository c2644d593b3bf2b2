// The fixed JSON rules and string formats, the rule writer, and the pieces of strings the
// converter builds from schemas: regex patterns, integer ranges, JSON-escaped characters.
#include <algorithm>
#include <cstdio>

#include "grammar/json_schema_impl.h"

namespace ggflow::grammar::schema {

const std::vector<FixedRule>& fixed_rules() {
  static const std::vector<FixedRule> rules = {
      // At most one space, or a newline and up to 20 spaces/tabs (indentation).
      {"ws", R"(( " " | "\n" [ \t]{0,20} )?)", {}},
      {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")", {"ws", "string", "value"}},
      {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")", {"ws", "value"}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))", {}},
      {"number", R"(integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)", {"integer"}},
      {"nonneg-number", R"(( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)", {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      // String formats (the characters between the quotes).
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))", {}},
      {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))", {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}},
      {"email", R"([A-Za-z0-9._%+-]+ "@" [A-Za-z0-9-]+ ( "." [A-Za-z0-9-]+ )+)", {}},
      {"ipv4", R"(ipv4-octet "." ipv4-octet "." ipv4-octet "." ipv4-octet)", {"ipv4-octet"}},
      {"ipv4-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])", {}},
  };
  return rules;
}

const std::vector<std::string>& supported_formats() {
  static const std::vector<std::string> f = {"date", "time", "date-time", "uuid", "email", "ipv4"};
  return f;
}

RuleWriter::RuleWriter(const Limits& limits) : limits_(limits) {
  names_.insert("root");
  for (const auto& r : fixed_rules()) names_.insert(r.name);
}

std::string RuleWriter::fixed(const std::string& name) {
  if (!fixed_used_.insert(name).second) return name;
  for (const auto& r : fixed_rules())
    if (name == r.name)
      for (const char* u : r.uses) fixed(u);
  return name;
}

std::string RuleWriter::reserve(const std::string& hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) base += c;
    else if (!base.empty() && base.back() != '-') base += '-';
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  for (int k = 2; names_.count(name); ++k) name = base + "-" + std::to_string(k);
  names_.insert(name);
  return name;
}

void RuleWriter::define(const std::string& name, const std::string& body) {
  bytes_ += name.size() + body.size() + 6;
  rules_.push_back({name, body});
}

std::string RuleWriter::add(const std::string& hint, const std::string& body) {
  std::string name = reserve(hint);
  define(name, body);
  return name;
}

bool RuleWriter::too_big() const { return bytes_ > limits_.max_text_bytes || rules_.size() > limits_.max_rules; }

std::string RuleWriter::text(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  for (const auto& r : fixed_rules())
    if (fixed_used_.count(r.name)) out += std::string(r.name) + " ::= " + r.body + "\n";
  return out;
}

// --- characters inside JSON strings ---
// What a pattern's character becomes in the JSON text: " and \ escaped, \b \f \n \r \t as
// their short escapes, other controls as \u00XX; in classes, controls other than those five are
// left out (a model never needs them; the grammar stays small). "/" is written plainly.

std::string json_char_gbnf(uint32_t cp) {
  switch (cp) {
    case '"': return gbnf_literal("\\\"");
    case '\\': return gbnf_literal("\\\\");
    case '\b': return gbnf_literal("\\b");
    case '\f': return gbnf_literal("\\f");
    case '\n': return gbnf_literal("\\n");
    case '\r': return gbnf_literal("\\r");
    case '\t': return gbnf_literal("\\t");
    default: break;
  }
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    return gbnf_literal(buf);
  }
  return gbnf_literal(utf8_encode(cp));
}

std::string json_class_gbnf(const CodepointSet& set) {
  // The members JSON writes as themselves: the set minus controls, '"' and '\\'.
  std::vector<CodepointRange> plain;
  for (auto r : set.ranges()) {
    r.lo = std::max<uint32_t>(r.lo, 0x20);
    for (uint32_t special : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (r.lo <= special && special <= r.hi) {
        if (special > r.lo) plain.push_back({r.lo, special - 1});
        r.lo = special + 1;
      }
    }
    if (r.lo <= r.hi) plain.push_back(r);
  }
  std::vector<std::string> alts;
  const CodepointSet p = CodepointSet::of(plain);
  if (!p.empty()) alts.push_back(p.to_gbnf());
  for (uint32_t c : {uint32_t{'"'}, uint32_t{'\\'}, uint32_t{'\b'}, uint32_t{'\f'}, uint32_t{'\n'}, uint32_t{'\r'}, uint32_t{'\t'}})
    if (set.contains(c)) alts.push_back(json_char_gbnf(c));
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// --- integer ranges ---

namespace {

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Decimal strings of equal length n in [a, b] (a <= b): the usual split on the first digit.
std::string same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return "\"" + a + "\"";
  const size_t n = a.size() - 1;
  if (a[0] == b[0]) return "\"" + std::string(1, a[0]) + "\" " + same_length(a.substr(1), b.substr(1));
  const bool low_all0 = a.find_first_not_of('0', 1) == std::string::npos;
  const bool high_all9 = b.find_first_not_of('9', 1) == std::string::npos;
  const std::string rest = n > 0 ? " [0-9]{" + std::to_string(n) + "}" : "";
  std::vector<std::string> alts;
  if (!low_all0) alts.push_back("\"" + std::string(1, a[0]) + "\" ( " + same_length(a.substr(1), std::string(n, '9')) + " )");
  const char from = low_all0 ? a[0] : static_cast<char>(a[0] + 1);
  const char to = high_all9 ? b[0] : static_cast<char>(b[0] - 1);
  if (from <= to) alts.push_back(digit_class(from, to) + rest);
  if (!high_all9) alts.push_back("\"" + std::string(1, b[0]) + "\" ( " + same_length(std::string(n, '0'), b.substr(1)) + " )");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// Canonical decimals in [lo, hi] (hi nullopt: up to max(16, digits of lo) digits).
std::vector<std::string> unsigned_range(uint64_t lo, std::optional<uint64_t> hi) {
  const std::string slo = std::to_string(lo);
  std::vector<std::string> alts;
  if (hi) {
    const std::string shi = std::to_string(*hi);
    for (size_t len = slo.size(); len <= shi.size(); ++len) {
      const std::string from = len == slo.size() ? slo : "1" + std::string(len - 1, '0');
      const std::string to = len == shi.size() ? shi : std::string(len, '9');
      alts.push_back(same_length(from, to));
    }
    return alts;
  }
  alts.push_back(same_length(slo, std::string(slo.size(), '9')));
  const size_t max_digits = std::max<size_t>(16, slo.size());
  if (slo.size() < max_digits)
    alts.push_back("[1-9] [0-9]{" + std::to_string(slo.size()) + "," + std::to_string(max_digits - 1) + "}");
  return alts;
}

uint64_t magnitude(int64_t v) { return v < 0 ? uint64_t(0) - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

}  // namespace

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives: "-" then magnitudes in [max(1, -hi), -lo]
    const uint64_t from = hi && *hi < 0 ? magnitude(*hi) : 1;
    std::optional<uint64_t> to;
    if (lo) to = magnitude(*lo);
    std::string inner;
    const auto parts = unsigned_range(from, to);
    for (size_t i = 0; i < parts.size(); ++i) inner += (i ? " | " : "") + parts[i];
    alts.push_back("\"-\" ( " + inner + " )");
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> top;
    if (hi) top = static_cast<uint64_t>(*hi);
    const auto parts = unsigned_range(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, top);
    alts.insert(alts.end(), parts.begin(), parts.end());
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// --- regex patterns ---

namespace {

class RegexConverter {
 public:
  RegexConverter(std::string_view re, const Limits& limits, const std::string& where) : s_(re), lim_(limits), where_(where) {}

  Result<std::string> run() {
    std::string out;
    if (!alternation(true, 0, &out)) return *err_;
    if (p_ < s_.size()) fail("unbalanced ')'");
    if (err_) return *err_;
    return out;
  }

 private:
  std::string_view s_;
  const Limits& lim_;
  std::string where_;
  size_t p_ = 0;
  std::optional<Error> err_;

  bool fail(const std::string& what) {
    if (!err_)
      err_ = make_error("json schema: pattern at " + where_ + ": " + what + " (at offset " + std::to_string(p_) + " of the regex)",
                        "patterns support literals, classes, ., groups, |, * + ? {m,n}, and ^ $ at the ends");
    return false;
  }
  char peek(size_t off = 0) const { return p_ + off < s_.size() ? s_[p_ + off] : '\0'; }

  bool alternation(bool top, uint32_t depth, std::string* out) {
    if (depth > lim_.max_nesting) return fail("groups nested too deep");
    std::vector<std::string> branches;
    while (true) {
      std::string b;
      if (!sequence(top, depth, &b)) return false;
      branches.push_back(b);
      if (peek() != '|') break;
      ++p_;
    }
    if (branches.size() == 1) {
      *out = branches[0];
      return true;
    }
    *out = "(";
    for (size_t i = 0; i < branches.size(); ++i) *out += (i ? " | " : " ") + branches[i];
    *out += " )";
    return true;
  }

  bool sequence(bool top, uint32_t depth, std::string* out) {
    bool anchored_start = false, anchored_end = false;
    if (top && peek() == '^') {
      ++p_;
      anchored_start = true;
    }
    std::vector<std::string> items;
    while (p_ < s_.size() && peek() != '|' && peek() != ')') {
      if (top && peek() == '$' && (p_ + 1 == s_.size() || s_[p_ + 1] == '|')) {
        ++p_;
        anchored_end = true;
        break;
      }
      std::string atom;
      if (!this->atom(depth, &atom)) return false;
      std::string q;
      if (!quantifier(&q)) return false;
      items.push_back(atom + q);
    }
    if (top && !anchored_start) items.insert(items.begin(), "char*");
    if (top && !anchored_end) items.push_back("char*");
    *out = "";
    for (const auto& it : items) *out += (out->empty() ? "" : " ") + it;
    if (out->empty()) *out = "\"\"";
    return true;
  }

  bool quantifier(std::string* q) {
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++p_;
      *q = std::string(1, c);
    } else if (c == '{') {
      const size_t open = p_++;
      auto number = [&](uint64_t* v) {
        const size_t start = p_;
        *v = 0;
        while (peek() >= '0' && peek() <= '9') {
          *v = *v * 10 + (peek() - '0');
          if (*v > lim_.max_repeat) return fail("repetition count above Limits::max_repeat = " + std::to_string(lim_.max_repeat));
          ++p_;
        }
        return p_ > start || fail("expected a number in {m,n}");
      };
      uint64_t lo, hi;
      if (!number(&lo)) return false;
      *q = "{" + std::to_string(lo);
      if (peek() == ',') {
        ++p_;
        *q += ",";
        if (peek() != '}') {
          if (!number(&hi)) return false;
          if (hi < lo) return fail("{m,n} with n < m");
          *q += std::to_string(hi);
        }
      }
      if (peek() != '}') {
        p_ = open;
        return fail("'{' that is not a repetition {m}, {m,} or {m,n} (escape it as \\{)");
      }
      ++p_;
      *q += "}";
    } else {
      return true;
    }
    if (peek() == '?') ++p_;  // lazy: the same set of matches
    if (peek() == '+') return fail("possessive quantifiers are not supported");
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') return fail("a quantifier after a quantifier (group it: (x*)*)");
    return true;
  }

  // Class escapes \d \w \s and their negations.
  static bool class_escape(char e, std::vector<CodepointRange>* ranges, bool* negated) {
    *negated = e == 'D' || e == 'W' || e == 'S';
    switch (e) {
      case 'd': case 'D': ranges->push_back({'0', '9'}); return true;
      case 'w': case 'W':
        ranges->insert(ranges->end(), {{'A', 'Z'}, {'a', 'z'}, {'0', '9'}, {'_', '_'}});
        return true;
      case 's': case 'S':
        ranges->insert(ranges->end(), {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                                       {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
        return true;
      default: return false;
    }
  }

  // One escaped character after '\' (not a class escape); false with an error when unsupported.
  bool escaped_char(uint32_t* cp) {
    const char e = peek();
    ++p_;
    auto hex = [&](int n) {
      uint32_t v = 0;
      for (int i = 0; i < n; ++i) {
        const char c = peek();
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail("\\x needs 2 and \\u 4 hex digits");
        v = v * 16 + d;
        ++p_;
      }
      *cp = v;
      return true;
    };
    switch (e) {
      case 'n': *cp = '\n'; return true;
      case 't': *cp = '\t'; return true;
      case 'r': *cp = '\r'; return true;
      case 'f': *cp = '\f'; return true;
      case 'v': *cp = '\v'; return true;
      case '0': *cp = 0; return true;
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'b': case 'B': return fail("word boundaries (\\b, \\B) are not supported");
      case 'p': case 'P': return fail("Unicode property classes (\\p{...}) are not supported");
      case 'k': return fail("named backreferences are not supported");
      default: break;
    }
    if (e >= '1' && e <= '9') return fail("backreferences are not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || e == '\0') return fail(std::string("unknown escape \\") + e);
    *cp = static_cast<uint8_t>(e);  // escaped punctuation is itself
    if (*cp >= 0x80) return fail("escape before a non-ASCII character");
    return true;
  }

  bool literal_char(uint32_t* cp) {
    size_t i = p_;
    if (!utf8_next(s_, &i, cp)) return fail("invalid UTF-8");
    p_ = i;
    return true;
  }

  bool set_expr(const CodepointSet& set, std::string* out) {
    *out = json_class_gbnf(set);
    if (out->empty()) return fail("a character class that matches nothing");
    return true;
  }

  bool atom(uint32_t depth, std::string* out) {
    const char c = peek();
    if (c == '(') {
      ++p_;
      if (peek() == '?') {
        if (peek(1) != ':') return fail("lookaround and named groups are not supported (only ( ) and (?: ))");
        p_ += 2;
      }
      std::string inner;
      if (!alternation(false, depth + 1, &inner)) return false;
      if (peek() != ')') return fail("missing ')'");
      ++p_;
      *out = "( " + inner + " )";
      return true;
    }
    if (c == '[') return char_class(out);
    if (c == '.') {
      ++p_;
      return set_expr(CodepointSet::of({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true), out);
    }
    if (c == '^' || c == '$') return fail("anchors ^ and $ are supported only at the start and end of the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail(std::string("'") + c + "' with nothing to repeat");
    uint32_t cp;
    if (c == '\\') {
      ++p_;
      std::vector<CodepointRange> ranges;
      bool negated;
      if (class_escape(peek(), &ranges, &negated)) {
        ++p_;
        return set_expr(CodepointSet::of(ranges, negated), out);
      }
      if (!escaped_char(&cp)) return false;
    } else if (!literal_char(&cp)) {
      return false;
    }
    *out = json_char_gbnf(cp);
    return true;
  }

  bool char_class(std::string* out) {
    ++p_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++p_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (p_ >= s_.size()) return fail("unterminated character class");
      if (peek() == ']') break;
      uint32_t lo;
      if (peek() == '\\') {
        ++p_;
        bool neg;
        std::vector<CodepointRange> sub;
        if (class_escape(peek(), &sub, &neg)) {
          ++p_;
          const CodepointSet s = CodepointSet::of(sub, neg);
          ranges.insert(ranges.end(), s.ranges().begin(), s.ranges().end());
          continue;
        }
        if (peek() == 'b') {  // backspace inside a class
          ++p_;
          lo = '\b';
        } else if (!escaped_char(&lo)) {
          return false;
        }
      } else if (!literal_char(&lo)) {
        return false;
      }
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++p_;
        if (peek() == '\\') {
          ++p_;
          if (!escaped_char(&hi)) return false;
        } else if (!literal_char(&hi)) {
          return false;
        }
        if (hi < lo) return fail("reversed range in a character class");
      }
      ranges.push_back({lo, hi});
    }
    ++p_;  // ']'
    return set_expr(CodepointSet::of(ranges, negated), out);
  }
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, const Limits& limits, const std::string& where) {
  return RegexConverter(pattern, limits, where).run();
}

}  // namespace ggflow::grammar::schema
