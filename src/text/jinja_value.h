// Values of the chat-template engine. A template sees only these: none, booleans, integers,
// floats, strings, lists, dicts (string keys, insertion order as in Python), namespaces (the one
// mutable object) and callables (macros and the engine's own builtins). There is no way to reach a
// host object: attribute access resolves against this closed set and a whitelist of methods.
//
// Semantics follow Python/Jinja2: truthiness, `str()` (1.0 prints "1.0", True prints "True"),
// `repr()` for lists and dicts, equality across int/float/bool. Strings are UTF-8; lengths,
// indexing and slicing count code points like Python does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ggflow::jinja {

// Everything that goes wrong while parsing or rendering: the message names the construct, `line`
// is the template line (0 when unknown).
struct TemplateError : std::runtime_error {
  int line = 0;
  TemplateError(const std::string& msg, int l = 0) : std::runtime_error(msg), line(l) {}
};

struct Value;
using List = std::vector<Value>;
struct Dict;
struct Callable;
class Interpreter;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

struct Value {
  Kind kind = Kind::Undefined;
  bool b = false;
  bool tuple = false;      // a List that Python holds as a tuple: repr (a, b)
  bool markup = false;     // a Markup string (from |safe): `+` with it HTML-escapes the other side
  bool generator = false;  // a lazy result of map/select: not JSON-serializable, not printable
  int64_t i = 0;
  double f = 0;
  std::string s;                    // String; for Undefined: the name that was missing
  std::shared_ptr<List> list;       // List
  std::shared_ptr<Dict> dict;       // Dict, Namespace
  std::shared_ptr<Callable> fn;     // Callable

  static Value undefined(std::string name = {}) { Value v; v.s = std::move(name); return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  static Value make_list(List items = {});
  static Value make_tuple(List items);
  static Value make_dict();
  static Value make_namespace();
  static Value callable(std::string name, std::function<Value(Interpreter&, struct CallArgs&)> f);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Bool ? (b ? 1 : 0) : double(i); }

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()
  std::string type_name() const;
  // Items when iterated (dict -> keys, string -> characters); throws for non-iterables.
  List iterate() const;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  int line = 0;
  // Argument `pos` by position or by `name` (keyword), else `fallback`.
  Value get(size_t pos, const char* name, Value fallback = Value::undefined()) const;
  bool has(size_t pos, const char* name) const;
};

struct Callable {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> fn;
};

// Dict keys are strings; an integer key (from a literal like {0: 1}) is stored as "\x01" + digits.
// dict_key() returns the stored key of a value, or "" with ok=false when it cannot be a key.
std::string dict_key(const Value& k, bool* ok = nullptr);
Value key_value(const std::string& k);

bool equals(const Value& a, const Value& b);
// Python ordering (<); throws TemplateError for incomparable kinds.
bool less(const Value& a, const Value& b, int line);

// Python float repr: shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string format_float(double x);
// json.dumps(x, ensure_ascii=False, indent, separators, sort_keys); throws for non-JSON values.
struct JsonOptions {
  int indent = -1;  // < 0: single line
  std::string item_sep, key_sep;
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};
std::string to_json(const Value& v, const JsonOptions& opt);

// UTF-8 helpers: code points of s, and back.
std::vector<uint32_t> utf8_decode(const std::string& s);
std::string utf8_encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);
void utf8_append(std::string& out, uint32_t cp);
bool is_py_space(uint32_t cp);

}  // namespace ggflow::jinja
