// Tree-walking interpreter of templates. It renders a parsed Program against a dict of globals and
// enforces the sandbox limits: total loop iterations, macro call depth, output size and range()
// length. Every failure is a TemplateError carrying the template line.
//
// Scoping follows Jinja2: `for` bodies and macro calls open a scope (a `set` inside a loop does not
// leak out; use a namespace), `if` does not.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "text/jinja_ast.h"
#include "text/jinja_value.h"

namespace ggflow::jinja {

struct Limits {
  size_t max_output = 16u << 20;          // bytes of rendered text (also per captured block)
  int64_t max_iterations = 1000000;       // loop iterations over one render, all loops together
  int max_depth = 200;                    // nested macro calls
  int64_t max_range = 100000;             // items one range() may produce (Jinja's sandbox value)
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  Interpreter(Limits limits, std::function<std::string(const std::string&)> strftime_now);
  std::string render(const Program& program, const Value& globals);

  // Used by filters, tests and methods.
  Value call(const Value& fn, CallArgs& args, int line);
  Value filter(const std::string& name, const Value& v, CallArgs& args, int line, bool known_only = false);
  bool test(const std::string& name, const Value& v, CallArgs& args, int line);
  Value get_attr(const Value& obj, const std::string& name, int line);
  Value get_item(const Value& obj, const Value& key, int line);
  void count_iterations(int64_t n, int line);
  const Limits& limits() const { return limits_; }

 private:
  enum class Flow { Normal, Break, Continue };
  Limits limits_;
  std::function<std::string(const std::string&)> strftime_now_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  int64_t iterations_ = 0;
  int depth_ = 0;

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  Value make_macro(const Stmt& s, std::shared_ptr<Scope> closure, const Stmt* caller_of = nullptr);
  std::string capture(const Body& body, std::shared_ptr<Scope> scope);
  void emit(const std::string& s, int line);
  void assign(const std::vector<std::string>& targets, const Value& v, int line);

  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value lookup(const std::string& name);
  CallArgs eval_args(const Expr& e, size_t first_kid);
};

// Builtins defined in jinja_filters.cpp / jinja_methods.cpp.
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, int line);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, int line);
// A bound method of a string, dict or list (whitelisted), or Undefined when there is none.
Value method_of(const Value& obj, const std::string& name, int line);

}  // namespace ggflow::jinja
