// Recursive-descent parser of templates, with Jinja2's grammar and precedence:
//   cond:  or ["if" or ["else" cond]]      or: and {"or" and}      and: not {"and" not}
//   not:   "not" not | compare             compare: math1 {(==|!=|<|>|<=|>=|in|not in) math1}
//   math1: concat {(+|-) concat}           concat: math2 {"~" math2}
//   math2: pow {(*|/|//|%) pow}            pow: unary {"**" unary}
//   unary: (-|+) unary | primary postfix* filter/test*
// Statements: if/elif/else, for (unpacking, "if" filter, else), set (names, ns.attr, block),
// macro, call, filter, break/continue, generation (renders its body). Anything else is an error
// naming the tag and line.
//
// Nesting is bounded (Limits::max_nesting): every recursion of the parser (a bracket, a block, a
// unary operator, a conditional) counts one level, and every node's syntax-tree depth is checked
// as it is built, so that neither the parser nor the interpreter can be driven into a stack
// overflow by `((((...` or by `a.b.b.b...` / `1+1+1...` chains.
#include <cerrno>
#include <cstdlib>
#include <set>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace ggflow::jinja {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> toks, int max_nesting) : t_(std::move(toks)), max_nesting_(max_nesting) {}

  Body parse_all() {
    std::string stop;
    Body b = parse_body({}, stop);
    return b;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  bool soft_ = false;
  int max_nesting_;
  int nesting_ = 0;

  // One level of the parser's recursion, for as long as it lives.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > p.max_nesting_) {
        --p.nesting_;
        p.fail("nesting limit exceeded: the template nests brackets, blocks or operators deeper than " +
               std::to_string(p.max_nesting_) + " levels (Limits::max_nesting)");
      }
    }
    ~Nest() { --p.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
  };

  // Sets e's depth from its children (now all attached); refuses a tree deeper than the limit.
  ExprPtr seal(ExprPtr e) {
    int d = 0;
    for (const auto& k : e->kids)
      if (k) d = std::max(d, k->depth);
    for (const auto& kw : e->kwargs)
      if (kw.second) d = std::max(d, kw.second->depth);
    e->depth = d + 1;
    if (e->depth > max_nesting_)
      throw TemplateError("nesting limit exceeded: an expression is more than " + std::to_string(max_nesting_) +
                              " levels deep (Limits::max_nesting); each operator, attribute, subscript, call or "
                              "filter of a chain is one level",
                          e->line);
    return e;
  }

  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, cur().line); }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got '" + cur().text + "'");
    ++p_;
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected a name, got '" + cur().text + "'");
    return t_[p_++].text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail("expected end of tag '%}', got '" + cur().text + "'");
    ++p_;
  }

  static ExprPtr node(EK k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Statements until one of the `stops` tags; its name is returned in `stop` (tag left unconsumed
  // after the name).
  Body parse_body(const std::set<std::string>& stops, std::string& stop) {
    Body body;
    while (true) {
      const Token& tk = cur();
      if (tk.type == Tok::End) {
        if (!stops.empty()) fail("unexpected end of template, expected {% " + *stops.begin() + " %}");
        return body;
      }
      if (tk.type == Tok::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = SK::Text;
        s->line = tk.line;
        s->text = tk.text;
        body.push_back(std::move(s));
        ++p_;
      } else if (tk.type == Tok::VarBegin) {
        ++p_;
        auto s = std::make_unique<Stmt>();
        s->kind = SK::Output;
        s->line = tk.line;
        s->expr = parse_expr();
        if (cur().type != Tok::VarEnd) fail("expected '}}', got '" + cur().text + "'");
        ++p_;
        body.push_back(std::move(s));
      } else if (tk.type == Tok::BlockBegin) {
        ++p_;
        if (cur().type != Tok::Name) fail("expected a tag name after '{%'");
        std::string tag = cur().text;
        if (stops.count(tag)) {
          ++p_;
          stop = tag;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail("unexpected token '" + tk.text + "'");
      }
    }
  }

  Body sub_body(const std::set<std::string>& stops, std::string& stop, bool soft) {
    bool saved = soft_;
    soft_ = soft;
    Body b = parse_body(stops, stop);
    soft_ = saved;
    return b;
  }

  std::unique_ptr<Stmt> parse_statement() {
    Nest nest(*this);
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    std::string tag = expect_name();
    std::string stop;
    if (tag == "if") {
      bool saved = soft_;
      soft_ = true;
      ExprPtr c = parse_expr();
      expect_block_end();
      s->kind = SK::If;
      while (true) {
        Body b = parse_body({"elif", "else", "endif"}, stop);
        s->branches.emplace_back(std::move(c), std::move(b));
        if (stop == "elif") {
          c = parse_expr();
          expect_block_end();
          continue;
        }
        if (stop == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, stop);
        }
        break;
      }
      soft_ = saved;
    } else if (tag == "for") {
      s->kind = SK::For;
      s->targets.push_back(expect_name());
      while (is_op(",")) { ++p_; s->targets.push_back(expect_name()); }
      if (!is_name("in")) fail("expected 'in' in for loop");
      ++p_;
      s->expr = parse_cond(false);
      if (is_name("if")) { ++p_; s->cond = parse_expr(); }
      if (is_name("recursive")) fail("unsupported construct 'recursive' for loop");
      expect_block_end();
      s->body = sub_body({"else", "endfor"}, stop, false);
      if (stop == "else") {
        expect_block_end();
        s->else_body = sub_body({"endfor"}, stop, false);
      }
    } else if (tag == "set") {
      std::string first = expect_name();
      if (is_op(".")) {
        ++p_;
        s->attr = expect_name();
      }
      s->targets.push_back(first);
      while (is_op(",")) { ++p_; s->targets.push_back(expect_name()); }
      if (is_op("=")) {
        ++p_;
        s->kind = SK::Set;
        s->expr = parse_tuple_or_expr();
      } else {
        s->kind = SK::SetBlock;
        if (is_op("|")) s->expr = parse_filter_chain(nullptr);
        expect_block_end();
        s->body = sub_body({"endset"}, stop, false);
      }
    } else if (tag == "macro") {
      s->kind = SK::Macro;
      s->name = expect_name();
      parse_params(s->params);
      expect_block_end();
      s->body = sub_body({"endmacro"}, stop, false);
      if (cur().type == Tok::Name) ++p_;  // {% endmacro name %}
    } else if (tag == "call") {
      s->kind = SK::CallBlock;
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expr();
      if (s->expr->kind != EK::Call) fail("{% call %} needs a macro call");
      expect_block_end();
      s->body = sub_body({"endcall"}, stop, false);
    } else if (tag == "filter") {
      s->kind = SK::FilterBlock;
      s->expr = parse_filter_chain(nullptr, /*first_has_bar=*/false);
      expect_block_end();
      s->body = sub_body({"endfilter"}, stop, false);
    } else if (tag == "generation") {  // transformers' assistant-mask tag: renders its body
      s->kind = SK::If;
      auto always = node(EK::Literal, s->line);
      always->value = Value::boolean(true);
      expect_block_end();
      Body b = parse_body({"endgeneration"}, stop);
      s->branches.emplace_back(std::move(always), std::move(b));
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? SK::Break : SK::Continue;
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends") {
      throw TemplateError("unsupported tag '{% " + tag + " %}': a chat template cannot load other templates "
                          "(the sandbox has no file system)", s->line);
    } else {
      throw TemplateError("unsupported tag '{% " + tag + " %}'", s->line);
    }
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      std::string n = expect_name();
      ExprPtr def;
      if (is_op("=")) { ++p_; def = parse_expr(); }
      params.emplace_back(n, std::move(def));
      if (!is_op(",")) break;
      ++p_;
    }
    expect_op(")");
  }

  // `a, b` (tuple without parentheses) or a single expression.
  ExprPtr parse_tuple_or_expr() {
    ExprPtr first = parse_expr();
    if (!is_op(",")) return first;
    auto t = node(EK::TupleLit, first->line);
    t->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++p_;
      if (cur().type == Tok::BlockEnd || cur().type == Tok::VarEnd) break;
      t->kids.push_back(parse_expr());
    }
    return seal(std::move(t));
  }

  ExprPtr parse_expr() { return parse_cond(true); }

  ExprPtr parse_cond(bool with_cond) {
    Nest nest(*this);
    ExprPtr e = parse_or();
    while (with_cond && is_name("if")) {
      ++p_;
      bool saved = soft_;
      soft_ = true;
      auto c = node(EK::Cond, e->line);
      ExprPtr test = parse_or();
      ExprPtr other;
      if (is_name("else")) { ++p_; other = parse_cond(true); }
      soft_ = saved;
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(test));
      c->kids.push_back(std::move(other));
      e = seal(std::move(c));
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = node(EK::Binary, a->line);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return seal(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) { ++p_; e = binary("or", std::move(e), parse_and()); }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) { ++p_; e = binary("and", std::move(e), parse_not()); }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      auto e = node(EK::Unary, cur().line);
      ++p_;
      e->name = "not";
      e->kids.push_back(parse_not());
      return seal(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        ++p_;
      } else if (is_name("in")) {
        op = "in";
        ++p_;
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "not in";
        p_ += 2;
      } else {
        return e;
      }
      e = binary(op, std::move(e), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[p_++].text;
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) { ++p_; e = binary("~", std::move(e), parse_math2()); }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[p_++].text;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) { ++p_; e = binary("**", std::move(e), parse_unary(true)); }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Nest nest(*this);
      e = node(EK::Unary, cur().line);
      e->name = t_[p_++].text;
      e->kids.push_back(parse_unary(false));
      e = seal(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tk = cur();
    int line = tk.line;
    if (tk.type == Tok::Name) {
      ++p_;
      auto e = node(EK::Literal, line);
      if (tk.text == "true" || tk.text == "True") e->value = Value::boolean(true);
      else if (tk.text == "false" || tk.text == "False") e->value = Value::boolean(false);
      else if (tk.text == "none" || tk.text == "None") e->value = Value::none();
      else { e->kind = EK::Name; e->name = tk.text; }
      return e;
    }
    if (tk.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += t_[p_++].text;  // adjacent literals concatenate
      auto e = node(EK::Literal, line);
      e->value = Value::string(s);
      return e;
    }
    if (tk.type == Tok::Int || tk.type == Tok::Float) {
      ++p_;
      auto e = node(EK::Literal, line);
      errno = 0;
      if (tk.type == Tok::Int) {
        long long x = std::strtoll(tk.text.c_str(), nullptr, 10);
        if (errno == ERANGE)
          fail("integer literal " + tk.text.substr(0, 40) + (tk.text.size() > 40 ? "..." : "") +
               " does not fit in 64 bits (ggflow's integers are 64-bit)");
        e->value = Value::integer(x);
      } else {
        e->value = Value::number(std::strtod(tk.text.c_str(), nullptr));  // Python: 1e999 is inf, 1e-999 is 0.0
      }
      return e;
    }
    if (is_op("(")) {
      ++p_;
      if (is_op(")")) { ++p_; return node(EK::TupleLit, line); }
      ExprPtr e = parse_expr();
      if (is_op(",")) {
        auto t = node(EK::TupleLit, line);
        t->kids.push_back(std::move(e));
        while (is_op(",")) {
          ++p_;
          if (is_op(")")) break;
          t->kids.push_back(parse_expr());
        }
        e = seal(std::move(t));
      }
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      ++p_;
      auto e = node(EK::ListLit, line);
      while (!is_op("]")) {
        e->kids.push_back(parse_expr());
        if (!is_op(",")) break;
        ++p_;
      }
      expect_op("]");
      return seal(std::move(e));
    }
    if (is_op("{")) {
      ++p_;
      auto e = node(EK::DictLit, line);
      while (!is_op("}")) {
        e->kids.push_back(parse_expr());
        expect_op(":");
        e->kids.push_back(parse_expr());
        if (!is_op(",")) break;
        ++p_;
      }
      expect_op("}");
      return seal(std::move(e));
    }
    fail("unexpected '" + tk.text + "' in expression");
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail("unsupported construct '*args/**kwargs' in a call");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string n = t_[p_].text;
        p_ += 2;
        call.kwargs.emplace_back(n, parse_expr());
      } else {
        call.kids.push_back(parse_expr());
      }
      if (!is_op(",")) break;
      ++p_;
    }
    expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      int line = cur().line;
      if (is_op(".")) {
        ++p_;
        auto a = node(EK::Attr, line);
        if (cur().type == Tok::Int) a->name = t_[p_++].text;
        else a->name = expect_name();
        a->kids.push_back(std::move(e));
        e = seal(std::move(a));
      } else if (is_op("[")) {
        ++p_;
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = parse_expr();
          if (k < 2 && is_op(":")) { ++p_; slice = true; continue; }
          break;
        }
        expect_op("]");
        auto it = node(slice ? EK::Slice : EK::Item, line);
        it->kids.push_back(std::move(e));
        if (!slice && !parts[0]) fail("empty subscript");
        for (int k = 0; k < (slice ? 3 : 1); ++k) it->kids.push_back(std::move(parts[k]));
        e = seal(std::move(it));
      } else if (is_op("(")) {
        auto c = node(EK::Call, line);
        c->kids.push_back(std::move(e));
        parse_call_args(*c);
        e = seal(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter_chain(std::move(e), true, /*single=*/true);
      } else if (is_name("is")) {
        ++p_;
        auto t = node(EK::Test, cur().line);
        t->soft = soft_;
        if (is_name("not")) { ++p_; t->negated = true; }
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((cur().type == Tok::String || cur().type == Tok::Int || cur().type == Tok::Float ||
                    (cur().type == Tok::Name && cur().text != "else" && cur().text != "or" &&
                     cur().text != "and" && cur().text != "if" && cur().text != "is" &&
                     cur().text != "in" && cur().text != "not")) ) {
          t->kids.push_back(parse_postfix(parse_primary()));
        }
        e = seal(std::move(t));
      } else {
        return e;
      }
    }
  }

  // `| f(args) | g ...` applied to `subject` (null inside {% filter %} and {% set x | f %}).
  ExprPtr parse_filter_chain(ExprPtr subject, bool first_has_bar = true, bool single = false) {
    bool need_bar = first_has_bar;
    do {
      if (need_bar) expect_op("|");
      need_bar = true;
      auto f = node(EK::Filter, cur().line);
      f->soft = soft_;
      f->name = expect_name();
      while (is_op(".")) { ++p_; f->name += "." + expect_name(); }
      f->kids.push_back(std::move(subject));
      if (is_op("(")) parse_call_args(*f);
      subject = seal(std::move(f));
    } while (!single && is_op("|"));
    return subject;
  }
};

}  // namespace

std::shared_ptr<Program> parse_template(const std::string& source, const Limits& limits) {
  if (source.size() > limits.max_source)
    throw TemplateError("template size limit exceeded: the template is " + std::to_string(source.size()) +
                        " bytes, over the limit of " + std::to_string(limits.max_source) + " (Limits::max_source)");
  Parser parser(tokenize(source), limits.max_nesting);
  auto prog = std::make_shared<Program>();
  prog->body = parser.parse_all();
  return prog;
}

}  // namespace ggflow::jinja
