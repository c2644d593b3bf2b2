// Internals of the JSON Schema converter (json_schema.h): the rule writer shared by
// json_schema.cpp (schemas, objects, arrays, references) and json_schema_strings.cpp (the fixed
// JSON rules, string formats, regex patterns, integer ranges).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_schema.h"

namespace ggflow::grammar::schema {

// `return` the error of a Result-valued expression, else bind its value.
#define GGFLOW_GRAMMAR_TRY(var, expr)   \
  auto var##_result = (expr);          \
  if (!var##_result) return var##_result.error(); \
  auto var = std::move(*var##_result)

// The fixed rules of JSON (ws, value, object, array, string, char, number, integer, boolean,
// null) and of the string formats; `name` -> its GBNF body and the fixed rules it uses.
struct FixedRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};
const std::vector<FixedRule>& fixed_rules();
const std::vector<std::string>& supported_formats();

// Collects rules: fixed ones on first use, generated ones under unique names.
class RuleWriter {
 public:
  explicit RuleWriter(const Limits& limits);
  // A fixed rule by name (pulls in what it uses); returns the name.
  std::string fixed(const std::string& name);
  // A new rule named after `hint` (made unique; fixed names are reserved); returns the name.
  std::string add(const std::string& hint, const std::string& body);
  // A name reserved now, defined later (recursive $ref).
  std::string reserve(const std::string& hint);
  void define(const std::string& name, const std::string& body);
  // Over Limits::max_text_bytes or max_rules so far.
  bool too_big() const;
  std::string text(const std::string& root_body) const;

 private:
  const Limits& limits_;
  std::vector<std::pair<std::string, std::string>> rules_;  // generated, in order
  std::set<std::string> names_;
  std::set<std::string> fixed_used_;
  size_t bytes_ = 0;
};

// GBNF for the JSON text of a string value's characters matching the regex `pattern` (without
// the quotes). Errors name the unsupported construct.
Result<std::string> regex_to_gbnf(std::string_view pattern, const Limits& limits, const std::string& where);
// GBNF for the decimal integers in [lo, hi] (nullopt: unbounded), canonical form.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
// GBNF for the JSON text of one code point inside a string (escaped where JSON needs it).
std::string json_char_gbnf(uint32_t cp);
// GBNF for the JSON text of any code point of `set` inside a string; empty when the set is empty.
std::string json_class_gbnf(const CodepointSet& set);

}  // namespace ggflow::grammar::schema
