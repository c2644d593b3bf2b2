// Syntax tree of a template. Expressions and statements are plain tagged structs; every node keeps
// the template line it came from, for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace ggflow::jinja {

enum class EK {
  Literal,    // value
  Name,       // name
  ListLit,    // kids
  TupleLit,   // kids
  DictLit,    // kids: key0, value0, key1, value1, ...
  Attr,       // kids[0].name
  Item,       // kids[0][kids[1]]
  Slice,      // kids[0][kids[1]:kids[2]:kids[3]] (null kids are absent)
  Call,       // kids[0](kids[1..], kwargs)
  Filter,     // kids[0] | name(kids[1..], kwargs); kids[0] null inside {% filter %}
  Test,       // kids[0] is [not] name(kids[1..]); negated
  Unary,      // op kids[0]: "not", "-", "+"
  Binary,     // kids[0] op kids[1]: and or + - * / // % ** ~ == != < > <= >= in "not in"
  Cond,       // kids[0] if kids[1] else kids[2] (kids[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  EK kind;
  int line = 0;
  std::string name;  // Name, Attr, Filter, Test; op for Unary/Binary
  Value value;       // Literal
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
  bool soft = false;  // Filter/Test inside an if/conditional: unknown names fail only when run
  int depth = 1;      // of this syntax tree (the parser keeps it within Limits::max_nesting)
};

enum class SK { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue };

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  SK kind;
  int line = 0;
  std::string text;                     // Text
  ExprPtr expr;                         // Output, Set value, For iterable, CallBlock call, FilterBlock filter
  std::vector<std::string> targets;     // For/Set names; Set "ns.attr" keeps ns in targets[0], attr in attr
  std::string attr;                     // Set ns.attr
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, body)...
  Body body, else_body;                 // For/Macro/CallBlock/FilterBlock/SetBlock body; If/For else
  ExprPtr cond;                         // For ... if cond
  std::string name;                     // Macro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro/CallBlock parameters with defaults
};

struct Program {
  Body body;
};

// Parses a template; throws TemplateError naming the construct and line for anything unsupported,
// for a source longer than limits.max_source, and for nesting (brackets, blocks, unary operators,
// chains of operators, attributes, calls or filters) deeper than limits.max_nesting, which bounds
// the parser's recursion and the depth of the trees the interpreter walks.
std::shared_ptr<Program> parse_template(const std::string& source, const Limits& limits = {});

}  // namespace ggflow::jinja
