// JSON Schema -> grammar (OpenAI's structured outputs and tool arguments): the schema becomes GBNF
// text (json_schema_to_gbnf, readable, for logs and tests), which compiles to a Grammar.
//
// Supported (the subset OpenAI documents for structured outputs, plus a little):
//   type (string, number, integer, boolean, null, object, array, or a list of them), enum, const,
//   properties, required, additionalProperties (false; true or absent = any JSON value; a schema),
//   anyOf / oneOf (both as anyOf), allOf with one schema, $ref to "#", "#/$defs/x",
//   "#/definitions/x" or any JSON pointer into the schema (recursion allowed), items, prefixItems,
//   minItems, maxItems, minLength, maxLength, pattern (a regex subset, below), format (date, time,
//   date-time, uuid, email, ipv4), minimum / maximum / exclusiveMinimum / exclusiveMaximum on
//   integers (and minimum 0 on numbers).
// Ignored annotations: title, description, examples, default, $schema, $id, $comment,
// deprecated, readOnly, writeOnly, and $defs / definitions themselves (read through $ref).
// Anything else (patternProperties, multipleOf, not, if/then/else, uniqueItems, ...) is refused
// with an error that names the keyword and where it is: a grammar that does not enforce the
// schema would let the model produce output the caller then rejects.
//
// What the output looks like:
//   - Properties appear in the order `properties` lists them (a schema must therefore be an
//     nlohmann::ordered_json, as the server parses requests); optional ones may be left out;
//     a required key absent from `properties` takes the additionalProperties
//     schema (refused when additionalProperties is false: no object could have it); additional properties (when
//     allowed) come after the listed ones and never repeat a listed key (except written with
//     \u escapes, or when a listed key needs escapes in JSON or is over 256 characters). Additional keys may repeat
//     each other (a grammar cannot remember every key).
//   - Whitespace: after { [ , : and after each value, at most one space or one newline followed
//     by up to 20 spaces/tabs, so pretty-printed output up to 10 levels of 2-space indentation
//     fits and a model cannot loop on whitespace. The document may end with such whitespace.
//   - Numbers: at most 16 integer digits, 16 fraction digits and 2 exponent digits (a model
//     cannot loop on digits, and every number is a finite double); enum and const values must be
//     written exactly as
//     nlohmann::json::dump() writes them (compact).
//   - pattern: ECMAScript regex subset matched against the string's value: literals, escapes
//     (\d \w \s \D \W \S \. \uNNNN ...), classes [...] [^...], ., groups ( ) (?: ), |, * + ?
//     {m} {m,} {m,n} (lazy ? accepted); ^ and $ only at the ends of a top-level branch (an
//     unanchored side matches any text there). Refused: backreferences, lookaround, \b, named
//     groups. The value's characters are written as JSON needs (" and \ escaped).
//   - String lengths count characters of the value (an escape such as \n is one).
// Bounded: nesting of sub-schemas (Limits::max_nesting), lengths and item counts
// (Limits::max_repeat), and the grammar's size (Limits::max_text_bytes / max_rules / max_elements).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "grammar/grammar.h"

namespace ggflow::grammar {

using Json = nlohmann::ordered_json;

// The GBNF of a schema (start rule `root`). Errors start with "json schema: " and give the
// JSON pointer of the offending part.
Result<std::string> json_schema_to_gbnf(const Json& schema, const Limits& limits = {});
// json_schema_to_gbnf + parse_gbnf.
Result<std::shared_ptr<const Grammar>> compile_json_schema(const Json& schema, const Limits& limits = {});
// The GBNF of json_object_grammar(): any JSON object.
std::string json_object_gbnf();

}  // namespace ggflow::grammar
