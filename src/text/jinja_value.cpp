// Value semantics of the template engine (see jinja_value.h): Python truthiness, str/repr,
// equality and ordering, JSON in (ordered, as Python dicts) and out (json.dumps).
#include "text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ggflow::jinja {

namespace {
thread_local Budget* g_budget = nullptr;
}

Budget* Budget::current() { return g_budget; }
Budget::Install::Install(Budget& b) : saved_(g_budget) { g_budget = &b; }
Budget::Install::~Install() { g_budget = saved_; }

void Budget::charge_steps(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    throw TemplateError("evaluation step limit exceeded: the template took more than " +
                        std::to_string(limits_.max_steps) + " steps (Limits::max_steps)");
}

void Budget::charge_bytes(size_t n) {
  bytes_ += int64_t(std::min<size_t>(n, size_t(INT64_MAX / 2)));
  if (bytes_ > limits_.max_bytes)
    throw TemplateError("memory limit exceeded: the template built more than " + std::to_string(limits_.max_bytes) +
                        " bytes of strings (Limits::max_bytes)");
}

void charge_steps(int64_t n) {
  if (g_budget) g_budget->charge_steps(n);
}

void charge_bytes(size_t n) {
  if (g_budget && n) g_budget->charge_bytes(n);
}

void check_string_size(size_t bytes, const char* what) {
  if (g_budget && bytes > g_budget->limits().max_string)
    throw TemplateError(std::string("string size limit exceeded: ") + what + " would be " + std::to_string(bytes) +
                        " bytes, over the limit of " + std::to_string(g_budget->limits().max_string) +
                        " (Limits::max_string)");
}

void check_list_size(size_t items, const char* what) {
  if (g_budget && items > size_t(g_budget->limits().max_items))
    throw TemplateError(std::string("list size limit exceeded: ") + what + " would have " + std::to_string(items) +
                        " items, over the limit of " + std::to_string(g_budget->limits().max_items) +
                        " (Limits::max_items)");
}

void check_bytes_left(size_t bytes, const char* what) {
  if (g_budget && int64_t(std::min<size_t>(bytes, size_t(INT64_MAX / 2))) > g_budget->limits().max_bytes - g_budget->bytes())
    throw TemplateError(std::string("memory limit exceeded: ") + what + " would copy " + std::to_string(bytes) +
                        " bytes of strings, past the limit of " + std::to_string(g_budget->limits().max_bytes) +
                        " bytes for a render (Limits::max_bytes)");
}

void check_value_depth(int depth, const char* what) {
  if (g_budget && depth > g_budget->limits().max_nesting)
    throw TemplateError(std::string("nesting limit exceeded: ") + what + " would nest lists/dicts " +
                        std::to_string(depth) + " deep, over the limit of " +
                        std::to_string(g_budget->limits().max_nesting) + " (Limits::max_nesting)");
}

// Steps and bytes of copying `items` (a Value copy copies its string; lists and dicts are shared).
static void charge_copy(const List& items) {
  if (!g_budget) return;
  size_t bytes = 0;
  for (const Value& x : items) bytes += x.s.size();
  g_budget->charge_steps(int64_t(items.size()));
  if (bytes) g_budget->charge_bytes(bytes);
}

Value Value::make_list(List items) {
  check_list_size(items.size(), "a list");
  charge_copy(items);
  Value v;
  v.kind = Kind::List;
  int d = 0;
  for (const Value& x : items) d = std::max(d, x.depth());
  v.list_depth = d + 1;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}

int Value::depth() const {
  switch (kind) {
    case Kind::List: return list_depth;
    case Kind::Dict: return dict->depth;
    case Kind::Namespace: return 1;
    default: return 0;
  }
}

Value Value::make_tuple(List items) {
  Value v = make_list(std::move(items));
  v.tuple = true;
  return v;
}

Value Value::make_dict() {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>();
  return v;
}

Value Value::make_namespace() {
  Value v = make_dict();
  v.kind = Kind::Namespace;
  return v;
}

Value Value::callable(std::string name, std::function<Value(Interpreter&, CallArgs&)> f) {
  Value v;
  v.kind = Kind::Callable;
  v.fn = std::make_shared<Callable>(Callable{std::move(name), std::move(f)});
  return v;
}

static Value from_json_at(const nlohmann::ordered_json& j, int level, int max_depth);

Value Value::from_json(const nlohmann::ordered_json& j, int max_depth) { return from_json_at(j, 0, max_depth); }

static Value from_json_at(const nlohmann::ordered_json& j, int level, int max_depth) {
  if ((j.is_array() || j.is_object()) && level >= max_depth)
    throw TemplateError("nesting limit exceeded: an input value (messages, tools or a variable) nests arrays/objects "
                        "deeper than " + std::to_string(max_depth) + " levels (Limits::max_nesting)");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();  // beyond int64: a float, as close as a double gets
      return u > uint64_t(INT64_MAX) ? Value::number(double(u)) : Value::integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json_at(e, level + 1, max_depth));
      return Value::make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::make_dict();
      for (const auto& [k, e] : j.items()) d.dict->set(k, from_json_at(e, level + 1, max_depth));
      return d;
    }
    default: return Value::none();
  }
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

Value* Dict::find(const std::string& key) {
  for (auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  if (Value* slot = find(key)) *slot = std::move(v);
  else items.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t pos, const char* name, Value fallback) const {
  if (pos < positional.size()) return positional[pos];
  for (const auto& kv : keywords)
    if (kv.first == name) return kv.second;
  return fallback;
}

bool CallArgs::has(size_t pos, const char* name) const {
  if (pos < positional.size()) return true;
  for (const auto& kv : keywords)
    if (kv.first == name) return true;
  return false;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0;
    case Kind::String: return !s.empty();
    case Kind::List: return generator || !list->empty();  // a Python generator is always true
    case Kind::Dict: return !dict->items.empty();
    default: return true;
  }
}

std::string format_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // d.ddde[+-]XX, shortest round-trip digits
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {  // Python repr: fixed notation when -4 <= exponent10 < 16
    if (exp < 0) {
      out = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == (unsigned char)q) { out += '\\'; out += char(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += char(c);
  }
  out += q;
  return out;
}

std::string Value::repr() const {
  switch (kind) {
    case Kind::String: return repr_string(s);
    case Kind::List: {
      std::string out = tuple ? "(" : "[";
      for (size_t k = 0; k < list->size(); ++k) {
        charge_steps(1);
        out += (k ? ", " : "") + (*list)[k].repr();
        check_string_size(out.size(), "the text of a list");
      }
      if (tuple) return out + (list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, v] : dict->items) {
        charge_steps(1);
        out += (first ? "" : ", ") + key_value(key).repr() + ": " + v.repr();
        check_string_size(out.size(), "the text of a dict");
        first = false;
      }
      return out + "}";
    }
    default: return str();
  }
}

std::string Value::str() const {
  switch (kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return b ? "True" : "False";
    case Kind::Int: return std::to_string(i);
    case Kind::Float: return format_float(f);
    case Kind::String: return s;
    case Kind::List:
      if (generator) throw TemplateError("cannot print a generator (map/select result); add '| list'");
      return repr();
    case Kind::Dict: return repr();
    case Kind::Namespace: return "<Namespace>";
    case Kind::Callable: return "<function " + fn->name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Callable: return "function";
  }
  return "?";
}

List Value::iterate() const {
  switch (kind) {
    case Kind::Undefined: return {};
    case Kind::List: charge_copy(*list); return *list;
    case Kind::Dict: {
      List keys;
      for (const auto& kv : dict->items) keys.push_back(key_value(kv.first));
      charge_copy(keys);
      return keys;
    }
    case Kind::String: {
      List chars;
      check_list_size(s.size() / 4, "the characters of a string");  // a code point takes 1 to 4 bytes
      charge_steps(int64_t(s.size()));
      auto cps = utf8_decode(s);
      check_list_size(cps.size(), "the characters of a string");
      for (size_t k = 0; k < cps.size(); ++k) chars.push_back(string(utf8_encode(cps, k, k + 1)));
      return chars;
    }
    default: throw TemplateError("'" + type_name() + "' object is not iterable");
  }
}

std::string dict_key(const Value& k, bool* ok) {
  if (ok) *ok = true;
  if (k.is_string()) return k.s;
  if (k.kind == Kind::Int) return "\x01" + std::to_string(k.i);
  if (ok) *ok = false;
  return {};
}

Value key_value(const std::string& k) {
  if (!k.empty() && k[0] == '\x01') return Value::integer(std::stoll(k.substr(1)));
  return Value::string(k);
}

bool equals(const Value& a, const Value& b) {
  charge_steps(1);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return (a.kind == Kind::Bool ? int64_t(a.b) : a.i) == (b.kind == Kind::Bool ? int64_t(b.b) : b.i);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined: case Kind::None: return true;
    case Kind::String: charge_steps(int64_t(std::min(a.s.size(), b.s.size()) / 64)); return a.s == b.s;
    case Kind::List: {
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Kind::Namespace: return a.dict == b.dict;
    case Kind::Callable: return a.fn == b.fn;
    default: return false;
  }
}

bool less(const Value& a, const Value& b, int line) {
  charge_steps(1);
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) {  // UTF-8 byte order == code point order
    charge_steps(int64_t(std::min(a.s.size(), b.s.size()) / 64));
    return a.s < b.s;
  }
  if (a.is_list() && b.is_list()) {
    size_t n = std::min(a.list->size(), b.list->size());
    for (size_t k = 0; k < n; ++k) {
      if (less((*a.list)[k], (*b.list)[k], line)) return true;
      if (less((*b.list)[k], (*a.list)[k], line)) return false;
    }
    return a.list->size() < b.list->size();
  }
  throw TemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                          b.type_name() + "'", line);
}

static void json_ascii_char(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        out += b;
      } else out += char(c);
  }
}

// json.dumps of a str: ensure_ascii=False keeps UTF-8 as is; True writes \uXXXX (surrogate pairs).
static void json_string(std::string& out, const std::string& s, bool ascii = false) {
  out += '"';
  if (ascii) {
    for (uint32_t cp : utf8_decode(s)) {
      char b[16];
      if (cp < 0x80) { json_ascii_char(out, (unsigned char)cp); continue; }
      if (cp < 0x10000) std::snprintf(b, sizeof b, "\\u%04x", cp);
      else std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
      out += b;
    }
  } else {
    for (unsigned char c : s) json_ascii_char(out, c);
  }
  out += '"';
}

static void json_dump(std::string& out, const Value& v, const JsonOptions& opt, int level) {
  auto newline = [&](int lvl) {
    if (opt.indent < 0) return;
    size_t n = size_t(opt.indent) * size_t(lvl);
    check_string_size(out.size() + 1 + n, "the JSON text");
    out += '\n';
    out.append(n, ' ');
  };
  charge_steps(1);
  check_string_size(out.size(), "the JSON text");
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
      else out += format_float(v.f);
      return;
    case Kind::String:
      json_string(out, v.s, opt.ensure_ascii);
      check_string_size(out.size(), "the JSON text");
      return;
    case Kind::List: {
      if (v.generator) throw TemplateError("Object of type generator is not JSON serializable");
      if (v.list->empty()) { out += "[]"; return; }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += opt.item_sep;
        newline(level + 1);
        json_dump(out, (*v.list)[k], opt, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* x, auto* y) { return x->first < y->first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += opt.item_sep;
        newline(level + 1);
        json_string(out, key_value(items[k]->first).str(), opt.ensure_ascii);
        out += opt.key_sep;
        json_dump(out, items[k]->second, opt, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      throw TemplateError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, const JsonOptions& opt) {
  std::string out;
  json_dump(out, v, opt, 0);
  return out;
}

std::vector<uint32_t> utf8_decode(const std::string& s) {
  charge_steps(int64_t(s.size() / 8));  // the string methods' per-character work goes through here
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    unsigned char c = s[k];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (k + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int m = 1; m < n; ++m) cp = (cp << 6) | (uint8_t(s[k + m]) & 0x3f);
    cps.push_back(cp);
    k += size_t(n);
  }
  return cps;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) { out += char(0xc0 | (cp >> 6)); out += char(0x80 | (cp & 0x3f)); }
  else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3f)); out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18)); out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f)); out += char(0x80 | (cp & 0x3f));
  }
}

std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end && k < cps.size(); ++k) utf8_append(out, cps[k]);
  return out;
}

bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

}  // namespace ggflow::jinja
