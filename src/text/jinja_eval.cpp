// Expressions of the interpreter: names, literals, attribute/item/slice access (sandboxed: only
// our own values and whitelisted methods), calls, filters, tests and operators with Python
// semantics. Using an undefined value where Python would raise (attribute, arithmetic, call)
// raises like Jinja2's default Undefined does.
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

// Python slice indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int line) {
  int64_t st = step.is_none() || step.is_undefined() ? 1 : as_int(step);
  if (st == 0) throw TemplateError("slice step cannot be zero", line);
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
        if (const Value* v = obj.dict->find(k)) return *v;
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
      if (key.is_string()) return method_of(obj, key.s, line);
      return Value::undefined();
    }
    default: return Value::undefined();
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
  return apply_filter(*this, name, v, args, line);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args, int line) {
  if (!has_test(name)) throw TemplateError("unknown test '" + name + "'", line);
  args.line = line;
  return apply_test(*this, name, v, args, line);
}

Value Interpreter::eval(const Expr& e) {
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
  if (op == "~") return Value::string(a.str() + b.str());
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "in" || op == "not in") {
    bool r = false;
    if (b.is_string()) {
      if (!a.is_string()) throw TemplateError("'in <string>' requires string as left operand, not " + a.type_name(), e.line);
      r = b.s.find(a.s) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& x : *b.list) r = r || equals(a, x);
    } else if (b.is_mapping()) {
      bool ok = false;
      std::string k = dict_key(a, &ok);
      r = ok && b.dict->find(k) != nullptr;
    } else if (!b.is_undefined()) {
      throw TemplateError("argument of type '" + b.type_name() + "' is not iterable", e.line);
    }
    return Value::boolean(op == "in" ? r : !r);
  }
  if (op == "<") return Value::boolean(less(a, b, e.line));
  if (op == ">") return Value::boolean(less(b, a, e.line));
  if (op == "<=") return Value::boolean(!less(b, a, e.line));
  if (op == ">=") return Value::boolean(!less(a, b, e.line));
  if (a.is_undefined()) undefined_error(a, e.line);
  if (b.is_undefined()) undefined_error(b, e.line);
  auto type_error = [&]() -> Value {
    throw TemplateError("TypeError: unsupported operand types for " + op + ": '" + a.type_name() + "' and '" +
                            b.type_name() + "'", e.line);
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (!a.markup && !b.markup) return Value::string(a.s + b.s);
      Value r = Value::string((a.markup ? a.s : html_escape(a.s)) + (b.markup ? b.s : html_escape(b.s)));
      r.markup = true;  // markupsafe: Markup + str escapes the str
      return r;
    }
    if (a.is_list() && b.is_list()) {
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(out));
    }
    if (!a.is_number() || !b.is_number()) return type_error();
    if (a.kind == Kind::Float || b.kind == Kind::Float) return Value::number(a.as_double() + b.as_double());
    return Value::integer(as_int(a) + as_int(b));
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    if (seq) {
      const Value& n = seq == &a ? b : a;
      if (n.kind != Kind::Int && n.kind != Kind::Bool) return type_error();
      int64_t times = std::max<int64_t>(0, as_int(n));
      if (seq->is_string()) {
        if (int64_t(seq->s.size()) * times > int64_t(limits_.max_output))
          throw TemplateError("string repetition exceeds the output size limit", e.line);
        std::string out;
        for (int64_t k = 0; k < times; ++k) out += seq->s;
        return Value::string(out);
      }
      if (int64_t(seq->list->size()) * times > limits_.max_range)
        throw TemplateError("list repetition too big", e.line);
      List out;
      for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq->list->begin(), seq->list->end());
      return Value::make_list(std::move(out));
    }
  }
  if (op == "%" && a.is_string()) throw TemplateError("unsupported construct: '%' string formatting", e.line);
  if (!a.is_number() || !b.is_number()) return type_error();
  bool fl = a.kind == Kind::Float || b.kind == Kind::Float;
  double x = a.as_double(), y = b.as_double();
  if (op == "-") return fl ? Value::number(x - y) : Value::integer(as_int(a) - as_int(b));
  if (op == "*") return fl ? Value::number(x * y) : Value::integer(as_int(a) * as_int(b));
  if (op == "/") {
    if (y == 0) throw TemplateError("ZeroDivisionError: division by zero", e.line);
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero", e.line);
    if (fl) {
      double q = std::floor(x / y);
      return op == "//" ? Value::number(q) : Value::number(x - q * y);
    }
    int64_t p = as_int(a), q = as_int(b);
    int64_t d = p / q, r = p % q;
    if (r != 0 && ((r < 0) != (q < 0))) { --d; r += q; }
    return op == "//" ? Value::integer(d) : Value::integer(r);
  }
  if (op == "**") {
    if (!fl && as_int(b) >= 0) {
      int64_t r = 1, base = as_int(a);
      for (int64_t k = 0; k < as_int(b) && k < 64; ++k) r *= base;
      return Value::integer(r);
    }
    return Value::number(std::pow(x, y));
  }
  throw TemplateError("unsupported operator '" + op + "'", e.line);
}

}  // namespace ggflow::jinja
