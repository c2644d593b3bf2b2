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

// The sandbox limits. A chat template ships inside the model file, so it is untrusted input
// (server-side template injection: CVE-2024-34359): everything a template can consume is bounded,
// and going past a bound fails the render with a TemplateError that names the limit and its value
// (e.g. "range() too big: range(1000000000) has 1000000000 items, over the limit of 100000
// (Limits::max_range)"). The defaults are far above what real chat templates need (the
// conformance suite renders every known template under them) and keep one render of any template
// within about a second and a few hundred MiB (tests/text/test_template_sandbox.cpp).
struct Limits {
  static constexpr size_t kMaxSource = size_t(1) << 20;
  static constexpr size_t kMaxOutput = size_t(16) << 20;
  static constexpr size_t kMaxString = size_t(16) << 20;
  static constexpr int64_t kMaxItems = 1000000;
  static constexpr int64_t kMaxRange = 100000;
  static constexpr int64_t kMaxIterations = 1000000;
  static constexpr int kMaxDepth = 200;
  static constexpr int kMaxNesting = 128;
  static constexpr int kMaxEvalDepth = 500;
  static constexpr int64_t kMaxSteps = 5000000;
  static constexpr int64_t kMaxBytes = int64_t(256) << 20;

  size_t max_source = kMaxSource;           // bytes of template source (real ones: under 20 KiB)
  size_t max_output = kMaxOutput;           // bytes of rendered text (also of one captured block)
  size_t max_string = kMaxString;           // bytes of any one string a template builds
  int64_t max_items = kMaxItems;            // items of any one list a template builds
  int64_t max_range = kMaxRange;            // items one range() may produce (Jinja's sandbox value)
  int64_t max_iterations = kMaxIterations;  // loop iterations over one render, all loops together
  int max_depth = kMaxDepth;                // nested macro calls (recursion)
  // Nesting of the template source (brackets, blocks, unary operators, chains of operators,
  // attributes, calls and filters: the depth of the syntax tree) and of values (lists and dicts
  // inside each other, the JSON inputs included). Bounds the parser's and the printers' recursion.
  int max_nesting = kMaxNesting;
  // Nested evaluations at run time (expressions, statements and macro calls together): macros can
  // stack syntax trees on each other, so this bounds the interpreter's native stack on its own.
  int max_eval_depth = kMaxEvalDepth;
  // Evaluation steps over one render: one per expression and statement evaluated and per item a
  // filter, comparison, conversion or copy walks. Bounds the time of any template.
  int64_t max_steps = kMaxSteps;
  // Bytes of strings built or copied over one render (every string value an expression produces,
  // the strings in every list built). Bounds the memory of any template.
  int64_t max_bytes = kMaxBytes;
};

// What the render in progress on this thread has consumed. Interpreter::render installs one for
// its duration (Budget::Install); value and string operations that a template can make expensive
// (building strings, copying and walking lists, comparing, converting to text or JSON) charge it
// where the work happens, so no operation escapes the limits. Outside a render (no Budget
// installed) nothing is counted or checked.
class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  int64_t steps() const { return steps_; }
  int64_t bytes() const { return bytes_; }

  void charge_steps(int64_t n);  // throws past max_steps
  void charge_bytes(size_t n);   // throws past max_bytes

  static Budget* current();
  // Makes `b` the thread's current Budget until destroyed (restoring the previous one).
  class Install {
   public:
    explicit Install(Budget& b);
    ~Install();
    Install(const Install&) = delete;
    Install& operator=(const Install&) = delete;

   private:
    Budget* saved_;
  };

 private:
  Limits limits_;
  int64_t steps_ = 0, bytes_ = 0;
};

// Checks against the current Budget (no-ops without one). `what` names the operation in the error.
void charge_steps(int64_t n);
void charge_bytes(size_t n);
// A string of `bytes` about to be built: throws past max_string.
void check_string_size(size_t bytes, const char* what);
// A list of `items` about to be built: throws past max_items.
void check_list_size(size_t items, const char* what);
// `bytes` of strings about to be copied: throws if they would take the render past max_bytes.
void check_bytes_left(size_t bytes, const char* what);
// Nesting depth of a value about to be built: throws past max_nesting.
void check_value_depth(int depth, const char* what);

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
  int list_depth = 0;               // List: 1 + the deepest item's depth() (set by make_list)

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
  // Throws TemplateError for arrays/objects nested deeper than `max_depth`.
  static Value from_json(const nlohmann::ordered_json& j, int max_depth = Limits::kMaxNesting);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Bool ? (b ? 1 : 0) : double(i); }
  // Nesting of lists and dicts: 0 for a scalar, 1 for a flat list or dict. A namespace counts 1
  // (nothing recurses into one: it prints as <Namespace> and is not JSON).
  int depth() const;

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()
  std::string type_name() const;
  // Items when iterated (dict -> keys, string -> characters); throws for non-iterables. Charges
  // the current Budget for the copy (strings: at most max_items characters).
  List iterate() const;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  int depth = 1;  // 1 + the deepest value's depth() ever set (an upper bound after replacements)
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
