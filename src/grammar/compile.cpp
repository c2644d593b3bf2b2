// Grammar::Parts -> Grammar: resolves the start rule, checks that every rule is defined, that every
// reachable rule can finish and that no rule is left-recursive, then lays the reachable rules out
// as one flat element array (breadth-first from the start rule, so equal grammars compile equal)
// with deduplicated code-point sets and a fingerprint.
#include <algorithm>
#include <map>

#include "grammar/rules.h"

namespace ggflow::grammar {

namespace {

using Parts = Grammar::Parts;

std::string describe(const Parts& p, uint32_t id) {
  const auto& r = p.rules[id];
  if (!r.helper) return "'" + r.name + "'";
  return "'" + r.name + "' (a group or repetition in rule '" + p.rules[r.owner].name + "')";
}

// Rules reachable from `root`, in breadth-first order of first reference.
std::vector<uint32_t> reachable(const Parts& p, uint32_t root) {
  std::vector<uint32_t> order{root};
  std::vector<char> seen(p.rules.size(), 0);
  seen[root] = 1;
  for (size_t i = 0; i < order.size(); ++i)
    for (const auto& alt : p.rules[order[i]].alts)
      for (const auto& it : alt)
        if (it.is_ref && !seen[it.index]) {
          seen[it.index] = 1;
          order.push_back(it.index);
        }
  return order;
}

// Least fixpoint of "some alternative has every item satisfying it" over the rules, in time
// linear in the items: `chars_ok` says whether a code-point item satisfies it; a reference does
// when its rule does. Each alternative counts its references still unsatisfied.
template <class CharsOk>
std::vector<char> fixpoint(const Parts& p, CharsOk chars_ok) {
  std::vector<char> yes(p.rules.size(), 0);
  std::vector<uint32_t> need, alt_rule, queue;
  std::vector<std::vector<uint32_t>> users(p.rules.size());  // rule -> alternatives that refer to it
  for (uint32_t r = 0; r < p.rules.size(); ++r)
    for (const auto& alt : p.rules[r].alts) {
      const uint32_t a = static_cast<uint32_t>(need.size());
      uint32_t refs = 0;
      bool dead = false;
      for (const auto& it : alt) {
        if (it.is_ref) ++refs;
        else if (!chars_ok(it)) dead = true;
      }
      need.push_back(dead ? UINT32_MAX : refs);
      alt_rule.push_back(r);
      if (dead) continue;
      for (const auto& it : alt)
        if (it.is_ref) users[it.index].push_back(a);
      if (refs == 0) queue.push_back(r);
    }
  while (!queue.empty()) {
    const uint32_t r = queue.back();
    queue.pop_back();
    if (yes[r]) continue;
    yes[r] = 1;
    for (uint32_t a : users[r])
      if (--need[a] == 0) queue.push_back(alt_rule[a]);
  }
  return yes;
}

// A cycle of "rule A can start with rule B" edges among `rules`, as names, or empty.
std::vector<uint32_t> left_cycle(const Parts& p, const std::vector<uint32_t>& rules, const std::vector<char>& nullable) {
  std::vector<std::vector<uint32_t>> edges(p.rules.size());
  for (uint32_t r : rules)
    for (const auto& alt : p.rules[r].alts)
      for (const auto& it : alt) {
        if (!it.is_ref) break;  // a code point is consumed first
        edges[r].push_back(it.index);
        if (!nullable[it.index]) break;
      }
  // Iterative depth-first search: 0 unvisited, 1 on the path, 2 done.
  std::vector<char> color(p.rules.size(), 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start : rules) {
    if (color[start]) continue;
    path.push_back({start, 0});
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = edges[r][next++];
      if (color[to] == 1) {
        std::vector<uint32_t> cycle;
        size_t i = path.size();
        while (path[i - 1].first != to) --i;
        for (size_t k = i - 1; k < path.size(); ++k) cycle.push_back(path[k].first);
        cycle.push_back(to);
        return cycle;
      }
      if (color[to] == 0) {
        color[to] = 1;
        path.push_back({to, 0});
      }
    }
  }
  return {};
}

// Two independent 64-bit hashes (FNV-1a and a multiply-xorshift mix) of a word stream.
struct Fingerprinter {
  uint64_t a = 1469598103934665603ull, b = 0x9E3779B97F4A7C15ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      a ^= (v >> (8 * i)) & 0xFF;
      a *= 1099511628211ull;
    }
    b ^= v + 0x9E3779B97F4A7C15ull + (b << 6) + (b >> 2);
    b *= 0xBF58476D1CE4E5B9ull;
    b ^= b >> 31;
  }
};

}  // namespace

Result<std::shared_ptr<const Grammar>> Grammar::compile(Parts p, std::string_view root_name, const Limits& limits) {
  bool any_defined = false;
  for (const auto& r : p.rules) any_defined |= r.defined && !r.helper;
  if (!any_defined) return make_error("grammar: empty grammar (no rules)", "write at least: root ::= ...");
  for (const auto& r : p.rules)
    if (!r.defined)
      return make_error(where(r.first_use) + "undefined rule '" + r.name + "'",
                        "define it with '" + r.name + " ::= ...' or fix the name");
  uint32_t root = UINT32_MAX;
  for (uint32_t i = 0; i < p.rules.size(); ++i)
    if (!p.rules[i].helper && p.rules[i].name == root_name) root = i;
  if (root == UINT32_MAX)
    return make_error("grammar: no rule '" + std::string(root_name) + "' to start from",
                      "define '" + std::string(root_name) + " ::= ...' (the start rule) or pass the start rule's name");
  if (p.rules.size() > limits.max_rules)
    return make_error("grammar: " + std::to_string(p.rules.size()) + " rules, above the limit of " + std::to_string(limits.max_rules),
                      "simplify the grammar or raise Limits::max_rules");

  const std::vector<uint32_t> order = reachable(p, root);
  const auto productive = fixpoint(p, [&](const Parts::Item& it) { return p.sets[it.index].has_scalar_value(); });
  for (uint32_t r : order)
    if (!productive[r])
      return make_error(where(p.rules[r].defined_at) + "rule " + describe(p, r) +
                            " can never finish: every alternative refers back to it or needs an empty character class",
                        "give it an alternative that ends, e.g. x ::= \"a\" x | \"a\"");
  const auto nullable = fixpoint(p, [](const Parts::Item&) { return false; });
  const auto cycle = left_cycle(p, order, nullable);
  if (!cycle.empty()) {
    std::string names;
    for (uint32_t r : cycle) names += (names.empty() ? "" : " -> ") + p.rules[r].name;
    return make_error(where(p.rules[cycle[0]].defined_at) + "left recursion: " + names + " (rule " + describe(p, cycle[0]) +
                          " can reach itself without consuming input)",
                      "rewrite it right-recursive or as a repetition: 'expr ::= term (\"+\" term)*' instead of 'expr ::= expr \"+\" term | term'; "
                      "a repetition of something that can match empty text, like (x?)*, is the same: write x*");
  }

  std::shared_ptr<Grammar> g(new Grammar());
  g->limits_ = limits;
  std::vector<uint32_t> new_id(p.rules.size(), UINT32_MAX);
  for (uint32_t i = 0; i < order.size(); ++i) new_id[order[i]] = i;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> set_ids;  // dedup by ranges
  auto set_id = [&](uint32_t s) {
    std::vector<std::pair<uint32_t, uint32_t>> key;
    for (const auto& r : p.sets[s].ranges()) key.push_back({r.lo, r.hi});
    auto [it, fresh] = set_ids.try_emplace(std::move(key), static_cast<uint32_t>(g->sets_.size()));
    if (fresh) g->sets_.push_back(p.sets[s]);
    return it->second;
  };
  for (uint32_t i = 0; i < order.size(); ++i) {
    Rule rule;
    rule.name = p.rules[order[i]].name;
    for (const auto& alt : p.rules[order[i]].alts) {
      rule.alts.push_back(static_cast<uint32_t>(g->elements_.size()));
      for (const auto& it : alt)
        g->elements_.push_back(it.is_ref ? Element{Kind::Ref, new_id[it.index]} : Element{Kind::Chars, set_id(it.index)});
      g->elements_.push_back({Kind::End, i});
    }
    g->rules_.push_back(std::move(rule));
  }
  if (g->elements_.size() > limits.max_elements)
    return make_error("grammar: " + std::to_string(g->elements_.size()) + " elements, above the limit of " + std::to_string(limits.max_elements),
                      "lower the repetition counts x{m,n}, or raise Limits::max_elements");
  g->root_ = 0;

  Fingerprinter f;
  for (const auto& e : g->elements_) f.add((uint64_t{static_cast<uint8_t>(e.kind)} << 32) | e.arg);
  for (const auto& r : g->rules_) {
    f.add(r.alts.size());
    for (uint32_t a : r.alts) f.add(a);
  }
  for (const auto& s : g->sets_) {
    f.add(s.ranges().size());
    for (const auto& r : s.ranges()) f.add((uint64_t{r.lo} << 32) | r.hi);
  }
  f.add(limits.max_stacks);
  f.add(limits.max_stack_depth);
  f.add(limits.max_closure_steps);
  g->fingerprint_ = {f.a, f.b};
  return std::shared_ptr<const Grammar>(std::move(g));
}

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root, const Limits& limits) {
  auto parts = parse_gbnf_parts(text, limits);
  if (!parts) return parts.error();
  return Grammar::compile(std::move(*parts), root, limits);
}

}  // namespace ggflow::grammar
