// Expressions of the interpreter: names, literals, attribute/item/slice access (sandboxed: only
// our own values and whitelisted methods; '__dunder__' names are refused), calls, filters, tests
// and operators with Python semantics. Using an undefined value where Python would raise
// (attribute, arithmetic, call) raises like Jinja2's default Undefined does. Integers are 64-bit:
// an operation whose result does not fit is an error, never a wrapped value.
#include <climits>
#include <cmath>

#include "text/jinja_interp.h"

namespace ggflow::jinja {
namespace {

[[noreturn]] void undefined_error(const Value& v, int line) {
  throw TemplateError("UndefinedError: '" + (v.s.empty() ? std::string("value") : v.s) + "' is undefined", line);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

int64_t as_int(const Value& v) { return v.kind == Kind::Bool ? int64_t(v.b) : v.i; }

// Python's internals (__class__, __globals__, __subclasses__, __init__, __dict__, ...) are the road
// from a template to the host in a Python sandbox escape; ggflow's values have none, and a template
// that asks for one is refused outright rather than handed an undefined value.
bool is_dunder(const std::string& name) { return name.size() >= 2 && name[0] == '_' && name[1] == '_'; }

[[noreturn]] void refuse_attribute(const Value& obj, const std::string& name, int line) {
  throw TemplateError("attribute '" + name + "' is not accessible in the sandbox (asked of " +
                          (obj.is_undefined() ? std::string("an undefined value") : "a value of type " + obj.type_name()) +
                          "; names starting with '__' are Python internals, refused in chat templates)",
                      line);
}

[[noreturn]] void overflow(const std::string& what, int line) {
  throw TemplateError("integer overflow: " + what + " does not fit in 64 bits (template integers are 64-bit)", line);
}

// base ** exp for exp >= 0, or overflow.
int64_t int_pow(int64_t base, int64_t exp, int line) {
  if (base == 0) return exp == 0 ? 1 : 0;
  if (base == 1) return 1;
  if (base == -1) return exp % 2 ? -1 : 1;
  int64_t r = 1, b = base;
  for (int64_t e = exp; e > 0; e >>= 1) {  // |base| >= 2: overflows within 63 squarings
    if ((e & 1) && __builtin_mul_overflow(r, b, &r)) overflow(std::to_string(base) + " ** " + std::to_string(exp), line);
    if (e > 1 && __builtin_mul_overflow(b, b, &b)) overflow(std::to_string(base) + " ** " + std::to_string(exp), line);
  }
  return r;
}

// n * times, saturated (sizes to check against a limit).
size_t saturating_mul(size_t n, int64_t times) {
  if (times <= 0 || n == 0) return 0;
  if (n > SIZE_MAX / size_t(times)) return SIZE_MAX;
  return n * size_t(times);
}

// Python slice indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int line) {
  int64_t st = step.is_none() || step.is_undefined() ? 1 : as_int(step);
  if (st == 0) throw TemplateError("slice step cannot be zero", line);
  // A step longer than the sequence takes one item at most: clamp it so that `k += st` cannot overflow.
  st = std::clamp<int64_t>(st, -(n + 1), n + 1);
  auto norm = [&](const Value& v, int64_t dflt) {
    if (v.is_none() || v.is_undefined()) return dflt;
    int64_t x = as_int(v);
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = norm(start, st > 0 ? 0 : n - 1), e = norm(stop, st > 0 ? n : -1);
  std::vector<size_t> idx;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) idx.push_back(size_t(k));
  return idx;
}

}  // namespace

Value Interpreter::lookup(const std::string& name) {
  if (const Value* v = scope_->find(name)) return *v;
  return Value::undefined(name);
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first_kid) {
  CallArgs a;
  a.line = e.line;
  for (size_t k = first_kid; k < e.kids.size(); ++k) a.positional.push_back(eval(*e.kids[k]));
  for (const auto& [n, x] : e.kwargs) a.keywords.emplace_back(n, eval(*x));
  return a;
}

Value Interpreter::get_attr(const Value& obj, const std::string& name, int line) {
  if (is_dunder(name)) refuse_attribute(obj, name, line);
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj, line);
    case Kind::Namespace: {
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined(name);
    }
    case Kind::Dict: {
      Value m = method_of(obj, name, line);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict->find(name);
      return v ? *v : Value::undefined(name);
    }
    case Kind::String: case Kind::List: return method_of(obj, name, line);
    default: return Value::undefined(name);
  }
}

Value Interpreter::get_item(const Value& obj, const Value& key, int line) {
  switch (obj.kind) {
    case Kind::Undefined: undefined_error(obj, line);
    case Kind::Dict: case Kind::Namespace: {
      bool ok = false;
      std::string k = dict_key(key, &ok);
      if (ok)
        if (const Value* v = obj.dict->find(k)) return *v;  // data, whatever its name
      if (key.is_string() && is_dunder(key.s)) refuse_attribute(obj, key.s, line);
      if (key.is_string() && obj.kind == Kind::Dict) return method_of(obj, key.s, line);
      return Value::undefined(key.is_string() ? key.s : key.str());
    }
    case Kind::List: {
      if (obj.generator) return Value::undefined("generator item");
      if (key.kind == Kind::Int || key.kind == Kind::Bool) {
        int64_t n = int64_t(obj.list->size()), k = as_int(key);
        if (k < 0) k += n;
        if (k < 0 || k >= n) return Value::undefined("list index");
        return (*obj.list)[size_t(k)];
      }
      if (key.is_string() && is_dunder(key.s)) refuse_attribute(obj, key.s, line);
      if (key.is_string()) return method_of(obj, key.s, line);
      return Value::undefined();
    }
    case Kind::String: {
      if (key.kind == Kind::Int || key.kind == Kind::Bool) {
        auto cps = utf8_decode(obj.s);
        int64_t n = int64_t(cps.size()), k = as_int(key);
        if (k < 0) k += n;
        if (k < 0 || k >= n) return Value::undefined("string index");
        return Value::string(utf8_encode(cps, size_t(k), size_t(k) + 1));
      }
      if (key.is_string() && is_dunder(key.s)) refuse_attribute(obj, key.s, line);
      if (key.is_string()) return method_of(obj, key.s, line);
      return Value::undefined();
    }
    default:
      if (key.is_string() && is_dunder(key.s)) refuse_attribute(obj, key.s, line);
      return Value::undefined();
  }
}

Value Interpreter::call(const Value& fn, CallArgs& args, int line) {
  if (args.line == 0) args.line = line;
  if (fn.is_undefined()) undefined_error(fn, line);
  if (fn.kind != Kind::Callable) throw TemplateError("'" + fn.type_name() + "' object is not callable", line);
  return fn.fn->fn(*this, args);
}

Value Interpreter::filter(const std::string& name, const Value& v, CallArgs& args, int line, bool) {
  if (!has_filter(name)) throw TemplateError("unknown filter '" + name + "'", line);
  args.line = line;
  budget_.charge_steps(1);
  return apply_filter(*this, name, v, args, line);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (!has_test(name)) throw TemplateError("unknown test '" + name + "'", line);
  args.line = line;
  budget_.charge_steps(1);
  return apply_test(*this, name, v, args, line);
}

// Every expression goes through here: a step, the run-time depth, and the size checks of what it
// made (a string copy counts its bytes); errors from below get this expression's line.
Value Interpreter::eval(const Expr& e) {
  Nested nested(*this, e.line);
  try {
    budget_.charge_steps(1);
    Value v = eval_expr(e);
    if (v.kind == Kind::String) {
      check_string_size(v.s.size(), "a string");
      budget_.charge_bytes(v.s.size());
      budget_.charge_steps(int64_t(v.s.size() / 64));
    } else if (v.kind == Kind::List || v.kind == Kind::Dict) {
      check_value_depth(v.depth(), "a value");
    }
    return v;
  } catch (TemplateError& err) {
    if (!err.line) err.line = e.line;
    throw;
  }
}

Value Interpreter::eval_expr(const Expr& e) {
  switch (e.kind) {
    case EK::Literal: return e.value;
    case EK::Name: return lookup(e.name);
    case EK::ListLit: case EK::TupleLit: {
      List items;
      for (const auto& k : e.kids) items.push_back(eval(*k));
      return e.kind == EK::TupleLit ? Value::make_tuple(std::move(items)) : Value::make_list(std::move(items));
    }
    case EK::DictLit: {
      Value d = Value::make_dict();
      for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
        Value key = eval(*e.kids[k]);
        bool ok = false;
        std::string stored = dict_key(key, &ok);
        if (!ok) throw TemplateError("unsupported construct: dict literal with a " + key.type_name() + " key", e.line);
        d.dict->set(stored, eval(*e.kids[k + 1]));
      }
      return d;
    }
    case EK::Attr: return get_attr(eval(*e.kids[0]), e.name, e.line);
    case EK::Item: return get_item(eval(*e.kids[0]), eval(*e.kids[1]), e.line);
    case EK::Slice: {
      Value obj = eval(*e.kids[0]);
      Value parts[3];
      for (int k = 0; k < 3; ++k) parts[k] = e.kids[size_t(k) + 1] ? eval(*e.kids[size_t(k) + 1]) : Value::none();
      if (obj.is_undefined()) undefined_error(obj, e.line);
      if (obj.is_list()) {
        List out;
        for (size_t k : slice_indices(int64_t(obj.list->size()), parts[0], parts[1], parts[2], e.line))
          out.push_back((*obj.list)[k]);
        return Value::make_list(std::move(out));
      }
      if (obj.is_string()) {
        auto cps = utf8_decode(obj.s);
        std::string out;
        for (size_t k : slice_indices(int64_t(cps.size()), parts[0], parts[1], parts[2], e.line))
          utf8_append(out, cps[k]);
        return Value::string(out);
      }
      throw TemplateError("cannot slice a " + obj.type_name(), e.line);
    }
    case EK::Call: {
      Value fn = eval(*e.kids[0]);
      CallArgs a = eval_args(e, 1);
      return call(fn, a, e.line);
    }
    case EK::Filter: {
      Value v = eval(*e.kids[0]);
      if (!e.soft && !has_filter(e.name)) throw TemplateError("unknown filter '" + e.name + "'", e.line);
      CallArgs a = eval_args(e, 1);
      return filter(e.name, v, a, e.line);
    }
    case EK::Test: {
      Value v = eval(*e.kids[0]);
      CallArgs a = eval_args(e, 1);
      bool r = test(e.name, v, a, e.line);
      return Value::boolean(e.negated ? !r : r);
    }
    case EK::Unary: {
      Value v = eval(*e.kids[0]);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) undefined_error(v, e.line);
      if (!v.is_number()) throw TemplateError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'", e.line);
      if (e.name == "+") return v.kind == Kind::Bool ? Value::integer(v.b) : v;
      if (v.kind == Kind::Float) return Value::number(-v.f);
      if (as_int(v) == INT64_MIN) overflow("-(" + std::to_string(as_int(v)) + ")", e.line);
      return Value::integer(-as_int(v));
    }
    case EK::Binary: return eval_binary(e);
    case EK::Cond: {
      if (eval(*e.kids[1]).truthy()) return eval(*e.kids[0]);
      if (e.kids[2]) return eval(*e.kids[2]);
      return Value::undefined();
    }
  }
  return Value::undefined();
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.kids[0]);
  if (op == "and") return a.truthy() ? eval(*e.kids[1]) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.kids[1]);
  Value b = eval(*e.kids[1]);
  return binary_op(op, a, b, e.line);
}

Value Interpreter::binary_op(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "~") {
    std::string x = a.str(), y = b.str();
    check_string_size(x.size() + y.size(), "the result of '~'");
    return Value::string(x + y);
  }
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "in" || op == "not in") {
    bool r = false;
    if (b.is_string()) {
      if (!a.is_string()) throw TemplateError("'in <string>' requires string as left operand, not " + a.type_name(), line);
      budget_.charge_steps(int64_t(b.s.size() / 64));
      r = b.s.find(a.s) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& x : *b.list) r = r || equals(a, x);
    } else if (b.is_mapping()) {
      bool ok = false;
      std::string k = dict_key(a, &ok);
      r = ok && b.dict->find(k) != nullptr;
    } else if (!b.is_undefined()) {
      throw TemplateError("argument of type '" + b.type_name() + "' is not iterable", line);
    }
    return Value::boolean(op == "in" ? r : !r);
  }
  if (op == "<") return Value::boolean(less(a, b, line));
  if (op == ">") return Value::boolean(less(b, a, line));
  if (op == "<=") return Value::boolean(!less(b, a, line));
  if (op == ">=") return Value::boolean(!less(a, b, line));
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  auto type_error = [&]() -> Value {
    throw TemplateError("TypeError: unsupported operand types for " + op + ": '" + a.type_name() + "' and '" +
                            b.type_name() + "'", line);
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string_size(a.s.size() + b.s.size(), "the result of '+'");
      if (!a.markup && !b.markup) return Value::string(a.s + b.s);
      Value r = Value::string((a.markup ? a.s : html_escape(a.s)) + (b.markup ? b.s : html_escape(b.s)));
      r.markup = true;  // markupsafe: Markup + str escapes the str
      return r;
    }
    if (a.is_list() && b.is_list()) {
      check_list_size(a.list->size() + b.list->size(), "the result of '+'");
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(out));
    }
    if (!a.is_number() || !b.is_number()) return type_error();
    if (a.kind == Kind::Float || b.kind == Kind::Float) return Value::number(a.as_double() + b.as_double());
    int64_t r;
    if (__builtin_add_overflow(as_int(a), as_int(b), &r))
      overflow(std::to_string(as_int(a)) + " + " + std::to_string(as_int(b)), line);
    return Value::integer(r);
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    if (seq) {
      const Value& n = seq == &a ? b : a;
      if (n.kind != Kind::Int && n.kind != Kind::Bool) return type_error();
      int64_t times = std::max<int64_t>(0, as_int(n));
      // Nothing to repeat: no loop ('' * 2**62 passed the size checks and spun for ever).
      if (seq->is_string() ? seq->s.empty() : seq->list->empty()) times = 0;
      if (seq->is_string()) {
        check_string_size(saturating_mul(seq->s.size(), times), "string repetition ('...' * n)");
        std::string out;
        out.reserve(seq->s.size() * size_t(times));
        for (int64_t k = 0; k < times; ++k) out += seq->s;
        return Value::string(out);
      }
      check_list_size(saturating_mul(seq->list->size(), times), "list repetition ([...] * n)");
      size_t bytes = 0;  // the copies' strings: checked before they are made, counted by make_list
      for (const Value& x : *seq->list) bytes += x.s.size();
      check_bytes_left(saturating_mul(bytes, times), "list repetition ([...] * n)");
      List out;
      out.reserve(seq->list->size() * size_t(times));
      for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq->list->begin(), seq->list->end());
      return Value::make_list(std::move(out));
    }
  }
  if (op == "%" && a.is_string()) throw TemplateError("unsupported construct: '%' string formatting", line);
  if (!a.is_number() || !b.is_number()) return type_error();
  bool fl = a.kind == Kind::Float || b.kind == Kind::Float;
  double x = a.as_double(), y = b.as_double();
  int64_t r;
  if (op == "-") {
    if (fl) return Value::number(x - y);
    if (__builtin_sub_overflow(as_int(a), as_int(b), &r))
      overflow(std::to_string(as_int(a)) + " - " + std::to_string(as_int(b)), line);
    return Value::integer(r);
  }
  if (op == "*") {
    if (fl) return Value::number(x * y);
    if (__builtin_mul_overflow(as_int(a), as_int(b), &r))
      overflow(std::to_string(as_int(a)) + " * " + std::to_string(as_int(b)), line);
    return Value::integer(r);
  }
  if (op == "/") {
    if (y == 0) throw TemplateError("ZeroDivisionError: division by zero", line);
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero", line);
    if (fl) {
      double q = std::floor(x / y);
      return op == "//" ? Value::number(q) : Value::number(x - q * y);
    }
    int64_t p = as_int(a), q = as_int(b);
    if (p == INT64_MIN && q == -1) {  // the one quotient that does not fit (and traps in C++)
      if (op == "%") return Value::integer(0);
      overflow(std::to_string(p) + " // -1", line);
    }
    int64_t d = p / q, m = p % q;
    if (m != 0 && ((m < 0) != (q < 0))) { --d; m += q; }
    return op == "//" ? Value::integer(d) : Value::integer(m);
  }
  if (op == "**") {
    if (!fl && as_int(b) >= 0) return Value::integer(int_pow(as_int(a), as_int(b), line));
    return Value::number(std::pow(x, y));
  }
  throw TemplateError("unsupported operator '" + op + "'", line);
}

}  // namespace ggflow::jinja
