// JSON Schema -> GBNF: one rule per sub-schema, named after where it is (root-items,
// root-address-city, ...), with the fixed JSON rules (json_schema_strings.cpp) added on first use.
// Every keyword is either handled, an ignored annotation, or refused by name (json_schema.h).
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>

#include "base/check.h"
#include "grammar/json_schema_impl.h"

namespace ggflow::grammar {

namespace schema {
namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title", "description", "examples", "default", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
  return k;
}

const std::vector<std::string>& supported() {
  static const std::vector<std::string> k = {
      "type", "enum", "const", "properties", "required", "additionalProperties", "anyOf", "oneOf", "allOf", "$ref",
      "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return k;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// A JSON pointer segment escaped (~0 ~1).
std::string pointer_segment(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Whether a value nests at most `limit` arrays/objects deep (checked without recursion, before
// the recursive dump() of an enum or const value).
bool nests_within(const Json& j, uint32_t limit) {
  std::vector<std::pair<const Json*, uint32_t>> todo = {{&j, 0}};
  while (!todo.empty()) {
    auto [v, d] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (d >= limit) return false;
    for (const auto& child : *v) todo.push_back({&child, d + 1});
  }
  return true;
}

class Converter {
 public:
  Converter(const Json& root, const Limits& limits) : root_(root), lim_(limits), w_(limits) {}

  Result<std::string> run() {
    GGFLOW_GRAMMAR_TRY(body, convert(root_, "#", "root", 0));
    if (w_.too_big()) return too_big();
    return w_.text(body + " " + w_.fixed("ws"));
  }

 private:
  const Json& root_;
  const Limits& lim_;
  RuleWriter w_;
  std::map<std::string, std::string> refs_;  // JSON pointer -> rule name

  Error error(const std::string& where, const std::string& what, const std::string& hint = {}) {
    return make_error("json schema: " + what + " at " + where, hint);
  }
  Error too_big() {
    return make_error("json schema: the schema's grammar is larger than Limits::max_text_bytes = " + std::to_string(lim_.max_text_bytes) +
                          " bytes or Limits::max_rules = " + std::to_string(lim_.max_rules) + " rules",
                      "simplify the schema");
  }

  // A non-negative integer keyword value (minItems, maxLength, ...), at most max_repeat.
  Result<std::optional<uint32_t>> count(const Json& s, const char* key, const std::string& where) {
    if (!s.contains(key)) return std::optional<uint32_t>();
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return error(where, std::string("'") + key + "' must be a non-negative integer");
    if (v.get<int64_t>() > lim_.max_repeat)
      return error(where, std::string("'") + key + "' = " + dump(v) + " is above Limits::max_repeat = " + std::to_string(lim_.max_repeat), "use a smaller bound");
    return std::optional<uint32_t>(static_cast<uint32_t>(v.get<int64_t>()));
  }

  static std::string repeat(const std::string& item, uint32_t lo, std::optional<uint32_t> hi) {
    if (hi && *hi == lo) return lo == 1 ? item : item + "{" + std::to_string(lo) + "}";
    if (!hi) return lo == 0 ? item + "*" : lo == 1 ? item + "+" : item + "{" + std::to_string(lo) + ",}";
    if (lo == 0 && *hi == 1) return item + "?";
    return item + "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
  }

  Status check_keywords(const Json& s, const std::string& where) {
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key)) continue;
      if (std::find(supported().begin(), supported().end(), key) == supported().end())
        return error(where, "unsupported keyword '" + key + "'",
                     "supported: " + join(supported(), ", ") + " (and the annotations title, description, examples, default, $schema, $id, $comment)");
    }
    return {};
  }

  // Keywords other than annotations and `allowed` next to a combinator: refused (the grammar
  // would have to intersect them).
  Status only_with(const Json& s, const std::string& where, const std::string& what, std::initializer_list<const char*> allowed) {
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key) || key == what) continue;
      bool ok = false;
      for (const char* a : allowed) ok |= key == a;
      if (!ok)
        return error(where, "keyword '" + key + "' next to '" + what + "' is not supported",
                     "move '" + key + "' into each branch (or into the referenced schema)");
    }
    return {};
  }

  // The GBNF expression (usually a rule name) for schema `s` at JSON pointer `where`.
  Result<std::string> convert(const Json& s, const std::string& where, const std::string& hint, uint32_t depth) {
    if (depth > lim_.max_nesting)
      return error(where, "sub-schemas nested deeper than Limits::max_nesting = " + std::to_string(lim_.max_nesting), "flatten the schema with $defs");
    if (w_.too_big()) return too_big();
    if (s.is_boolean()) {
      if (s.get<bool>()) return w_.fixed("value");
      return error(where, "the schema 'false' allows no value", "remove it or use a schema that allows something");
    }
    if (!s.is_object()) return error(where, "a schema must be an object or a boolean, not " + std::string(s.type_name()));
    if (auto st = check_keywords(s, where); !st) return st.error();

    if (s.contains("$ref")) {
      if (auto st = only_with(s, where, "$ref", {}); !st) return st.error();
      return ref(s["$ref"], where, depth);
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (auto st = only_with(s, where, key, {}); !st) return st.error();
        const Json& branches = s[key];
        if (!branches.is_array() || branches.empty()) return error(where, std::string("'") + key + "' must be a non-empty array of schemas");
        std::vector<std::string> alts;
        for (size_t i = 0; i < branches.size(); ++i) {
          GGFLOW_GRAMMAR_TRY(alt, convert(branches[i], where + "/" + key + "/" + std::to_string(i), hint, depth + 1));
          alts.push_back(alt);
        }
        return w_.add(hint, join(alts, " | "));
      }
    if (s.contains("allOf")) {
      if (auto st = only_with(s, where, "allOf", {}); !st) return st.error();
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        return error(where, "'allOf' with other than one schema is not supported", "merge the schemas into one");
      return convert(all[0], where + "/allOf/0", hint, depth + 1);
    }
    if (s.contains("const")) {
      if (!nests_within(s["const"], lim_.max_nesting)) return error(where, "'const' value nested deeper than Limits::max_nesting");
      return w_.add(hint, gbnf_literal(dump(s["const"])));
    }
    if (s.contains("enum")) {
      const Json& values = s["enum"];
      if (!values.is_array() || values.empty()) return error(where, "'enum' must be a non-empty array");
      if (!nests_within(values, lim_.max_nesting + 1)) return error(where, "'enum' value nested deeper than Limits::max_nesting");
      std::vector<std::string> alts;
      for (const auto& v : values) alts.push_back(gbnf_literal(dump(v)));
      return w_.add(hint, join(alts, " | "));
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const Json& x) { return x.is_string(); }))
        for (const auto& x : t) types.push_back(x.get<std::string>());
      else return error(where, "'type' must be a type name or a non-empty array of them");
    } else {  // no type: what the keywords imply, else any value
      auto has = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys) if (s.contains(k)) return true;
        return false;
      };
      if (has({"properties", "additionalProperties", "required"})) types.push_back("object");
      else if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
      else if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      else if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      else return w_.fixed("value");
    }
    std::vector<std::string> alts;
    for (const auto& t : types) {
      GGFLOW_GRAMMAR_TRY(alt, typed(s, t, where, hint, depth));
      alts.push_back(alt);
    }
    return alts.size() == 1 ? alts[0] : w_.add(hint, join(alts, " | "));
  }

  Result<std::string> typed(const Json& s, const std::string& t, const std::string& where, const std::string& hint, uint32_t depth) {
    if (t == "string") return string_rule(s, where, hint);
    if (t == "integer" || t == "number") return number_rule(s, t == "integer", where, hint);
    if (t == "boolean") return w_.fixed("boolean");
    if (t == "null") return w_.fixed("null");
    if (t == "object") return object_rule(s, where, hint, depth);
    if (t == "array") return array_rule(s, where, hint, depth);
    return error(where, "unknown type '" + t + "'", "types: string, number, integer, boolean, null, object, array");
  }

  Result<std::string> string_rule(const Json& s, const std::string& where, const std::string& hint) {
    const std::string q = gbnf_literal("\"");
    if (s.contains("format")) {
      if (!s["format"].is_string()) return error(where, "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (s.contains("pattern")) return error(where, "'format' together with 'pattern' is not supported", "keep one of them");
      const auto& fs = supported_formats();
      if (std::find(fs.begin(), fs.end(), f) == fs.end())
        return error(where, "unsupported format '" + f + "'", "supported formats: " + join(fs, ", ") + "; or use 'pattern'");
      return w_.add(hint, q + " " + w_.fixed(f) + " " + q);
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return error(where, "'pattern' must be a string");
      if (s.contains("minLength") || s.contains("maxLength"))
        return error(where, "'pattern' together with 'minLength'/'maxLength' is not supported", "put the length into the pattern, e.g. ^[a-z]{3,8}$");
      GGFLOW_GRAMMAR_TRY(re, regex_to_gbnf(s["pattern"].get<std::string>(), lim_, where + "/pattern"));
      w_.fixed("char");
      return w_.add(hint, q + " " + re + " " + q);
    }
    GGFLOW_GRAMMAR_TRY(lo, count(s, "minLength", where));
    GGFLOW_GRAMMAR_TRY(hi, count(s, "maxLength", where));
    if (!lo && !hi) return w_.fixed("string");
    if (hi && lo && *hi < *lo) return error(where, "'maxLength' is below 'minLength'");
    return w_.add(hint, q + " " + repeat(w_.fixed("char"), lo.value_or(0), hi) + " " + q);
  }

  // Bounds as doubles (the tightest wins); draft-4 boolean exclusive* flags make the plain bound
  // strict. Integers get an exact digit grammar for [lo, hi].
  Result<std::string> number_rule(const Json& s, bool integer, const std::string& where, const std::string& hint) {
    std::optional<double> lo, hi;
    bool lo_strict = false, hi_strict = false;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      const std::string_view k = key;
      const bool is_min = k == "minimum" || k == "exclusiveMinimum";
      const bool excl = k.starts_with("exclusive");
      if (v.is_boolean()) {  // draft 4
        if (!excl) return error(where, std::string("'") + key + "' must be a number");
        (is_min ? lo_strict : hi_strict) = v.get<bool>();
        continue;
      }
      if (!v.is_number() || !std::isfinite(v.get<double>())) return error(where, std::string("'") + key + "' must be a finite number");
      auto& b = is_min ? lo : hi;
      const double d = v.get<double>();
      if (!b || (is_min ? d >= *b : d <= *b)) {
        b = d;
        (is_min ? lo_strict : hi_strict) = excl;
      }
    }
    if (!lo && !hi) return w_.fixed(integer ? "integer" : "number");
    if (!integer) {
      if (lo && *lo == 0 && !lo_strict && !hi) return w_.fixed("nonneg-number");
      return error(where, "minimum/maximum on type 'number' is not supported (only on 'integer', and minimum 0)",
                   "use type 'integer', or drop the bound and check the value after generation");
    }
    constexpr double kBig = 1e18;  // beyond: no bound at our 16-digit integers
    std::optional<int64_t> ilo, ihi;
    if (lo && *lo > -kBig) {
      if (*lo > kBig) return error(where, "'minimum' above 1e18 is not supported");
      ilo = static_cast<int64_t>(lo_strict ? std::floor(*lo) + 1 : std::ceil(*lo));
    }
    if (hi && *hi < kBig) {
      if (*hi < -kBig) return error(where, "'maximum' below -1e18 is not supported");
      ihi = static_cast<int64_t>(hi_strict ? std::ceil(*hi) - 1 : std::floor(*hi));
    }
    if (ilo && ihi && *ilo > *ihi) return error(where, "no integer lies between the minimum and the maximum");
    if (!ilo && !ihi) return w_.fixed("integer");
    return w_.add(hint, integer_range(ilo, ihi));
  }

  Result<std::string> object_rule(const Json& s, const std::string& where, const std::string& hint, uint32_t depth) {
    struct Prop {
      std::string key, value;
      bool required = false;
    };
    std::vector<Prop> props;
    if (s.contains("properties")) {
      const Json& ps = s["properties"];
      if (!ps.is_object()) return error(where, "'properties' must be an object");
      for (const auto& [key, sub] : ps.items()) {
        GGFLOW_GRAMMAR_TRY(value, convert(sub, where + "/properties/" + pointer_segment(key), hint + "-" + key, depth + 1));
        props.push_back({key, value, false});
      }
    }
    std::optional<std::string> extra;  // the value of additional properties, if allowed
    if (!s.contains("additionalProperties") || s["additionalProperties"] == Json(true)) {
      extra = w_.fixed("value");
    } else if (s["additionalProperties"] != Json(false)) {
      GGFLOW_GRAMMAR_TRY(v, convert(s["additionalProperties"], where + "/additionalProperties", hint + "-additional", depth + 1));
      extra = v;
    }
    if (s.contains("required")) {
      const Json& req = s["required"];
      if (!req.is_array()) return error(where, "'required' must be an array of property names");
      for (const auto& r : req) {
        if (!r.is_string()) return error(where, "'required' must be an array of property names");
        const std::string key = r.get<std::string>();
        auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.key == key; });
        if (it != props.end()) {
          it->required = true;
        } else if (extra) {  // required but not listed: an additional property that must be there
          props.push_back({key, *extra, true});
        } else {
          return error(where, "required property '" + key + "' is not in 'properties' and additionalProperties is false: no object fits",
                       "add '" + key + "' to 'properties'");
        }
      }
    }
    if (props.empty() && extra && *extra == "value") return w_.fixed("object");

    const std::string ws = w_.fixed("ws");
    const std::string comma = gbnf_literal(",") + " " + ws;
    std::vector<std::string> kv;
    const std::string colon = ws + " " + gbnf_literal(":") + " " + ws;  // key ws ":" ws value ws
    for (const auto& p : props) kv.push_back(w_.add(hint + "-" + p.key + "-kv", gbnf_literal(dump(Json(p.key))) + " " + colon + " " + p.value + " " + ws));
    std::string extra_kv;
    if (extra) {
      std::vector<std::string> keys;
      for (const auto& p : props) keys.push_back(p.key);
      extra_kv = w_.add(hint + "-additional-kv", key_not_in(keys, hint) + " " + colon + " " + *extra + " " + ws);
    }
    // after(k): after "{" or a comma, the next property written is one of k.. (up to the first
    // required one; n stands for the additional properties); rest(k): what follows property k-1
    // (a comma and after(k), or nothing when every property from k on is optional). The comma
    // and whitespace are shared, so a parse state holds one alternative per candidate key.
    const size_t n = props.size();
    std::vector<std::string> after(n + 1), rest(n + 1);  // "": none
    std::vector<char> optional_from(n + 1, 1);
    if (extra) {
      rest[n] = w_.reserve(hint + "-rest");
      after[n] = w_.add(hint + "-after", extra_kv + " " + rest[n]);
      w_.define(rest[n], comma + " " + after[n] + " | \"\"");
    }
    for (size_t k = n; k-- > 0;) {
      optional_from[k] = !props[k].required && optional_from[k + 1];
      std::string alt = kv[k] + (rest[k + 1].empty() ? "" : " " + rest[k + 1]);
      if (!props[k].required && !after[k + 1].empty()) alt += " | " + after[k + 1];
      after[k] = w_.add(hint + "-after", alt);
      if (k > 0) rest[k] = w_.add(hint + "-rest", comma + " " + after[k] + (optional_from[k] ? " | \"\"" : ""));
    }
    std::string body = gbnf_literal("{") + " " + ws;
    if (!after[0].empty()) body += " " + after[0] + (optional_from[0] ? "?" : "");
    return w_.add(hint, body + " " + gbnf_literal("}"));
  }

  // A JSON string that is none of `keys` (so additional properties never repeat a listed one):
  // a rule per node of the keys' trie; leaving the trie at any point ends in any string. Keys
  // that JSON must escape, or longer than 256 characters, make this plain `string` (documented in
  // json_schema.h).
  std::string key_not_in(const std::vector<std::string>& keys, const std::string& hint) {
    if (keys.empty()) return w_.fixed("string");
    std::vector<std::vector<uint32_t>> words;
    for (const auto& k : keys) {
      std::vector<uint32_t> cps;
      size_t i = 0;
      uint32_t cp;
      while (i < k.size()) {
        if (!utf8_next(k, &i, &cp) || cp < 0x20 || cp == '"' || cp == '\\' || cps.size() >= 256) return w_.fixed("string");
        cps.push_back(cp);
      }
      words.push_back(std::move(cps));
    }
    w_.fixed("char");
    const std::string q = gbnf_literal("\"");
    const std::string escape = gbnf_literal("\\") + " ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )";
    // Recursive over the trie (depth <= 256): the words `ws` share their first `len` code points.
    std::function<std::string(std::vector<size_t>, size_t)> node = [&](std::vector<size_t> ws, size_t len) {
      bool terminal = false;
      std::map<uint32_t, std::vector<size_t>> children;
      for (size_t i : ws) {
        if (words[i].size() == len) terminal = true;
        else children[words[i][len]].push_back(i);
      }
      std::vector<std::string> alts;
      if (!terminal) alts.push_back(q);
      std::vector<CodepointRange> other = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      for (const auto& [cp, sub] : children) {
        alts.push_back(gbnf_literal(utf8_encode(cp)) + " " + node(sub, len + 1));
        other.push_back({cp, cp});
      }
      alts.push_back(CodepointSet::of(other, true).to_gbnf() + " char* " + q);
      alts.push_back(escape + " char* " + q);
      return w_.add(hint + "-key", join(alts, " | "));
    };
    std::vector<size_t> all(words.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return q + " " + node(all, 0);
  }

  Result<std::string> array_rule(const Json& s, const std::string& where, const std::string& hint, uint32_t depth) {
    GGFLOW_GRAMMAR_TRY(lo_opt, count(s, "minItems", where));
    GGFLOW_GRAMMAR_TRY(hi, count(s, "maxItems", where));
    const uint32_t lo = lo_opt.value_or(0);
    if (hi && *hi < lo) return error(where, "'maxItems' is below 'minItems'");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      if (!p.is_array()) return error(where, "'prefixItems' must be an array of schemas");
      for (size_t i = 0; i < p.size(); ++i) {
        GGFLOW_GRAMMAR_TRY(e, convert(p[i], where + "/prefixItems/" + std::to_string(i), hint + "-" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
    }
    std::optional<std::string> item;  // later items; none when items is false
    if (!s.contains("items") || s["items"] == Json(true)) {
      item = w_.fixed("value");
    } else if (s["items"] != Json(false)) {
      GGFLOW_GRAMMAR_TRY(e, convert(s["items"], where + "/items", hint + "-item", depth + 1));
      item = e;
    }
    const std::string ws = w_.fixed("ws");
    const std::string comma = gbnf_literal(",") + " " + ws;
    const std::string open = gbnf_literal("[") + " " + ws, close = gbnf_literal("]");
    const size_t P = prefix.size();
    if (!item && lo > P) return error(where, "'minItems' exceeds the number of 'prefixItems' while 'items' is false: no array fits");
    if (P == 0) {
      if (!item || (hi && *hi == 0)) return w_.add(hint, open + " " + close);
      const std::string one = *item + " " + ws;
      const std::optional<uint32_t> more_hi = hi ? std::optional<uint32_t>(*hi - 1) : std::nullopt;
      const std::string more = "( " + comma + " " + one + " )";
      const std::string list = one + (more_hi && *more_hi == 0 ? "" : " " + repeat(more, lo > 0 ? lo - 1 : 0, more_hi));
      return w_.add(hint, open + " " + (lo == 0 ? "( " + list + " )?" : list) + " " + close);
    }
    // Tuple: tail(i) = items from index i on, i > 0 written after a comma; optional from minItems on.
    const size_t cut = hi ? std::min<size_t>(*hi, P) : P;
    std::string tail;  // tail(cut): the items after the prefix
    if (cut == P && item && !(hi && *hi <= P)) {
      const uint32_t more_lo = lo > P ? lo - static_cast<uint32_t>(P) : 0;
      std::optional<uint32_t> more_hi;
      if (hi) more_hi = *hi - static_cast<uint32_t>(P);
      tail = repeat("( " + comma + " " + *item + " " + ws + " )", more_lo, more_hi);
    }
    for (size_t i = cut; i-- > 0;) {
      const std::string body = (i == 0 ? "" : comma + " ") + prefix[i] + " " + ws + (tail.empty() ? "" : " " + tail);
      tail = w_.add(hint + "-tail", i >= lo ? "( " + body + " )?" : body);
    }
    return w_.add(hint, open + (tail.empty() ? "" : " " + tail) + " " + close);
  }

  // $ref: "#", "#/$defs/x", "#/definitions/x", or any JSON pointer into this schema.
  Result<std::string> ref(const Json& r, const std::string& where, uint32_t depth) {
    if (!r.is_string()) return error(where, "'$ref' must be a string");
    const std::string target = r.get<std::string>();
    if (target.empty() || target[0] != '#')
      return error(where, "'$ref' to '" + target + "' is not supported (only references inside this schema, starting with '#')",
                   "move the referenced schema into $defs and refer to it as #/$defs/name");
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const Json* node = &root_;
    std::string hint = "ref";
    if (target.size() > 1) {
      if (target[1] != '/') return error(where, "'$ref' '" + target + "' is not a JSON pointer", "write #/$defs/name");
      size_t i = 2;
      while (true) {
        const size_t end = std::min(target.find('/', i), target.size());
        std::string seg;
        for (size_t k = i; k < end; ++k) {  // ~0 ~1 and %XX
          if (target[k] == '~' && k + 1 < end && (target[k + 1] == '0' || target[k + 1] == '1')) {
            seg += target[++k] == '0' ? '~' : '/';
          } else if (target[k] == '%' && k + 2 < end && std::isxdigit(static_cast<unsigned char>(target[k + 1])) &&
                     std::isxdigit(static_cast<unsigned char>(target[k + 2]))) {
            seg += static_cast<char>(std::stoi(target.substr(k + 1, 2), nullptr, 16));
            k += 2;
          } else {
            seg += target[k];
          }
        }
        if (node->is_object() && node->contains(seg)) {
          node = &(*node)[seg];
        } else if (node->is_array() && !seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos && seg.size() < 10 &&
                   std::stoul(seg) < node->size()) {
          node = &(*node)[std::stoul(seg)];
        } else {
          return error(where, "'$ref' '" + target + "' points to nothing", "check the path; definitions live under #/$defs/name");
        }
        hint = seg;
        if (end == target.size()) break;
        i = end + 1;
      }
    } else {
      hint = "root-ref";
    }
    // The name first, so a recursive reference inside finds it.
    const std::string name = w_.reserve(hint);
    refs_[target] = name;
    GGFLOW_GRAMMAR_TRY(body, convert(*node, target, name, depth + 1));
    w_.define(name, body);
    return name;
  }
};

}  // namespace
}  // namespace schema

Result<std::string> json_schema_to_gbnf(const Json& schema, const Limits& limits) {
  return schema::Converter(schema, limits).run();
}

Result<std::shared_ptr<const Grammar>> compile_json_schema(const Json& schema, const Limits& limits) {
  GGFLOW_GRAMMAR_TRY(gbnf, json_schema_to_gbnf(schema, limits));
  auto g = parse_gbnf(gbnf, "root", limits);
  if (!g) return make_error("json schema: its grammar does not compile: " + g.error().what, g.error().hint);
  return g;
}

std::string json_object_gbnf() {
  const Limits limits;
  schema::RuleWriter w(limits);
  const std::string object = w.fixed("object");
  return w.text(object + " " + w.fixed("ws"));
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> g = [] {
    auto r = parse_gbnf(json_object_gbnf());
    GGFLOW_CHECK(r.ok(), "the built-in JSON object grammar compiles");
    return *r;
  }();
  return g;
}

}  // namespace ggflow::grammar
