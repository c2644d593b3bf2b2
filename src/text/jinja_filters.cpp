// Filters and tests, with Jinja2's semantics (and transformers' `tojson`). Results that are Python
// generators in Jinja2 (map, select*, reject*, unique, items, reverse of a list) are lists marked
// `generator`: iterable and truthy like a generator, but not printable, indexable or serializable.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>

#include "text/jinja_interp.h"
#include "text/jinja_strings.h"

namespace ggflow::jinja {
namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);

Value gen(List items) {
  Value v = Value::make_list(std::move(items));
  v.generator = true;
  return v;
}

// Jinja's attribute getter: "a.b.0" walks items; the result may be undefined.
Value get_path(Interpreter& in, Value v, const std::string& path, int line) {
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    // All digits: an index (Jinja's environment.getitem tries an int first); too long for an int: a key.
    Value key = !part.empty() && part.size() <= 18 && std::all_of(part.begin(), part.end(), ::isdigit)
                    ? Value::integer(std::stoll(part)) : Value::string(part);
    if (v.is_undefined()) return v;
    v = in.get_item(v, key, line);
    if (e == std::string::npos) return v;
    b = e + 1;
  }
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonOptions o;
  Value indent = a.get(1, "indent");
  if (indent.kind == Kind::Int) o.indent = int(std::clamp<int64_t>(indent.i, -1, INT32_MAX));
  o.item_sep = o.indent >= 0 ? "," : ", ";
  o.key_sep = ": ";
  Value seps = a.get(2, "separators");
  if (seps.is_list() && seps.list->size() == 2) {
    o.item_sep = (*seps.list)[0].str();
    o.key_sep = (*seps.list)[1].str();
  }
  o.sort_keys = a.get(3, "sort_keys").truthy();
  o.ensure_ascii = a.get(0, "ensure_ascii").truthy();
  if (v.is_undefined()) throw TemplateError("TypeError: Object of type Undefined is not JSON serializable", a.line);
  return Value::string(to_json(v, o));
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  switch (v.kind) {
    case Kind::Undefined: return Value::integer(0);
    case Kind::String: return Value::integer(int64_t(pystr::cp_length(v.s)));
    case Kind::List:
      if (v.generator) throw TemplateError("TypeError: object of type 'generator' has no len()", a.line);
      return Value::integer(int64_t(v.list->size()));
    case Kind::Dict: return Value::integer(int64_t(v.dict->items.size()));
    default: throw TemplateError("TypeError: object of type '" + v.type_name() + "' has no len()", a.line);
  }
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  Value c = a.get(0, "chars");
  std::string chars = c.is_string() ? c.s : "";
  return Value::string(pystr::strip(v.str(), c.is_string() ? &chars : nullptr, true, true));
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::string(v.str()); }
Value f_safe(Interpreter&, const Value& v, CallArgs&) {
  Value m = Value::string(v.str());
  m.markup = true;
  return m;
}
Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value::string(pystr::lower(v.str())); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value::string(pystr::upper(v.str())); }
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value::string(pystr::capitalize(v.str())); }
Value f_title(Interpreter&, const Value& v, CallArgs&) { return Value::string(pystr::title(v.str())); }

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  Value dflt = a.get(0, "default_value", Value::string(""));
  bool boolean = a.get(1, "boolean").truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
  return v;
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  std::string sep = a.get(0, "d", Value::string("")).str();
  Value attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : v.iterate()) {
    std::string item = (attr.is_undefined() ? x : get_path(in, x, attr.str(), a.line)).str();
    check_string_size(out.size() + (first ? 0 : sep.size()) + item.size(), "the result of join");
    if (!first) out += sep;
    out += item;
    first = false;
  }
  return Value::string(out);
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return gen({});
  if (!v.is_mapping()) throw TemplateError("items filter expects a mapping, got " + v.type_name(), a.line);
  List out;
  for (const auto& [k, x] : v.dict->items) out.push_back(Value::make_tuple({key_value(k), x}));
  return gen(std::move(out));
}

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  Value count = a.get(2, "count");
  return Value::string(pystr::replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                      count.kind == Kind::Int ? long(count.i) : -1));
}

Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::make_list(v.iterate()); }

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  List items = v.iterate();
  return items.empty() ? Value::undefined("first") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& a) {
  if (v.generator) throw TemplateError("TypeError: last filter needs a sequence, not a generator", a.line);
  List items = v.iterate();
  return items.empty() ? Value::undefined("last") : items.back();
}

Value sort_key(const Value& x, bool case_sensitive) {
  return !case_sensitive && x.is_string() ? Value::string(pystr::lower(x.s)) : x;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_mapping()) throw TemplateError("dictsort filter expects a mapping", a.line);
  bool cs = a.get(0, "case_sensitive").truthy();
  bool by_value = a.get(1, "by", Value::string("key")).str() == "value";
  bool reverse = a.get(2, "reverse").truthy();
  List items;
  for (const auto& [k, x] : v.dict->items) items.push_back(Value::make_tuple({key_value(k), x}));
  std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
    const Value& x = (*p.list)[by_value ? 1 : 0];
    const Value& y = (*q.list)[by_value ? 1 : 0];
    return reverse ? less(sort_key(y, cs), sort_key(x, cs), a.line) : less(sort_key(x, cs), sort_key(y, cs), a.line);
  });
  return Value::make_list(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  bool reverse = a.get(0, "reverse").truthy();
  bool cs = a.get(1, "case_sensitive").truthy();
  Value attr = a.get(2, "attribute");
  List items = v.iterate();
  auto key = [&](const Value& x) {
    return sort_key(attr.is_undefined() ? x : get_path(in, x, attr.str(), a.line), cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
    return reverse ? less(key(q), key(p), a.line) : less(key(p), key(q), a.line);
  });
  return Value::make_list(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  bool cs = a.get(0, "case_sensitive").truthy();
  Value attr = a.get(1, "attribute");
  List out, seen;
  for (const Value& x : v.iterate()) {
    Value k = sort_key(attr.is_undefined() ? x : get_path(in, x, attr.str(), a.line), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return gen(std::move(out));
}

Value f_minmax(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool cs = a.get(0, "case_sensitive").truthy();
  Value attr = a.get(1, "attribute");
  List items = v.iterate();
  if (items.empty()) return Value::undefined(want_max ? "max" : "min");
  size_t best = 0;
  auto key = [&](const Value& x) { return sort_key(attr.is_undefined() ? x : get_path(in, x, attr.str(), a.line), cs); };
  for (size_t k = 1; k < items.size(); ++k)
    if (want_max ? less(key(items[best]), key(items[k]), a.line) : less(key(items[k]), key(items[best]), a.line)) best = k;
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return f_minmax(in, v, a, false); }
Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return f_minmax(in, v, a, true); }

// select/reject/selectattr/rejectattr share this: `attr` empty means the item itself.
Value select_common(Interpreter& in, const Value& v, CallArgs& a, bool with_attr, bool keep) {
  size_t first = with_attr ? 1 : 0;
  std::string attr = with_attr ? a.get(0, "attribute").str() : "";
  List out;
  if (!v.truthy()) return gen({});  // Jinja: `if value: for item in value`
  for (const Value& x : v.iterate()) {
    Value item = with_attr ? get_path(in, x, attr, a.line) : x;
    bool r;
    if (a.positional.size() <= first) {
      r = item.truthy();
    } else {
      CallArgs ta;
      ta.line = a.line;
      ta.positional.assign(a.positional.begin() + long(first) + 1, a.positional.end());
      r = in.test(a.positional[first].str(), item, ta, a.line);
    }
    if (r == keep) out.push_back(x);
  }
  return gen(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_common(in, v, a, true, false); }

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return gen({});  // Jinja: `if value: for item in value`
  Value attr = a.get(size_t(-1), "attribute");
  if (!attr.is_undefined()) {
    Value dflt = a.get(size_t(-1), "default");
    for (const Value& x : v.iterate()) {
      Value r = get_path(in, x, attr.str(), a.line);
      out.push_back(r.is_undefined() && !dflt.is_undefined() ? dflt : r);
    }
    return gen(std::move(out));
  }
  if (a.positional.empty()) throw TemplateError("map filter needs a filter name or attribute=", a.line);
  std::string name = a.positional[0].str();
  for (const Value& x : v.iterate()) {
    CallArgs fa;
    fa.line = a.line;
    fa.positional.assign(a.positional.begin() + 1, a.positional.end());
    fa.keywords = a.keywords;
    out.push_back(in.filter(name, x, fa, a.line));
  }
  return gen(std::move(out));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  Value w = a.get(0, "width", Value::integer(4));
  if (!w.is_string() && w.kind != Kind::Int && w.kind != Kind::Bool)
    throw TemplateError("indent width must be an integer or a string, not " + w.type_name(), a.line);
  size_t width = w.is_string() ? w.s.size() : size_t(std::max<int64_t>(0, w.kind == Kind::Bool ? int64_t(w.b) : w.i));
  check_string_size(width, "the indentation of indent()");
  std::string ind = w.is_string() ? w.s : std::string(width, ' ');
  bool first = a.get(1, "first").truthy(), blank = a.get(2, "blank").truthy();
  std::string text = v.str();
  // The result: the text, plus `ind` on each line at most.
  size_t lines_in = size_t(std::count(text.begin(), text.end(), '\n')) + 2;
  if (width && lines_in > (SIZE_MAX / 2) / width) check_string_size(SIZE_MAX, "the result of indent()");
  check_string_size(text.size() + lines_in * width, "the result of indent()");
  auto lines = pystr::splitlines(text + "\n");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind) + lines[k];
  }
  return Value::string(first ? ind + rv : rv);
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  Value dflt = a.get(0, "default", Value::integer(0));
  if (v.kind == Kind::Int) return v;
  if (v.kind == Kind::Bool) return Value::integer(v.b);
  // A float outside the int64 range (|x| >= 2**63) has no int here: the default, as for inf.
  auto from_double = [&](double d) { return std::isfinite(d) && std::fabs(d) < 9223372036854775808.0 ? Value::integer(int64_t(d)) : dflt; };
  if (v.kind == Kind::Float) return from_double(v.f);
  if (v.is_string()) {
    std::string s = pystr::strip(v.s, nullptr, true, true);
    try {
      size_t used = 0;
      long long x = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::integer(x);
      double d = std::stod(s, &used);
      if (used == s.size()) return from_double(d);
    } catch (...) {  // std::invalid_argument / std::out_of_range: not a number, or too big
    }
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  Value dflt = a.get(0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    try {
      size_t used = 0;
      std::string s = pystr::strip(v.s, nullptr, true, true);
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::number(d);
    } catch (...) {
    }
  }
  return dflt;
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.kind == Kind::Int) {
    if (v.i == INT64_MIN) throw TemplateError("integer overflow: abs(" + std::to_string(v.i) + ") does not fit in 64 bits", a.line);
    return Value::integer(v.i < 0 ? -v.i : v.i);
  }
  throw TemplateError("abs filter expects a number", a.line);
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  int64_t prec = a.get(0, "precision", Value::integer(0)).i;
  std::string method = a.get(1, "method", Value::string("common")).str();
  double m = std::pow(10.0, double(prec)), x = v.as_double() * m;
  double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
  return Value::number(r / m);
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  Value attr = a.get(0, "attribute");
  Value total = a.get(1, "start", Value::integer(0));
  for (const Value& x : v.iterate()) {
    Value y = attr.is_undefined() ? x : get_path(in, x, attr.str(), a.line);
    if (!y.is_number() || !total.is_number()) throw TemplateError("sum filter expects numbers", a.line);
    if (total.kind == Kind::Float || y.kind == Kind::Float) {
      total = Value::number(total.as_double() + y.as_double());
      continue;
    }
    int64_t r, p = total.kind == Kind::Bool ? total.b : total.i, q = y.kind == Kind::Bool ? y.b : y.i;
    if (__builtin_add_overflow(p, q, &r)) throw TemplateError("integer overflow: the sum does not fit in 64 bits", a.line);
    total = Value::integer(r);
  }
  return total;
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto cps = utf8_decode(v.s);
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps, 0, cps.size()));
  }
  List items = v.iterate();
  std::reverse(items.begin(), items.end());
  return gen(std::move(items));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  return Value::integer(int64_t(pystr::split(v.str(), nullptr, -1).size()));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> m = {
      {"tojson", f_tojson}, {"length", f_length}, {"count", f_length}, {"trim", f_trim},
      {"string", f_string}, {"safe", f_safe}, {"lower", f_lower}, {"upper", f_upper},
      {"capitalize", f_capitalize}, {"title", f_title}, {"default", f_default}, {"d", f_default},
      {"join", f_join}, {"items", f_items}, {"replace", f_replace}, {"list", f_list},
      {"first", f_first}, {"last", f_last}, {"dictsort", f_dictsort}, {"sort", f_sort},
      {"unique", f_unique}, {"min", f_min}, {"max", f_max}, {"select", f_select}, {"reject", f_reject},
      {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map}, {"indent", f_indent},
      {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"sum", f_sum},
      {"reverse", f_reverse}, {"wordcount", f_wordcount},
  };
  return m;
}

bool t_odd_even(const Value& v, bool odd, int line) {
  if (v.kind != Kind::Int) throw TemplateError("odd/even test expects an integer", line);
  return (v.i % 2 != 0) == odd;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, int line) {
  args.line = line;
  try {
    return filters().at(name)(in, v, args);
  } catch (TemplateError& e) {
    if (!e.line) e.line = line;
    throw;
  }
}

bool has_test(const std::string& name) {
  static const char* names[] = {"defined", "undefined", "none", "string", "mapping", "iterable", "sequence",
                                "number", "integer", "float", "boolean", "true", "false", "callable", "odd",
                                "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "<", "le", "<=",
                                "gt", ">", "ge", ">=", "in", "sameas", "lower", "upper"};
  return std::find_if(std::begin(names), std::end(names), [&](const char* n) { return name == n; }) != std::end(names);
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a, int line) {
  (void)in;
  Value x = a.get(0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_string() || (v.is_list() && !v.generator) || v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "float") return v.kind == Kind::Float;
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "true") return v.kind == Kind::Bool && v.b;
  if (name == "false") return v.kind == Kind::Bool && !v.b;
  if (name == "callable") return v.kind == Kind::Callable;
  if (name == "odd") return t_odd_even(v, true, line);
  if (name == "even") return t_odd_even(v, false, line);
  if (name == "divisibleby") {
    if (v.kind != Kind::Int || x.kind != Kind::Int || x.i == 0) throw TemplateError("divisibleby expects integers", line);
    return v.i % x.i == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, x);
  if (name == "ne" || name == "!=") return !equals(v, x);
  if (name == "lt" || name == "<") return less(v, x, line);
  if (name == "gt" || name == ">") return less(x, v, line);
  if (name == "le" || name == "<=") return !less(x, v, line);
  if (name == "ge" || name == ">=") return !less(v, x, line);
  if (name == "in") {
    if (x.is_string()) return v.is_string() && x.s.find(v.s) != std::string::npos;
    if (x.is_list()) return std::any_of(x.list->begin(), x.list->end(), [&](const Value& y) { return equals(v, y); });
    if (x.is_mapping()) { bool ok; std::string k = dict_key(v, &ok); return ok && x.dict->find(k); }
    throw TemplateError("'in' test expects a container", line);
  }
  if (name == "sameas") {
    if (v.kind != x.kind) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind == Kind::Bool) return v.b == x.b;
    if (v.is_list()) return v.list == x.list;
    if (v.is_mapping()) return v.dict == x.dict;
    return equals(v, x);
  }
  if (name == "lower") return v.is_string() && pystr::lower(v.s) == v.s;
  if (name == "upper") return v.is_string() && pystr::upper(v.s) == v.s;
  throw TemplateError("unknown test '" + name + "'", line);
}

}  // namespace ggflow::jinja
