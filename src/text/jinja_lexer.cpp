// Template lexer (see jinja_lexer.h for the whitespace rules).
#include "text/jinja_lexer.h"

#include <cctype>

#include "text/jinja_value.h"

namespace ggflow::jinja {
namespace {

int count_lines(const std::string& s, size_t from, size_t to) {
  int n = 0;
  for (size_t k = from; k < to && k < s.size(); ++k) n += s[k] == '\n';
  return n;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python-style unescaping of a string literal body.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t k = 0; k < body.size(); ++k) {
    char c = body[k];
    if (c != '\\' || k + 1 == body.size()) { out += c; continue; }
    char e = body[++k];
    auto hex = [&](int n) {
      if (k + size_t(n) >= body.size())
        throw TemplateError(std::string("truncated \\") + e + " escape in string literal", line);
      uint32_t cp = 0;
      for (size_t d = k + 1; d <= k + size_t(n); ++d) {
        char h = body[d];
        if (!std::isxdigit((unsigned char)h))
          throw TemplateError(std::string("invalid \\") + e + " escape in string literal: '" + h +
                              "' is not a hex digit", line);
        cp = cp * 16 + uint32_t(std::isdigit((unsigned char)h) ? h - '0' : (std::tolower((unsigned char)h) - 'a' + 10));
      }
      if (cp > 0x10ffff)
        throw TemplateError("invalid \\U escape in string literal: code point above U+10FFFF", line);
      k += size_t(n);
      utf8_append(out, cp);
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\n': break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      default: out += '\\'; out += e;
    }
  }
  return out;
}

struct Lexer {
  const std::string& src;
  std::vector<Token> out;
  size_t pos = 0;
  int line = 1;

  void text(std::string t, int at) {
    if (!t.empty()) out.push_back({Tok::Text, std::move(t), at});
  }

  // Tokens of one tag body, up to and including its end marker ("}}" or "%}").
  void tag_body(bool block) {
    std::vector<char> balance;
    const char* end = block ? "%}" : "}}";
    while (true) {
      while (pos < src.size() && is_space(src[pos])) line += src[pos++] == '\n';
      if (pos >= src.size()) throw TemplateError("unexpected end of template inside a tag", line);
      if (balance.empty()) {
        if (src[pos] == '-' && src.compare(pos + 1, 2, end) == 0) {
          pos += 3;
          out.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "-", line});
          return;
        }
        if (src.compare(pos, 2, end) == 0) {
          pos += 2;
          out.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line});
          return;
        }
      }
      char c = src[pos];
      if (std::isalpha((unsigned char)c) || c == '_') {
        size_t b = pos;
        while (pos < src.size() && (std::isalnum((unsigned char)src[pos]) || src[pos] == '_')) ++pos;
        out.push_back({Tok::Name, src.substr(b, pos - b), line});
      } else if (std::isdigit((unsigned char)c)) {
        size_t b = pos;
        bool is_float = false;
        while (pos < src.size() && (std::isdigit((unsigned char)src[pos]) || src[pos] == '_')) ++pos;
        if (pos + 1 < src.size() && src[pos] == '.' && std::isdigit((unsigned char)src[pos + 1])) {
          is_float = true;
          ++pos;
          while (pos < src.size() && std::isdigit((unsigned char)src[pos])) ++pos;
        }
        if (pos < src.size() && (src[pos] == 'e' || src[pos] == 'E')) {
          size_t q = pos + 1;
          if (q < src.size() && (src[q] == '+' || src[q] == '-')) ++q;
          if (q < src.size() && std::isdigit((unsigned char)src[q])) {
            is_float = true;
            pos = q;
            while (pos < src.size() && std::isdigit((unsigned char)src[pos])) ++pos;
          }
        }
        std::string digits;
        for (size_t k = b; k < pos; ++k)
          if (src[k] != '_') digits += src[k];
        out.push_back({is_float ? Tok::Float : Tok::Int, digits, line});
      } else if (c == '\'' || c == '"') {
        size_t b = ++pos;
        int start_line = line;
        while (pos < src.size() && src[pos] != c) {
          if (src[pos] == '\\') ++pos;
          if (pos < src.size() && src[pos] == '\n') ++line;
          ++pos;
        }
        if (pos >= src.size()) throw TemplateError("unterminated string literal", start_line);
        out.push_back({Tok::String, unescape(src.substr(b, pos - b), start_line), start_line});
        ++pos;
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                    "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        std::string op;
        for (const char* o : ops)
          if (src.compare(pos, std::char_traits<char>::length(o), o) == 0) { op = o; break; }
        if (op.empty()) throw TemplateError(std::string("unexpected character '") + c + "' in tag", line);
        if (op == "(" || op == "[" || op == "{") balance.push_back(op[0]);
        if ((op == ")" || op == "]" || op == "}") && !balance.empty()) balance.pop_back();
        pos += op.size();
        out.push_back({Tok::Op, op, line});
      }
    }
  }

  void run() {
    size_t end = src.size();
    bool strip_next = false;  // the previous tag ended with '-'
    while (pos < end) {
      size_t tag = src.find('{', pos);
      while (tag != std::string::npos && tag + 1 < end && src[tag + 1] != '{' && src[tag + 1] != '%' &&
             src[tag + 1] != '#')
        tag = src.find('{', tag + 1);
      if (tag == std::string::npos || tag + 1 >= end) tag = end;
      std::string data = src.substr(pos, tag - pos);
      int data_line = line;
      line += count_lines(src, pos, tag);
      if (strip_next) {
        size_t k = 0;
        while (k < data.size() && is_space(data[k])) ++k;
        data.erase(0, k);
      }
      strip_next = false;
      if (tag == end) { text(data, data_line); break; }
      char kind = src[tag + 1];
      bool minus = tag + 2 < end && src[tag + 2] == '-';
      bool plus = tag + 2 < end && src[tag + 2] == '+';
      if (minus) {
        while (!data.empty() && is_space(data.back())) data.pop_back();
      } else if (kind != '{' && !plus) {  // lstrip_blocks
        size_t nl = data.rfind('\n');
        size_t from = nl == std::string::npos ? 0 : nl + 1;
        bool line_start = nl != std::string::npos || pos == 0 || src[pos - 1] == '\n';
        bool blank = true;
        for (size_t k = from; k < data.size(); ++k) blank = blank && (data[k] == ' ' || data[k] == '\t');
        if (line_start && blank) data.erase(from);
      }
      text(data, data_line);
      pos = tag + 2 + (minus || plus ? 1 : 0);
      if (kind == '#') {
        size_t close = src.find("#}", pos);
        if (close == std::string::npos) throw TemplateError("unterminated comment", line);
        bool m = close > pos && src[close - 1] == '-';
        line += count_lines(src, pos, close);
        pos = close + 2;
        if (m) strip_next = true;
        else if (pos < src.size() && src[pos] == '\n') { ++pos; ++line; }
        continue;
      }
      bool block = kind == '%';
      out.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line});
      tag_body(block);
      if (block && out.size() >= 2 && out[out.size() - 2].type == Tok::Name && out[out.size() - 2].text == "raw" &&
          out[out.size() - 3].type == Tok::BlockBegin) {
        raw_block();
        continue;
      }
      if (out.back().text == "-") strip_next = true;
      else if (block && pos < src.size() && src[pos] == '\n') { ++pos; ++line; }  // trim_blocks
    }
    out.push_back({Tok::End, "", line});
  }

  // {% raw %}...{% endraw %}: the body is text, verbatim.
  void raw_block() {
    bool strip = out.back().text == "-";
    out.resize(out.size() - 3);
    size_t k = pos;
    while (true) {
      k = src.find("{%", k);
      if (k == std::string::npos) throw TemplateError("missing {% endraw %}", line);
      size_t q = k + 2;
      if (q < src.size() && (src[q] == '-' || src[q] == '+')) ++q;
      while (q < src.size() && is_space(src[q])) ++q;
      if (src.compare(q, 6, "endraw") == 0) break;
      k += 2;
    }
    std::string data = src.substr(pos, k - pos);
    if (strip) { size_t b = 0; while (b < data.size() && is_space(data[b])) ++b; data.erase(0, b); }
    else if (!data.empty() && data[0] == '\n') data.erase(0, 1);
    if (src[k + 2] == '-') while (!data.empty() && is_space(data.back())) data.pop_back();
    text(data, line);
    line += count_lines(src, pos, k);
    size_t close = src.find("%}", k);
    if (close == std::string::npos) throw TemplateError("unterminated endraw tag", line);
    bool m = src[close - 1] == '-';
    pos = close + 2;
    if (m) { while (pos < src.size() && is_space(src[pos])) line += src[pos++] == '\n'; }
    else if (pos < src.size() && src[pos] == '\n') { ++pos; ++line; }
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  // Like Jinja: newlines normalized to \n, then one trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      src += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else src += source[k];
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  Lexer lx{src, {}, 0, 1};
  lx.run();
  return lx.out;
}

}  // namespace ggflow::jinja
