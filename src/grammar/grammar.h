// Grammars for constrained decoding (tool calling, structured output): GBNF text (llama.cpp's
// syntax) compiled into an immutable, shareable Grammar that a Matcher (matcher.h) runs over a
// model's tokens.
//
// GBNF, as llama.cpp reads it (so existing .gbnf files work):
//   name ::= alternatives          one rule; names are [A-Za-z0-9_-]+; the start rule is `root`
//   a b      a | b      ( ... )    sequence, alternatives, group
//   x*  x+  x?  x{m}  x{m,}  x{m,n}  repetitions (of the item before: a literal, class, group, name)
//   "text"                         literal; escapes \n \r \t \\ \" \[ \] \- \^ \/ \' \xNN \uNNNN \UNNNNNNNN
//   [a-z0-9_]  [^"\\]              character class, negated class (same escapes)
//   .                              any code point
//   # comment                      to the end of the line
// A rule ends at the end of its line unless the line ends inside ( ) or after `|` or `::=`; as an
// extension, a following line that starts with `|` continues the alternatives.
//
// Model: a Grammar is rules -> alternatives -> sequences of elements, each element a set of code
// points (CodepointSet), a reference to a rule, or the end of the alternative. Groups and
// repetitions become helper rules at parse time (x* is `h ::= x h | ""`, x{m,n} is m copies then
// a chain of n-m optional copies). A grammar matches text as Unicode code points; the matcher
// feeds it the UTF-8 bytes of tokens.
//
// Refused at compile time (errors with line:col and a hint): syntax errors, undefined rules, a
// rule defined twice, an empty grammar, a missing start rule, left recursion (direct, indirect,
// or behind a prefix that can match empty text: the recognizer needs every cycle to consume
// input), rules that can never finish (every alternative loops or needs an empty class), and
// anything over Limits. Unused rules are fine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "grammar/codepoints.h"

namespace ggflow::grammar {

// Bounds on what one grammar may cost (grammars come from requests: untrusted). The compile-time
// bounds refuse the grammar; the run-time bounds fail the step (Matcher::accept_token) or the mask
// (Matcher::fill_mask) with an error that names the limit, which a server maps to HTTP 400.
struct Limits {
  // --- compile time ---
  size_t max_text_bytes = 1 << 20;  // GBNF source (and the GBNF a JSON schema becomes)
  uint32_t max_rules = 16384;       // rules after groups and repetitions became helper rules
  uint32_t max_elements = 262144;   // code-point sets + rule references + alternative ends
  uint32_t max_repeat = 10000;      // largest m or n of x{m,n} (also JSON schema minLength, maxItems, ...)
  uint32_t max_nesting = 64;        // nested ( ) in GBNF; nested sub-schemas in a JSON schema
  // --- run time (per step of a Matcher) ---
  // Parses alive at once (ambiguity; equal parses merge): more fails the step. A JSON object
  // whose next property may be any of n optional ones holds about n until its key is read.
  uint32_t max_stacks = 256;
  uint32_t max_stack_depth = 2048;    // rules open inside each other in one parse (JSON nesting)
  uint32_t max_closure_steps = 65536; // expansions of rule references after one code point
  uint64_t max_mask_work = 1 << 24;   // expansions + stack advances of one uncached fill_mask
  // Memory, not refusal: a matcher caches at most this many 256-entry step rows (1 KiB each),
  // then drops them and refills them as needed.
  uint32_t max_step_rows = 4096;
};

class Grammar {
 public:
  enum class Kind : uint8_t { Chars, Ref, End };
  struct Element {
    Kind kind = Kind::End;
    uint32_t arg = 0;  // Chars: index into sets(); Ref: rule id; End: rule id it ends
  };
  struct Rule {
    std::string name;
    std::vector<uint32_t> alts;  // positions in elements() where each alternative starts
  };

  // The compiled form, read by the matcher (positions index elements()).
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<CodepointSet>& sets() const { return sets_; }
  uint32_t root() const { return root_; }
  const Limits& limits() const { return limits_; }
  // Equal for grammars with equal compiled rules and run-time limits (keys the shared mask cache,
  // so the same schema compiled for two requests shares its masks).
  std::pair<uint64_t, uint64_t> fingerprint() const { return fingerprint_; }
  // The compiled rules as GBNF (helpers included); parse_gbnf reads it back to an equal grammar.
  std::string to_gbnf() const;

  // Compiles parsed rules (grammar/rules.h; parse_gbnf is the public way in).
  struct Parts;
  static Result<std::shared_ptr<const Grammar>> compile(Parts parts, std::string_view root, const Limits& limits);

 private:
  Grammar() = default;
  std::vector<Element> elements_;
  std::vector<Rule> rules_;
  std::vector<CodepointSet> sets_;
  uint32_t root_ = 0;
  Limits limits_;
  std::pair<uint64_t, uint64_t> fingerprint_{0, 0};
};

// Parses and compiles GBNF text; `root` names the start rule.
Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root = "root",
                                                  const Limits& limits = {});

// Any JSON object (OpenAI's response_format {"type": "json_object"}), with the whitespace rules of
// json_schema.h. Compiled once per process.
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace ggflow::grammar
