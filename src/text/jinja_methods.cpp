// Whitelisted methods of strings, dicts and lists. This is the sandbox's whole attribute surface:
// anything not listed resolves to undefined; mutating methods (list.append, dict.pop, ...) raise a
// SecurityError when called, as in Jinja2's ImmutableSandboxedEnvironment.
#include <algorithm>
#include <set>

#include "text/jinja_interp.h"
#include "text/jinja_strings.h"

namespace ggflow::jinja {
namespace {

using Fn = std::function<Value(Interpreter&, CallArgs&)>;

Value bound(const Value& obj, const std::string& name, Fn f) {
  (void)obj;
  return Value::callable(name, std::move(f));
}

std::string arg_str(const CallArgs& a, size_t pos, const char* name) {
  Value v = a.get(pos, name);
  if (!v.is_string()) throw TemplateError(std::string("argument '") + name + "' must be a string, not " + v.type_name(), a.line);
  return v.s;
}

long arg_long(const CallArgs& a, size_t pos, const char* name, long dflt) {
  Value v = a.get(pos, name);
  if (v.is_undefined() || v.is_none()) return dflt;
  if (v.kind != Kind::Int) throw TemplateError(std::string("argument '") + name + "' must be an integer", a.line);
  return long(v.i);
}

Value string_list(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::make_list(std::move(out));
}

// str.format with "{}", "{0}", "{name}" fields (no format specs).
std::string py_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') { out += '{'; ++k; continue; }
    if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') { out += '}'; ++k; continue; }
    if (c != '{') { out += c; continue; }
    size_t close = fmt.find('}', k);
    if (close == std::string::npos) throw TemplateError("str.format: single '{' in format string", a.line);
    std::string field = fmt.substr(k + 1, close - k - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      throw TemplateError("unsupported construct: str.format field '{" + field + "}'", a.line);
    Value v;
    if (field.empty()) {
      v = a.get(auto_idx++, "");
    } else if (std::all_of(field.begin(), field.end(), [](char c) { return std::isdigit((unsigned char)c); })) {
      v = field.size() <= 9 ? a.get(std::stoul(field), "") : Value::undefined();
    } else {
      v = a.get(size_t(-1), field.c_str());
    }
    if (v.is_undefined()) throw TemplateError("str.format: missing argument for '{" + field + "}'", a.line);
    std::string text = v.str();
    check_string_size(out.size() + text.size(), "the result of str.format()");
    out += text;
    k = close;
  }
  return out;
}

bool affix_match(const std::string& s, const Value& what, bool prefix, int line) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) throw TemplateError("startswith/endswith take a string or a tuple of strings", line);
    if (p.s.size() > s.size()) return false;
    return prefix ? s.compare(0, p.s.size(), p.s) == 0 : s.compare(s.size() - p.s.size(), p.s.size(), p.s) == 0;
  };
  if (what.is_list()) {
    for (const Value& p : *what.list)
      if (one(p)) return true;
    return false;
  }
  return one(what);
}

Value string_method(const Value& obj, const std::string& name, int line) {
  charge_bytes(obj.s.size());  // the method keeps its own copy
  charge_steps(int64_t(obj.s.size() / 64));
  const std::string s = obj.s;
  auto pred = [&](bool (*f)(uint32_t)) {
    return bound(obj, name, [s, f](Interpreter&, CallArgs&) {
      auto cps = utf8_decode(s);
      bool all = !cps.empty();
      for (uint32_t c : cps) all = all && f(c);
      return Value::boolean(all);
    });
  };
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bound(obj, name, [s, prefix, line](Interpreter&, CallArgs& a) {
      return Value::boolean(affix_match(s, a.get(0, "prefix"), prefix, line));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return bound(obj, name, [s, l, r](Interpreter&, CallArgs& a) {
      Value c = a.get(0, "chars");
      std::string chars = c.is_string() ? c.s : "";
      return Value::string(pystr::strip(s, c.is_string() ? &chars : nullptr, l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bound(obj, name, [s, right](Interpreter&, CallArgs& a) {
      Value sep = a.get(0, "sep");
      std::string sp = sep.is_string() ? sep.s : "";
      long maxsplit = arg_long(a, 1, "maxsplit", -1);
      const std::string* p = sep.is_string() ? &sp : nullptr;
      return string_list(right ? pystr::rsplit(s, p, maxsplit) : pystr::split(s, p, maxsplit));
    });
  }
  if (name == "splitlines")
    return bound(obj, name, [s](Interpreter&, CallArgs&) { return string_list(pystr::splitlines(s)); });
  if (name == "replace")
    return bound(obj, name, [s](Interpreter&, CallArgs& a) {
      return Value::string(pystr::replace(s, arg_str(a, 0, "old"), arg_str(a, 1, "new"), arg_long(a, 2, "count", -1)));
    });
  if (name == "lower") return bound(obj, name, [s](Interpreter&, CallArgs&) { return Value::string(pystr::lower(s)); });
  if (name == "upper") return bound(obj, name, [s](Interpreter&, CallArgs&) { return Value::string(pystr::upper(s)); });
  if (name == "title") return bound(obj, name, [s](Interpreter&, CallArgs&) { return Value::string(pystr::title(s)); });
  if (name == "capitalize")
    return bound(obj, name, [s](Interpreter&, CallArgs&) { return Value::string(pystr::capitalize(s)); });
  if (name == "format")
    return bound(obj, name, [s](Interpreter&, CallArgs& a) { return Value::string(py_format(s, a)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return bound(obj, name, [s, name](Interpreter&, CallArgs& a) {
      std::string sub = arg_str(a, 0, "sub");
      charge_steps(int64_t(s.size() / 16));  // a scan of s
      if (name == "count") {
        if (sub.empty()) return Value::integer(int64_t(pystr::cp_length(s)) + 1);
        int64_t n = 0;
        for (size_t k = s.find(sub); k != std::string::npos; k = s.find(sub, k + sub.size())) ++n;
        return Value::integer(n);
      }
      size_t k = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
      if (k == std::string::npos) {
        if (name == "index" || name == "rindex") throw TemplateError("ValueError: substring not found", a.line);
        return Value::integer(-1);
      }
      return Value::integer(int64_t(pystr::cp_length(s.substr(0, k))));
    });
  }
  if (name == "join")
    return bound(obj, name, [s](Interpreter&, CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& v : a.get(0, "iterable").iterate()) {
        if (!v.is_string()) throw TemplateError("str.join: expected str instance, " + v.type_name() + " found", a.line);
        check_string_size(out.size() + (first ? 0 : s.size()) + v.s.size(), "the result of str.join()");
        out += (first ? "" : s) + v.s;
        first = false;
      }
      return Value::string(out);
    });
  if (name == "isdigit") return pred([](uint32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isspace") return pred(is_py_space);
  if (name == "isalpha")
    return pred([](uint32_t c) { return pystr::lower(std::string(1, char(c))) != pystr::upper(std::string(1, char(c))) && c < 0x80; });
  if (name == "isalnum")
    return pred([](uint32_t c) { return c < 0x80 && std::isalnum(int(c)) != 0; });
  if (name == "islower" || name == "isupper") {
    bool want_lower = name == "islower";
    return bound(obj, name, [s, want_lower](Interpreter&, CallArgs&) {
      bool cased = false, ok = true;
      for (uint32_t c : utf8_decode(s)) {
        std::string one;
        utf8_append(one, c);
        bool lo = pystr::upper(one) != one, up = pystr::lower(one) != one;
        cased = cased || lo || up;
        ok = ok && (want_lower ? !up : !lo);
      }
      return Value::boolean(cased && ok);
    });
  }
  return Value::undefined(name);
}

Value unsafe(const std::string& type, const std::string& name) {
  return Value::callable(name, [type, name](Interpreter&, CallArgs& a) -> Value {
    throw TemplateError("SecurityError: access to attribute '" + name + "' of '" + type + "' object is unsafe", a.line);
  });
}

}  // namespace

Value method_of(const Value& obj, const std::string& name, int line) {
  static const std::set<std::string> dict_mutators = {"pop", "popitem", "update", "clear", "setdefault"};
  static const std::set<std::string> list_mutators = {"append", "pop", "extend", "insert", "remove", "sort",
                                                      "reverse", "clear"};
  if (obj.is_string()) return string_method(obj, name, line);
  if (obj.is_dict()) {
    auto d = obj.dict;
    if (name == "get")
      return Value::callable(name, [d](Interpreter&, CallArgs& a) {
        Value k = a.get(0, "key");
        bool ok = false;
        std::string key = dict_key(k, &ok);
        const Value* v = ok ? d->find(key) : nullptr;
        return v ? *v : a.get(1, "default", Value::none());
      });
    if (name == "items" || name == "keys" || name == "values") {
      return Value::callable(name, [d, name](Interpreter&, CallArgs&) {
        List out;
        for (const auto& [k, v] : d->items) {
          if (name == "items") out.push_back(Value::make_tuple({key_value(k), v}));
          else out.push_back(name == "keys" ? key_value(k) : v);
        }
        return Value::make_list(std::move(out));
      });
    }
    if (name == "copy")
      return Value::callable(name, [d](Interpreter&, CallArgs&) {
        Value c = Value::make_dict();
        *c.dict = *d;
        return c;
      });
    if (dict_mutators.count(name)) return unsafe("dict", name);
    return Value::undefined(name);
  }
  if (obj.is_list()) {
    auto l = obj.list;
    if (name == "index" || name == "count")
      return Value::callable(name, [l, name](Interpreter&, CallArgs& a) {
        Value x = a.get(0, "value");
        int64_t n = 0;
        for (size_t k = 0; k < l->size(); ++k) {
          if (!equals((*l)[k], x)) continue;
          if (name == "index") return Value::integer(int64_t(k));
          ++n;
        }
        if (name == "index") throw TemplateError("ValueError: value is not in list", a.line);
        return Value::integer(n);
      });
    if (list_mutators.count(name)) return unsafe("list", name);
    return Value::undefined(name);
  }
  return Value::undefined(name);
}

}  // namespace ggflow::jinja
