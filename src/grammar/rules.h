// The parser's output, before compilation (internal to the grammar layer): rules with their
// alternatives as sequences of items, where groups and repetitions already are helper rules and
// rule names are resolved to ids (a name used before its definition gets its id at first use).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"

namespace ggflow::grammar {

struct SourcePos {
  uint32_t line = 0, col = 0;  // 1-based; 0: not from source text
};

struct Grammar::Parts {
  struct Item {
    bool is_ref = false;
    uint32_t index = 0;  // rule id (is_ref) or index into sets
  };
  struct Rule {
    std::string name;
    std::vector<std::vector<Item>> alts;
    bool defined = false;
    bool helper = false;   // made for a group or repetition inside rule `owner`
    uint32_t owner = 0;
    SourcePos defined_at, first_use;
  };
  std::vector<Rule> rules;
  std::vector<CodepointSet> sets;
};

// "grammar line L col C: " (or "grammar: " without a position).
std::string where(SourcePos p);

// GBNF text -> parts (syntax only; compile() checks references, recursion and limits).
Result<Grammar::Parts> parse_gbnf_parts(std::string_view text, const Limits& limits);

}  // namespace ggflow::grammar
