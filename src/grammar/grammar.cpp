#include "grammar/grammar.h"

namespace ggflow::grammar {

std::string Grammar::to_gbnf() const {
  std::string out;
  for (const auto& rule : rules_) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alts.size(); ++a) {
      out += a == 0 ? " " : " | ";
      std::string alt, literal;  // consecutive single code points print as one literal
      auto flush = [&] {
        if (literal.empty()) return;
        alt += (alt.empty() ? "\"" : " \"") + literal + "\"";
        literal.clear();
      };
      for (uint32_t i = rule.alts[a]; elements_[i].kind != Kind::End; ++i) {
        const Element& e = elements_[i];
        if (e.kind == Kind::Chars) {
          const auto& r = sets_[e.arg].ranges();
          if (r.size() == 1 && r[0].lo == r[0].hi) {
            literal += gbnf_escape_codepoint(r[0].lo, "\"\\");
            continue;
          }
          flush();
          alt += (alt.empty() ? "" : " ") + sets_[e.arg].to_gbnf();
        } else {
          flush();
          alt += (alt.empty() ? "" : " ") + rules_[e.arg].name;
        }
      }
      flush();
      out += alt.empty() ? "\"\"" : alt;
    }
    out += "\n";
  }
  return out;
}

}  // namespace ggflow::grammar
