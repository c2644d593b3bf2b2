// Scanners of the tool-call parser: an incremental JSON checker, the call-header matchers, and a
// reader of Python-style calls (tool_calls_impl.h).
#include <cmath>

#include "pipeline/tool_calls_impl.h"

namespace ggflow::pipeline::tool_scan {

namespace scan_detail {

// Number states: after '-', after a leading 0, in integer digits, after '.', in fraction digits,
// after e/E, after the exponent sign, in exponent digits.
enum NumberState : uint8_t { kNone, kMinus, kZero, kInt, kDot, kFrac, kE, kESign, kExp };

bool digit(char c) { return c >= '0' && c <= '9'; }
bool hex(char c) { return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || digit(c); }

// Next number state after c, or kNone when c does not continue the number.
uint8_t number_next(uint8_t s, char c) {
  switch (s) {
    case kMinus: return c == '0' ? kZero : digit(c) ? kInt : kNone;
    case kZero: return c == '.' ? kDot : (c == 'e' || c == 'E') ? kE : kNone;
    case kInt: return digit(c) ? kInt : c == '.' ? kDot : (c == 'e' || c == 'E') ? kE : kNone;
    case kDot: return digit(c) ? kFrac : kNone;
    case kFrac: return digit(c) ? kFrac : (c == 'e' || c == 'E') ? kE : kNone;
    case kE: return (c == '+' || c == '-') ? kESign : digit(c) ? kExp : kNone;
    case kESign: return digit(c) ? kExp : kNone;
    case kExp: return digit(c) ? kExp : kNone;
    default: return kNone;
  }
}
bool number_complete(uint8_t s) { return s == kZero || s == kInt || s == kFrac || s == kExp; }

// A cursor over text that may be cut short: running out is NeedMore (or No at eof).
struct Cursor {
  std::string_view t;
  size_t p = 0;
  bool eof = false;
  bool more = false;  // ran out of text

  bool end() {
    if (p < t.size()) return false;
    more = !eof;
    return true;
  }
  void ws() {
    while (p < t.size() && is_json_ws(t[p])) ++p;
  }
  bool lit(std::string_view s) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (p + i >= t.size()) {
        more = !eof;
        return false;
      }
      if (t[p + i] != s[i]) return false;
    }
    p += s.size();
    return true;
  }
  // A JSON string (p at the quote), decoded into *out (\u escapes of ASCII only; others kept as '?').
  bool json_string(std::string* out) {
    if (end() || t[p] != '"') return false;
    for (size_t i = p + 1; i < t.size(); ++i) {
      const char c = t[i];
      if (c == '"') {
        p = i + 1;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i + 1 >= t.size()) break;
      const char e = t[++i];
      if (e == 'u') {
        if (i + 4 >= t.size()) break;
        unsigned v = 0;
        for (int k = 1; k <= 4; ++k) {
          if (!hex(t[i + k])) return false;
          v = v * 16 + unsigned(digit(t[i + k]) ? t[i + k] - '0' : (t[i + k] | 0x20) - 'a' + 10);
        }
        *out += v < 0x80 ? char(v) : '?';
        i += 4;
      } else {
        static constexpr std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
        const size_t k = from.find(e);
        if (k == std::string_view::npos) return false;
        *out += to[k];
      }
    }
    more = !eof;
    return false;
  }
  Match result(bool ok) const { return ok ? Match::Yes : more ? Match::NeedMore : Match::No; }
};

// --- Python literals ---

struct PyReader {
  Cursor& c;
  int depth = 0;

  void ws() {
    while (c.p < c.t.size() && (c.t[c.p] == ' ' || c.t[c.p] == '\t' || c.t[c.p] == '\n' || c.t[c.p] == '\r')) ++c.p;
  }
  bool ident(std::string* out) {
    if (c.end() || !ident_start(c.t[c.p])) return false;
    size_t b = c.p;
    while (c.p < c.t.size() && ident_char(c.t[c.p])) ++c.p;
    if (c.p == c.t.size() && !c.eof) {  // the name may go on
      c.more = true;
      return false;
    }
    *out = std::string(c.t.substr(b, c.p - b));
    return true;
  }
  bool string(ToolJson* out) {
    const char q = c.t[c.p];
    std::string s;
    for (size_t i = c.p + 1; i < c.t.size(); ++i) {
      const char ch = c.t[i];
      if (ch == q) {
        c.p = i + 1;
        *out = s;
        return true;
      }
      if (ch == '\n') return false;
      if (ch != '\\') {
        s += ch;
        continue;
      }
      if (i + 1 >= c.t.size()) break;
      const char e = c.t[++i];
      static constexpr std::string_view from = "\"'\\nrtbf0", to = "\"'\\\n\r\t\b\f";
      if (e == 'u' || e == 'x') {
        const int n = e == 'u' ? 4 : 2;
        if (i + n >= c.t.size()) break;
        uint32_t v = 0;
        for (int k = 1; k <= n; ++k) {
          const char h = c.t[i + k];
          if (!hex(h)) return false;
          v = v * 16 + uint32_t(digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        i += n;
        if (v < 0x80) s += char(v);
        else if (v < 0x800) s += {char(0xC0 | (v >> 6)), char(0x80 | (v & 0x3F))};
        else s += {char(0xE0 | (v >> 12)), char(0x80 | ((v >> 6) & 0x3F)), char(0x80 | (v & 0x3F))};
      } else if (e == '\n') {
      } else {
        const size_t k = from.find(e);
        if (k == std::string_view::npos) return false;
        s += k < to.size() ? to[k] : '\0';
      }
    }
    c.more = !c.eof;
    return false;
  }
  bool number(ToolJson* out) {
    size_t b = c.p;
    if (c.t[c.p] == '-' || c.t[c.p] == '+') ++c.p;
    while (c.p < c.t.size() && (digit(c.t[c.p]) || c.t[c.p] == '.' || c.t[c.p] == 'e' || c.t[c.p] == 'E' ||
                                ((c.t[c.p] == '-' || c.t[c.p] == '+') && (c.t[c.p - 1] == 'e' || c.t[c.p - 1] == 'E')))) {
      ++c.p;
    }
    if (c.end()) return false;
    std::string text(c.t.substr(b, c.p - b));
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    ToolJson v = ToolJson::parse(text, nullptr, false);
    if (v.is_discarded() || !v.is_number()) {  // 1. or .5 in Python
      char* e = nullptr;
      const double d = std::strtod(text.c_str(), &e);
      if (text.empty() || *e || !std::isfinite(d)) return false;
      v = d;
    }
    *out = v;
    return true;
  }
  // Items up to `close` (a list, tuple or dict).
  bool items(char close, bool dict, ToolJson* out) {
    ++c.p;
    *out = dict ? ToolJson::object() : ToolJson::array();
    for (;;) {
      ws();
      if (c.end()) return false;
      if (c.t[c.p] == close) {
        ++c.p;
        return true;
      }
      ToolJson k, v;
      if (dict) {
        if (!value(&k) || !k.is_string()) return false;
        ws();
        if (c.end() || c.t[c.p] != ':') return false;
        ++c.p;
        ws();
      }
      if (!value(&v)) return false;
      if (dict) (*out)[k.get<std::string>()] = std::move(v);
      else out->push_back(std::move(v));
      ws();
      if (c.end()) return false;
      if (c.t[c.p] == ',') ++c.p;
      else if (c.t[c.p] != close) return false;
    }
  }
  bool value(ToolJson* out) {
    if (c.end()) return false;
    if (++depth > 64) return false;
    const char ch = c.t[c.p];
    bool ok = false;
    if (ch == '"' || ch == '\'') ok = string(out);
    else if (ch == '[') ok = items(']', false, out);
    else if (ch == '(') ok = items(')', false, out);
    else if (ch == '{') ok = items('}', true, out);
    else if (digit(ch) || ch == '-' || ch == '+' || ch == '.') ok = number(out);
    else {
      std::string id;
      if (ident(&id)) {
        if (id == "True" || id == "true") *out = true, ok = true;
        else if (id == "False" || id == "false") *out = false, ok = true;
        else if (id == "None" || id == "null") *out = nullptr, ok = true;
      }
    }
    --depth;
    return ok;
  }
};

}  // namespace scan_detail

using namespace scan_detail;

bool callable_name(std::string_view name, const std::vector<std::string>& names) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name)
    if (!ident_char(ch) && ch != '-') return false;
  if (names.empty()) return true;
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

Match match_literal(std::string_view text, size_t at, std::string_view lit, bool eof) {
  for (size_t i = 0; i < lit.size(); ++i) {
    if (at + i >= text.size()) return eof ? Match::No : Match::NeedMore;
    if (text[at + i] != lit[i]) return Match::No;
  }
  return Match::Yes;
}

// --- JsonScanner ---

JsonScanner::Step JsonScanner::value_done() {
  if (stack_.empty()) {
    done_ = true;
    return Step::Done;
  }
  stack_.back().phase = Phase::CommaOrEnd;
  return Step::More;
}

JsonScanner::Step JsonScanner::value_start(char c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return Step::Error;
      stack_.push_back(Frame{c == '{', c == '{' ? Phase::KeyOrEnd : Phase::ValueOrEnd});
      return Step::More;
    case '"': in_string_ = true, key_ = false; return Step::More;
    case 't': literal_ = "rue"; return Step::More;
    case 'f': literal_ = "alse"; return Step::More;
    case 'n': literal_ = "ull"; return Step::More;
    default:
      if (c == '-') number_ = kMinus;
      else if (c == '0') number_ = kZero;
      else if (digit(c)) number_ = kInt;
      else return Step::Error;
      return Step::More;
  }
}

JsonScanner::Step JsonScanner::container(char c) {
  Frame& f = stack_.back();
  switch (f.phase) {
    case Phase::KeyOrEnd:
    case Phase::Key:
      if (c == '}' && f.phase == Phase::KeyOrEnd) break;
      if (c != '"') return Step::Error;
      in_string_ = true, key_ = true;
      return Step::More;
    case Phase::Colon:
      if (c != ':') return Step::Error;
      f.phase = Phase::Value;
      return Step::More;
    case Phase::ValueOrEnd:
      if (c == ']') break;
      return value_start(c);
    case Phase::Value: return value_start(c);
    case Phase::CommaOrEnd:
      if (c == ',') {
        f.phase = f.object ? Phase::Key : Phase::Value;
        return Step::More;
      }
      if (c != (f.object ? '}' : ']')) return Step::Error;
      break;
  }
  stack_.pop_back();  // the container closed with c
  return value_done();
}

JsonScanner::Step JsonScanner::feed(char c, bool* significant) {
  *significant = true;
  if (done_) return Step::Error;
  if (in_string_) {
    if (hex_ > 0) {
      if (!hex(c)) return Step::Error;
      --hex_;
    } else if (escape_) {
      escape_ = false;
      if (c == 'u') hex_ = 4;
      else if (std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos) return Step::Error;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      if (key_) {
        stack_.back().phase = Phase::Colon;
        return Step::More;
      }
      return value_done();
    } else if (static_cast<unsigned char>(c) < 0x20) {
      return Step::Error;
    }
    return Step::More;
  }
  if (literal_) {
    if (c != *literal_) return Step::Error;
    if (*++literal_ == '\0') {
      literal_ = nullptr;
      return value_done();
    }
    return Step::More;
  }
  if (number_ != kNone) {
    if (uint8_t n = number_next(number_, c); n != kNone) {
      number_ = n;
      return Step::More;
    }
    if (!number_complete(number_)) return Step::Error;
    number_ = kNone;
    value_done();  // never Done: numbers are inside containers
  }
  if (is_json_ws(c)) {
    *significant = false;
    return Step::More;
  }
  if (stack_.empty()) {
    if (c == '{' || c == '[' || c == '"') return value_start(c);
    return Step::Error;
  }
  return container(c);
}

// --- headers ---

Match match_call_header(std::string_view text, bool eof, const std::vector<std::string>& names, CallHeader* out) {
  Cursor c{text, 0, eof};
  auto fail = [&] { return c.more ? Match::NeedMore : Match::No; };
  if (!c.lit("{")) return fail();
  c.ws();
  if (c.end()) return fail();
  if (c.lit("\"type\"")) {
    c.ws();
    if (!c.lit(":")) return fail();
    c.ws();
    if (!c.lit("\"function\"")) return fail();
    c.ws();
    if (!c.lit(",")) return fail();
    c.ws();
  } else if (c.more) {
    return Match::NeedMore;
  }
  if (!c.lit("\"name\"")) return fail();
  c.ws();
  if (!c.lit(":")) return fail();
  c.ws();
  std::string name;
  if (!c.json_string(&name)) return fail();
  if (!callable_name(name, names)) return Match::No;
  c.ws();
  if (!c.lit(",")) return fail();
  c.ws();
  if (c.end()) return fail();
  if (!c.lit("\"arguments\"")) {
    if (c.more) return Match::NeedMore;
    if (!c.lit("\"parameters\"")) return fail();
  }
  c.ws();
  if (!c.lit(":")) return fail();
  c.ws();
  if (c.end()) return fail();
  if (text[c.p] != '{') return Match::No;
  out->name = std::move(name);
  out->args_at = c.p;
  return Match::Yes;
}

Match match_mistral_header(std::string_view text, bool eof, const std::vector<std::string>& names, CallHeader* out) {
  Cursor c{text, 0, eof};
  size_t p = 0;
  while (p < text.size() && (ident_char(text[p]) || text[p] == '-')) ++p;
  if (p == text.size()) return eof ? Match::No : Match::NeedMore;
  std::string name(text.substr(0, p));
  if (!callable_name(name, names)) return Match::No;
  c.p = p;
  if (c.lit("[CALL_ID]")) {
    while (c.p < text.size() && text[c.p] != '[' && text[c.p] != '\n') ++c.p;
    if (c.end()) return c.more ? Match::NeedMore : Match::No;
  } else if (c.more) {
    return Match::NeedMore;
  }
  if (!c.lit("[ARGS]")) return c.more ? Match::NeedMore : Match::No;
  c.ws();
  if (c.end()) return c.more ? Match::NeedMore : Match::No;
  if (text[c.p] != '{') return Match::No;
  out->name = std::move(name);
  out->args_at = c.p;
  return Match::Yes;
}

Match match_generic_open(std::string_view text, bool eof, bool* calls, size_t* end) {
  Cursor c{text, 0, eof};
  auto fail = [&] { return c.more ? Match::NeedMore : Match::No; };
  if (!c.lit("{")) return fail();
  c.ws();
  if (c.end()) return fail();
  *calls = c.lit("\"tool_calls\"");
  if (!*calls) {
    if (c.more) return Match::NeedMore;
    if (!c.lit("\"response\"")) return fail();
  }
  c.ws();
  if (!c.lit(":")) return fail();
  c.ws();
  if (!c.lit(*calls ? "[" : "\"")) return fail();
  *end = c.p;
  return Match::Yes;
}

bool call_from_json(const ToolJson& obj, const std::vector<std::string>& names, std::string* name, std::string* arguments) {
  if (!obj.is_object()) return false;
  const ToolJson* o = &obj;
  if (!obj.contains("name") && obj.contains("function") && obj["function"].is_object()) o = &obj["function"];
  auto n = o->find("name");
  if (n == o->end() || !n->is_string() || !callable_name(n->get<std::string>(), names)) return false;
  auto a = o->find("arguments");
  if (a == o->end()) a = o->find("parameters");
  ToolJson args = a == o->end() || a->is_null() ? ToolJson::object() : *a;
  if (args.is_string()) args = ToolJson::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return false;
  *name = n->get<std::string>();
  *arguments = args.dump(-1, ' ', false, ToolJson::error_handler_t::replace);
  return true;
}

Match match_python_call(std::string_view text, bool eof, const std::vector<std::string>& names, PyCall* out) {
  Cursor c{text, 0, eof};
  PyReader r{c};
  std::string name, part;
  if (!r.ident(&name)) return c.result(false);
  while (c.p < text.size() && text[c.p] == '.') {  // module.function, name.call
    ++c.p;
    if (!r.ident(&part)) return c.result(false);
    if (part != "call") name += "." + part;
  }
  if (c.end() || text[c.p] != '(') return c.result(false);
  if (!callable_name(name, names)) return Match::No;
  ++c.p;
  ToolJson args = ToolJson::object();
  for (;;) {
    r.ws();
    if (c.end()) return c.result(false);
    if (text[c.p] == ')') {
      ++c.p;
      break;
    }
    std::string key;
    if (!r.ident(&key)) return c.result(false);
    r.ws();
    if (c.end() || text[c.p] != '=') return c.result(false);
    ++c.p;
    r.ws();
    ToolJson v;
    if (!r.value(&v)) return c.result(false);
    args[key] = std::move(v);
    r.ws();
    if (c.end()) return c.result(false);
    if (text[c.p] == ',') ++c.p;
    else if (text[c.p] != ')') return Match::No;
  }
  out->name = std::move(name);
  out->arguments = args.dump(-1, ' ', false, ToolJson::error_handler_t::replace);
  out->end = c.p;
  return Match::Yes;
}

}  // namespace ggflow::pipeline::tool_scan
