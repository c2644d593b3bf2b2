// Tree-walking interpreter of templates. It renders a parsed Program against a dict of globals and
// enforces the sandbox limits (jinja::Limits in jinja_value.h): total loop iterations, evaluation
// steps and bytes, macro call depth, run-time nesting, output size and range() length; attributes
// whose names start with '__' (Python's internals: __class__, __globals__, ...) are refused. Every
// failure is a TemplateError carrying the template line.
//
// Values do not outlive the render: macros capture their scope and namespaces can hold anything
// (themselves included), so the reference cycles this makes are broken when the render ends.
//
// Scoping follows Jinja2: `for` bodies and macro calls open a scope (a `set` inside a loop does not
// leak out; use a namespace), `if` does not.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_value.h"

namespace ggflow::jinja {

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
  const Budget& budget() const { return budget_; }  // what the last render consumed
  // A namespace made by the template (released when the render ends).
  Value make_namespace();

 private:
  enum class Flow { Normal, Break, Continue };
  Limits limits_;
  Budget budget_;
  std::function<std::string(const std::string&)> strftime_now_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  int64_t iterations_ = 0;
  int depth_ = 0;       // nested macro calls
  int eval_depth_ = 0;  // nested eval/exec calls
  // Scopes captured by macros and namespaces made by the template: their contents are cleared when
  // the render ends, which frees the reference cycles they may be part of.
  std::vector<std::weak_ptr<Scope>> captured_;
  std::vector<std::weak_ptr<Dict>> namespaces_;

  // One level of run-time nesting (eval or exec), for as long as it lives.
  struct Nested {
    Interpreter& in;
    Nested(Interpreter& interp, int line) : in(interp) {
      if (++in.eval_depth_ > in.limits_.max_eval_depth) {
        --in.eval_depth_;
        throw TemplateError("evaluation depth limit exceeded: expressions, statements and macro calls nested more than " +
                                std::to_string(in.limits_.max_eval_depth) + " deep at run time (Limits::max_eval_depth)",
                            line);
      }
    }
    ~Nested() { --in.eval_depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
  };
  void release() noexcept;
  void release_values();
  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_stmt(const Stmt& s);
  void exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  Value make_macro(const Stmt& s, std::shared_ptr<Scope> closure, const Stmt* caller_of = nullptr);
  std::string capture(const Body& body, std::shared_ptr<Scope> scope);
  void emit(const std::string& s, int line);
  void assign(const std::vector<std::string>& targets, const Value& v, int line);

  Value eval(const Expr& e);
  Value eval_expr(const Expr& e);
  Value eval_binary(const Expr& e);
  Value binary_op(const std::string& op, const Value& a, const Value& b, int line);  // not and/or
  bool append_in_place(const Stmt& s);
  struct Pin {  // an append_in_place in progress on dict[attr], and attr's value from before if it changed
    const Dict* dict;
    const std::string* attr;
    Value old;
    bool saved;
  };
  std::vector<Pin*> pins_;
  void before_namespace_write(const Dict& d, const std::string& attr);
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
