// GBNF text -> Grammar::Parts: a recursive-descent parser over the syntax in grammar.h. Groups and
// repetitions become helper rules here, so compile() sees only rules, alternatives and items.
// Every error says where (line:col), what was expected and how to fix it.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "grammar/rules.h"

namespace ggflow::grammar {

std::string where(SourcePos p) {
  if (p.line == 0) return "grammar: ";
  return "grammar line " + std::to_string(p.line) + " col " + std::to_string(p.col) + ": ";
}

namespace {

using Item = Grammar::Parts::Item;
using Seq = std::vector<Item>;
constexpr uint32_t kUnbounded = UINT32_MAX;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string shown(char c) {
  if (c >= 0x20 && c < 0x7F) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<uint8_t>(c));
  return buf;
}

class Parser {
 public:
  Parser(std::string_view text, const Limits& limits) : s_(text), lim_(limits) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<Grammar::Parts> run() {
    if (s_.size() > lim_.max_text_bytes)
      return make_error("grammar: text is " + std::to_string(s_.size()) + " bytes, above the limit of " +
                            std::to_string(lim_.max_text_bytes),
                        "shorten the grammar or raise Limits::max_text_bytes");
    skip_space(true);
    while (p_ < s_.size() && !err_) {
      if (!parse_rule()) break;
      skip_space(true);
    }
    if (err_) return *err_;
    name_helpers();
    return std::move(out_);
  }

 private:
  std::string_view s_;
  const Limits& lim_;
  size_t p_ = 0;
  Grammar::Parts out_;
  std::unordered_map<std::string, uint32_t> ids_;  // user rule names
  std::vector<size_t> line_starts_;
  std::optional<Error> err_;
  uint64_t n_elements_ = 0;  // items + alternative ends so far (Limits::max_elements)

  // Line and byte column of an offset (binary search over the line starts).
  SourcePos pos(size_t at) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());  // >= 1: line_starts_[0] == 0
    return SourcePos{static_cast<uint32_t>(line), static_cast<uint32_t>(at - line_starts_[line - 1] + 1)};
  }

  bool fail(size_t at, const std::string& what, const std::string& hint = {}) {
    if (!err_) err_ = make_error(where(pos(at)) + what, hint);
    return false;
  }

  char peek(size_t off = 0) const { return p_ + off < s_.size() ? s_[p_ + off] : '\0'; }
  bool at_end() const { return p_ >= s_.size(); }

  // Spaces, tabs and comments; line ends too when `newlines`.
  void skip_space(bool newlines) {
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t') {
        ++p_;
      } else if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n' && s_[p_] != '\r') ++p_;
      } else if ((c == '\n' || c == '\r') && newlines) {
        ++p_;
      } else {
        break;
      }
    }
  }

  bool count_elements(uint64_t n) {
    n_elements_ += n;
    if (n_elements_ > lim_.max_elements)
      return fail(p_, "the grammar expands to more than " + std::to_string(lim_.max_elements) + " elements",
                  "lower the repetition counts x{m,n}, or raise Limits::max_elements");
    return true;
  }

  uint32_t new_rule(std::string name, bool helper, uint32_t owner) {
    Grammar::Parts::Rule r;
    r.name = std::move(name);
    r.helper = helper;
    r.owner = owner;
    out_.rules.push_back(std::move(r));
    return static_cast<uint32_t>(out_.rules.size() - 1);
  }

  bool check_rule_count() {
    if (out_.rules.size() > lim_.max_rules)
      return fail(p_, "the grammar has more than " + std::to_string(lim_.max_rules) + " rules (helper rules of groups and repetitions included)",
                  "simplify the grammar or raise Limits::max_rules");
    return true;
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, fresh] = ids_.try_emplace(name, 0);
    if (fresh) {
      it->second = new_rule(name, false, 0);
      out_.rules[it->second].first_use = pos(at);
    }
    return it->second;
  }

  // A helper rule with the given alternatives; returns false (error set) over the limits.
  bool helper(uint32_t owner, std::vector<Seq> alts, uint32_t* id) {
    uint64_t n = 0;
    for (const auto& a : alts) n += a.size() + 1;
    if (!count_elements(n)) return false;
    *id = new_rule("", true, owner);
    out_.rules[*id].alts = std::move(alts);
    out_.rules[*id].defined = true;
    return check_rule_count();
  }

  uint32_t add_set(CodepointSet set) {
    out_.sets.push_back(std::move(set));
    return static_cast<uint32_t>(out_.sets.size() - 1);
  }

  bool parse_name(std::string* name) {
    const size_t start = p_;
    while (p_ < s_.size() && is_name_char(s_[p_])) ++p_;
    if (p_ == start)
      return fail(p_, "expected a rule name, found " + (at_end() ? std::string("the end") : shown(peek())),
                  "rule names are letters, digits, '_' and '-'");
    *name = std::string(s_.substr(start, p_ - start));
    return true;
  }

  bool parse_rule() {
    const size_t start = p_;
    std::string name;
    if (!parse_name(&name)) return false;
    skip_space(false);
    if (s_.substr(p_, 3) != "::=")
      return fail(p_, "expected '::=' after the rule name '" + name + "'", "a rule reads: " + name + " ::= ...");
    p_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, start);
    auto& r = out_.rules[id];
    if (r.defined) {
      const SourcePos first = r.defined_at;
      return fail(start, "rule '" + name + "' is defined twice (first at line " + std::to_string(first.line) + ")",
                  "merge the definitions with '|' or rename one");
    }
    r.defined = true;
    r.defined_at = pos(start);
    if (!check_rule_count()) return false;
    std::vector<Seq> alts;
    if (!parse_alternatives(id, false, 0, &alts)) return false;
    out_.rules[id].alts = std::move(alts);
    if (!at_end() && peek() != '\n' && peek() != '\r')
      return fail(p_, "unexpected " + shown(peek()) + " in rule '" + name + "'",
                  peek() == ')' ? "this ')' has no '('" : "a rule ends at the end of its line; check quotes and brackets");
    return true;
  }

  bool parse_alternatives(uint32_t owner, bool nested, uint32_t depth, std::vector<Seq>* alts) {
    if (depth > lim_.max_nesting)
      return fail(p_, "groups nested more than " + std::to_string(lim_.max_nesting) + " deep", "flatten the grammar with named rules, or raise Limits::max_nesting");
    while (true) {
      Seq seq;
      if (!parse_sequence(owner, nested, depth, &seq)) return false;
      if (!count_elements(1)) return false;  // the alternative's end
      alts->push_back(std::move(seq));
      if (peek() == '|') {
        ++p_;
        skip_space(true);
        continue;
      }
      if (!nested) {  // extension: a following line that starts with '|' continues the rule
        const size_t save = p_;
        skip_space(true);
        if (peek() == '|') {
          ++p_;
          skip_space(true);
          continue;
        }
        p_ = save;
      }
      return true;
    }
  }

  bool parse_sequence(uint32_t owner, bool nested, uint32_t depth, Seq* seq) {
    size_t last_start = SIZE_MAX;  // where the item a repetition applies to begins in *seq
    while (!at_end()) {
      const char c = peek();
      const size_t item_at = p_;
      if (c == '"') {
        last_start = seq->size();
        if (!parse_literal(seq)) return false;
      } else if (c == '[') {
        last_start = seq->size();
        CodepointSet set;
        if (!parse_class(&set)) return false;
        if (!count_elements(1)) return false;
        seq->push_back({false, add_set(std::move(set))});
      } else if (c == '.') {
        ++p_;
        last_start = seq->size();
        if (!count_elements(1)) return false;
        seq->push_back({false, add_set(CodepointSet::any())});
      } else if (is_name_char(c)) {
        std::string name;
        if (!parse_name(&name)) return false;
        last_start = seq->size();
        if (!count_elements(1)) return false;
        seq->push_back({true, rule_id(name, item_at)});
        if (!check_rule_count()) return false;
      } else if (c == '(') {
        ++p_;
        skip_space(true);
        std::vector<Seq> alts;
        if (!parse_alternatives(owner, true, depth + 1, &alts)) return false;
        if (peek() != ')') {
          const SourcePos open = pos(item_at);
          return fail(p_, "expected ')' to close the group opened at line " + std::to_string(open.line) + " col " + std::to_string(open.col),
                      "add the missing ')'");
        }
        ++p_;
        uint32_t id;
        if (!helper(owner, std::move(alts), &id)) return false;
        last_start = seq->size();
        if (!count_elements(1)) return false;
        seq->push_back({true, id});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == SIZE_MAX || last_start >= seq->size())
          return fail(p_, std::string("'") + c + "' has nothing to repeat", "put it after a literal, class, rule name or group");
        uint32_t lo = 0, hi = kUnbounded;
        if (c == '{') {
          if (!parse_braces(&lo, &hi)) return false;
        } else {
          ++p_;
          lo = c == '+' ? 1 : 0;
          hi = c == '?' ? 1 : kUnbounded;
        }
        if (!repeat(owner, seq, last_start, lo, hi)) return false;
      } else {
        break;  // ')' '|' a line end or anything else: the caller decides
      }
      skip_space(nested);
    }
    return true;
  }

  // {m} {m,} {m,n}
  bool parse_braces(uint32_t* lo, uint32_t* hi) {
    const size_t open = p_;
    ++p_;
    skip_space(false);
    auto number = [&](uint32_t* v) {
      const size_t start = p_;
      uint64_t x = 0;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
        x = x * 10 + (s_[p_] - '0');
        if (x > lim_.max_repeat)
          return fail(start, "repetition count above the limit of " + std::to_string(lim_.max_repeat), "use a smaller count or '*', or raise Limits::max_repeat");
        ++p_;
      }
      if (p_ == start) return fail(p_, "expected a number in the repetition '{...}'", "write x{m}, x{m,} or x{m,n}");
      *v = static_cast<uint32_t>(x);
      skip_space(false);
      return true;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (peek() == ',') {
      ++p_;
      skip_space(false);
      *hi = kUnbounded;
      if (peek() != '}' && !number(hi)) return false;
    }
    if (peek() != '}') return fail(p_, "expected '}' to close the repetition opened at col " + std::to_string(pos(open).col), "write x{m}, x{m,} or x{m,n}");
    ++p_;
    if (*hi < *lo) return fail(open, "repetition {" + std::to_string(*lo) + "," + std::to_string(*hi) + "} has max below min", "swap the bounds");
    return true;
  }

  // Replaces seq[start..) (the item X) by X repeated lo..hi times (hi == kUnbounded: no maximum).
  bool repeat(uint32_t owner, Seq* seq, size_t start, uint32_t lo, uint32_t hi) {
    Seq x(seq->begin() + start, seq->end());
    seq->resize(start);
    const uint64_t copies = uint64_t{lo} + (hi == kUnbounded ? 1 : hi - lo);
    if (x.size() > 1 && copies > 1) {  // repeat one reference, not the whole item
      uint32_t g;
      if (!helper(owner, {x}, &g)) return false;
      x = {{true, g}};
    }
    if (!count_elements(uint64_t{lo} * x.size())) return false;
    for (uint32_t i = 0; i < lo; ++i) seq->insert(seq->end(), x.begin(), x.end());
    if (hi == kUnbounded) {  // star ::= X star | ""
      uint32_t star;
      if (!helper(owner, {}, &star)) return false;
      Seq body = x;
      body.push_back({true, star});
      if (!count_elements(body.size() + 2)) return false;
      out_.rules[star].alts = {body, {}};
      if (!count_elements(1)) return false;
      seq->push_back({true, star});
    } else if (hi > lo) {  // opt_1 ::= X | "";  opt_k ::= X opt_{k-1} | ""
      uint32_t prev = 0;
      for (uint32_t k = 1; k <= hi - lo; ++k) {
        Seq body = x;
        if (k > 1) body.push_back({true, prev});
        uint32_t opt;
        if (!helper(owner, {body, {}}, &opt)) return false;
        prev = opt;
      }
      if (!count_elements(1)) return false;
      seq->push_back({true, prev});
    }
    return true;
  }

  // One character of a literal or class: a UTF-8 code point or an escape.
  bool parse_char(uint32_t* cp, const char* context) {
    const size_t at = p_;
    if (peek() == '\\') {
      ++p_;
      if (at_end()) return fail(at, std::string("unterminated ") + context, "close it");
      const char e = s_[p_++];
      int digits = 0;
      switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
          *cp = static_cast<uint8_t>(e);
          return true;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
          return fail(at, "bad escape '\\" + std::string(1, e) + "' in " + context,
                      "known escapes: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\/ \\' \\xNN \\uNNNN \\UNNNNNNNN");
      }
      uint64_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const int h = hex_value(peek());
        if (h < 0) return fail(p_, "escape '\\" + std::string(1, e) + "' needs " + std::to_string(digits) + " hex digits", "e.g. \\x41, \\u00E9, \\U0001F600");
        v = v * 16 + h;
        ++p_;
      }
      if (v > kMaxCodepoint) return fail(at, "escape above U+10FFFF", "Unicode ends at \\U0010FFFF");
      *cp = static_cast<uint32_t>(v);
      return true;
    }
    size_t i = p_;
    if (!utf8_next(s_, &i, cp)) return fail(at, std::string("invalid UTF-8 in ") + context, "grammars are UTF-8 text; write other code points as \\uNNNN");
    p_ = i;
    return true;
  }

  bool parse_literal(Seq* seq) {
    const size_t open = p_;
    ++p_;
    while (true) {
      if (at_end() || peek() == '\n' || peek() == '\r')
        return fail(open, "unterminated string literal", "close it with '\"' on the same line");
      if (peek() == '"') break;
      uint32_t cp;
      if (!parse_char(&cp, "string literal")) return false;
      if (!count_elements(1)) return false;
      seq->push_back({false, add_set(CodepointSet::single(cp))});
    }
    ++p_;
    return true;
  }

  bool parse_class(CodepointSet* set) {
    const size_t open = p_;
    ++p_;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++p_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (at_end() || peek() == '\n' || peek() == '\r')
        return fail(open, "unterminated character class", "close it with ']' on the same line");
      if (peek() == ']') break;
      uint32_t lo, hi;
      const size_t at = p_;
      if (!parse_char(&lo, "character class")) return false;
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++p_;
        if (!parse_char(&hi, "character class")) return false;
        if (hi < lo) return fail(at, "reversed range in character class", "write the lower end first, e.g. [a-z]");
      }
      ranges.push_back({lo, hi});
    }
    ++p_;
    *set = CodepointSet::of(std::move(ranges), negated);
    return true;
  }

  // Helpers are named after their rule: root-1, root-2, ... (never a user's name).
  void name_helpers() {
    std::unordered_set<std::string> taken;
    for (const auto& [name, id] : ids_) taken.insert(name);
    std::unordered_map<uint32_t, uint32_t> counter;
    for (auto& r : out_.rules) {
      if (!r.helper) continue;
      const std::string& base = out_.rules[r.owner].name;
      std::string name;
      do name = base + "-" + std::to_string(++counter[r.owner]);
      while (taken.count(name));
      taken.insert(name);
      r.name = std::move(name);
    }
  }
};

}  // namespace

Result<Grammar::Parts> parse_gbnf_parts(std::string_view text, const Limits& limits) {
  return Parser(text, limits).run();
}

}  // namespace ggflow::grammar
