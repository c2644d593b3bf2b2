// JSON Schema -> grammar over the schemas of tests/grammar/data/schemas.json (71 schemas: types,
// enums, strings with lengths, formats and patterns, integer ranges, objects with required,
// optional and additional properties, arrays, tuples, anyOf, $ref and recursion):
//   - each one's valid instances (compact, and pretty-printed) match and its "invalid" ones do
//     not (some are valid JSON Schema but refused on purpose, e.g. properties out of order);
//   - random walks through the masks (random allowed tokens, then preferring tokens that close
//     what is open) end complete, and the text parses as JSON and satisfies the schema, checked
//     by a small validator of the supported subset below;
//   - unsupported keywords and impossible schemas are refused with an error naming them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "require_file.h"

namespace ggflow::grammar {
namespace {

using testing::allowed_ids;

const Json& data() {
  static const Json j = [] {
    std::ifstream in(std::string(GGFLOW_ROOT) + "/tests/grammar/data/schemas.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return Json::parse(ss.str());
  }();
  return j;
}

// --- a validator for the supported subset of JSON Schema (the oracle of the walks) ---

std::wstring widen(const std::string& s) {
  std::wstring out;
  size_t i = 0;
  uint32_t cp;
  while (i < s.size()) {
    if (!utf8_next(s, &i, &cp)) return L"<invalid UTF-8>";
    out += static_cast<wchar_t>(cp);
  }
  return out;
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root) {}

  // Empty when `v` satisfies `s`, else why not.
  std::string check(const Json& s, const Json& v) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : "schema false";
    if (s.contains("$ref")) return check(resolve(s["$ref"].get<std::string>()), v);
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        for (const auto& b : s[key])
          if (check(b, v).empty()) return "";
        return std::string("no ") + key + " branch fits " + v.dump();
      }
    if (s.contains("allOf"))
      for (const auto& b : s["allOf"])
        if (auto w = check(b, v); !w.empty()) return w;
    if (s.contains("const") && s["const"] != v) return "not the const: " + v.dump();
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return "not in the enum: " + v.dump();
    if (s.contains("type")) {
      std::vector<std::string> types;
      if (s["type"].is_string()) types.push_back(s["type"]);
      else for (const auto& t : s["type"]) types.push_back(t);
      bool any = false;
      for (const auto& t : types) any |= has_type(v, t);
      if (!any) return "wrong type: " + v.dump() + " for " + s["type"].dump();
    }
    if (v.is_string()) return check_string(s, v.get<std::string>());
    if (v.is_number()) return check_number(s, v);
    if (v.is_object()) return check_object(s, v);
    if (v.is_array()) return check_array(s, v);
    return "";
  }

 private:
  const Json& root_;

  const Json& resolve(const std::string& ref) const {
    const Json* node = &root_;
    if (ref == "#") return *node;
    std::string rest = ref.substr(2);
    while (true) {
      const size_t slash = rest.find('/');
      std::string seg = rest.substr(0, slash);
      node = &(*node)[seg];
      if (slash == std::string::npos) break;
      rest = rest.substr(slash + 1);
    }
    return *node;
  }

  static bool has_type(const Json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  static std::string check_string(const Json& s, const std::string& str) {
    const std::wstring w = widen(str);
    if (s.contains("minLength") && w.size() < s["minLength"].get<size_t>()) return "too short: " + str;
    if (s.contains("maxLength") && w.size() > s["maxLength"].get<size_t>()) return "too long: " + str;
    if (s.contains("pattern") && !std::regex_search(w, std::wregex(widen(s["pattern"].get<std::string>()))))
      return "does not match the pattern: " + str;
    if (s.contains("format")) {
      static const std::map<std::string, std::string> formats = {
          {"date", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$)"},
          {"time", R"(^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
          {"date-time", R"(^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$)"},
          {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
          {"email", R"(^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$)"},
          {"ipv4", R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)"},
      };
      if (!std::regex_search(str, std::regex(formats.at(s["format"].get<std::string>())))) return "not a " + s["format"].get<std::string>() + ": " + str;
    }
    return "";
  }

  static std::string check_number(const Json& s, const Json& v) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return "below the minimum: " + v.dump();
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return "above the maximum: " + v.dump();
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) return "not above exclusiveMinimum: " + v.dump();
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) return "not below exclusiveMaximum: " + v.dump();
    return "";
  }

  std::string check_object(const Json& s, const Json& v) const {
    if (s.contains("required"))
      for (const auto& r : s["required"])
        if (!v.contains(r.get<std::string>())) return "missing required " + r.dump();
    for (const auto& [key, value] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(key)) {
        if (auto w = check(s["properties"][key], value); !w.empty()) return key + ": " + w;
      } else if (s.contains("additionalProperties")) {
        if (auto w = check(s["additionalProperties"], value); !w.empty()) return "additional " + key + ": " + w;
      }
    }
    return "";
  }

  std::string check_array(const Json& s, const Json& v) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "too many items";
    const size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const Json& sub = i < prefix ? s["prefixItems"][i] : s.contains("items") ? s["items"] : Json(true);
      if (auto w = check(sub, v[i]); !w.empty()) return "item " + std::to_string(i) + ": " + w;
    }
    return "";
  }
};

// --- random walks ---

// The shortest way to a complete state in single-character ASCII tokens (breadth-first over
// parse states), for walks the closing heuristic does not finish (an unanchored pattern needs
// its word somewhere). Empty when none is found within the budget.
std::vector<int32_t> shortest_completion(Matcher& m, const TokenVocab& v) {
  std::vector<int32_t> chars;
  for (int c = 0x20; c < 0x7F; ++c)
    for (int32_t id = 0; id < v.n_vocab(); ++id)
      if (v.piece(id) == std::string(1, static_cast<char>(c)) && !v.is_special(id)) {
        chars.push_back(id);
        break;
      }
  struct Node {
    Matcher::Snapshot state;
    int parent;
    int32_t token;
  };
  std::vector<Node> nodes = {{m.snapshot(), -1, -1}};
  std::set<std::vector<uint32_t>> seen = {nodes[0].state.state};
  for (size_t i = 0; i < nodes.size() && nodes.size() < 200000; ++i) {
    m.restore(nodes[i].state);
    if (m.is_complete()) {
      std::vector<int32_t> path;
      for (int k = static_cast<int>(i); nodes[k].parent >= 0; k = nodes[k].parent) path.insert(path.begin(), nodes[k].token);
      m.restore(nodes[0].state);
      return path;
    }
    for (int32_t id : chars) {
      m.restore(nodes[i].state);
      if (!m.accept_token(id).ok()) continue;
      Matcher::Snapshot s = m.snapshot();
      if (seen.insert(s.state).second) nodes.push_back({std::move(s), static_cast<int>(i), id});
    }
  }
  m.restore(nodes[0].state);
  return {};
}

// Generates a text through the masks: random allowed tokens for `soft_cap` steps, then tokens
// that close what is open (half the time the first allowed of kClosers, half the time a random
// allowed one of them, so a forced character such as an email's "@" comes too); stops at a
// complete state (sometimes earlier, at random).
bool random_walk(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const TokenVocab>& v, std::mt19937& rng, std::string* text,
                 std::string* why) {
  auto m = Matcher::create(g, v);
  if (!m) {
    *why = m.error().str();
    return false;
  }
  static const char* kClosers[] = {"\"", "}", "]", "0", ",", "1", "a", ":", "-", "e", "n", "t", "f", "Z", "@", "."};
  std::vector<int32_t> closer_ids;
  for (const char* c : kClosers)
    for (int32_t id = 0; id < v->n_vocab(); ++id)
      if (v->piece(id) == c && !v->is_special(id)) {
        closer_ids.push_back(id);
        break;
      }
  const int soft_cap = 40 + static_cast<int>(rng() % 80), hard_cap = soft_cap + 300;
  std::vector<uint32_t> bits(v->mask_words());
  text->clear();
  for (int step = 0; step < hard_cap; ++step) {
    auto n = m->fill_mask(bits);
    if (!n) {
      *why = n.error().str();
      return false;
    }
    std::vector<int32_t> ids;
    for (int32_t id : allowed_ids(bits, v->n_vocab()))
      if (!v->is_eog(id)) ids.push_back(id);
    if (m->is_complete() && (ids.empty() || step >= soft_cap || rng() % 10 == 0)) return true;
    if (ids.empty()) {
      *why = "stuck: no token allowed and the grammar is not complete after: " + *text;
      return false;
    }
    int32_t pick = -1;
    if (step >= soft_cap) {
      std::vector<int32_t> closers;
      for (int32_t c : closer_ids)
        if (testing::bit(bits, c)) closers.push_back(c);
      if (!closers.empty()) pick = rng() % 2 ? closers[0] : closers[rng() % closers.size()];
    }
    if (pick < 0) pick = ids[rng() % ids.size()];
    if (auto st = m->accept_token(pick); !st) {
      *why = "an allowed token was refused: " + st.error().str();
      return false;
    }
    *text += v->piece(pick);
  }
  for (int32_t id : shortest_completion(*m, *v)) {
    if (auto st = m->accept_token(id); !st) {
      *why = "the completion was refused: " + st.error().str();
      return false;
    }
    *text += v->piece(id);
  }
  if (m->is_complete()) return true;
  *why = "no complete text within " + std::to_string(hard_cap) + " tokens and no completion found: " + *text;
  return false;
}

void walk_schemas(const std::shared_ptr<const TokenVocab>& v, int walks_per_schema, uint32_t seed) {
  std::mt19937 rng(seed);
  int total = 0;
  for (const auto& c : data()["schemas"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto g = compile_json_schema(c["schema"]);
    ASSERT_TRUE(g.ok()) << g.error().str();
    const Validator val(c["schema"]);
    for (int w = 0; w < walks_per_schema; ++w) {
      std::string text, why;
      ASSERT_TRUE(random_walk(*g, v, rng, &text, &why)) << why;
      Json parsed;
      try {
        parsed = Json::parse(text);
      } catch (const std::exception& e) {
        FAIL() << "not JSON: " << e.what() << "\n" << text;
      }
      EXPECT_EQ(val.check(c["schema"], parsed), "") << text;
      if (std::getenv("GGFLOW_GRAMMAR_TEST_VERBOSE")) std::printf("%s: %s\n", c["name"].get<std::string>().c_str(), text.c_str());
      ++total;
    }
  }
  EXPECT_GE(total, 50 * walks_per_schema);
}

// --- tests ---

TEST(GrammarJsonSchema, AtLeastFiftySchemas) { EXPECT_GE(data()["schemas"].size(), 50u); }

TEST(GrammarJsonSchema, ValidInstancesMatchInvalidOnesDoNot) {
  for (const auto& c : data()["schemas"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto g = compile_json_schema(c["schema"]);
    ASSERT_TRUE(g.ok()) << g.error().str();
    const Validator val(c["schema"]);
    for (const auto& inst : c["valid"]) {
      EXPECT_EQ(val.check(c["schema"], inst), "") << "the test's own validator refuses " << inst.dump();
      EXPECT_TRUE(testing::matches(*g, inst.dump())) << "should match: " << inst.dump() << "\n" << (*g)->to_gbnf();
      if (c.value("pretty", true)) {
        EXPECT_TRUE(testing::matches(*g, inst.dump(2) + "\n")) << "should match:\n" << inst.dump(2);
      }
    }
    for (const auto& inst : c["invalid"]) EXPECT_FALSE(testing::matches(*g, inst.dump())) << "should not match: " << inst.dump();
  }
}

TEST(GrammarJsonSchema, RandomWalksOnSyntheticVocabSatisfyTheSchema) { walk_schemas(testing::synthetic_vocab().vocab, 30, 1); }

TEST(GrammarJsonSchema, RandomWalksOnSmolLM2VocabSatisfyTheSchema) {
  GGFLOW_REQUIRE_FILE(testing::smollm2_path(), "SmolLM2 model not present (scripts/setup.sh installs it)");
  auto v = testing::smollm2_vocab();
  ASSERT_TRUE(v);
  walk_schemas(v, 3, 2);
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  for (const auto& c : data()["unsupported"]) {
    auto g = compile_json_schema(c["schema"]);
    ASSERT_FALSE(g.ok()) << "accepted " << c["schema"].dump();
    EXPECT_NE(g.error().str().find(c["error"].get<std::string>()), std::string::npos) << g.error().str();
    EXPECT_EQ(g.error().what.rfind("json schema: ", 0), 0u) << g.error().str();
  }
  auto g = compile_json_schema(Json::parse(R"({"type": "object", "properties": {"x": {"patternProperties": {}}}})"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().what, "json schema: unsupported keyword 'patternProperties' at #/properties/x");
  EXPECT_NE(g.error().hint.find("supported: type, enum, const, properties"), std::string::npos);
}

TEST(GrammarJsonSchema, TooLargeSchemasAreRefused) {
  Json deep = {{"type", "integer"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  auto g = compile_json_schema(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what.find("nested deeper than Limits::max_nesting = 64"), std::string::npos) << g.error().str();
  Limits small;
  small.max_elements = 2000;
  auto big = compile_json_schema(Json::parse(R"({"type": "array", "items": {"type": "string", "maxLength": 900}, "maxItems": 900})"), small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().str().find("elements"), std::string::npos) << big.error().str();
}

TEST(GrammarJsonSchema, GeneratedGrammarReads) {
  auto gbnf = json_schema_to_gbnf(Json::parse(R"({"type": "object", "properties": {"name": {"type": "string"},
      "n": {"type": "integer", "minimum": 1, "maximum": 12}}, "required": ["name"], "additionalProperties": false})"));
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().str();
  EXPECT_EQ(*gbnf, R"(root ::= root-2 ws
root-n ::= ( [1-9] | "1" [0-2] )
root-name-kv ::= "\"name\"" ws ":" ws string ws
root-n-kv ::= "\"n\"" ws ":" ws root-n ws
root-after ::= root-n-kv
root-rest ::= "," ws root-after | ""
root-after-2 ::= root-name-kv root-rest
root-2 ::= "{" ws root-after-2 "}"
ws ::= ( " " | "\n" [ \t]{0,20} )?
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
)");
}

TEST(GrammarJsonSchema, JsonObjectMode) {
  auto g = json_object_grammar();
  EXPECT_TRUE(testing::matches(g, R"({"a": [1, 2.5e3, "x", null, true, {"b": {}}]})"));
  EXPECT_TRUE(testing::matches(g, "{}"));
  EXPECT_TRUE(testing::matches(g, "{\n  \"k\": \"v\"\n}\n"));
  EXPECT_FALSE(testing::matches(g, "[1]"));
  EXPECT_FALSE(testing::matches(g, "\"s\""));
  EXPECT_FALSE(testing::matches(g, "{\"a\": 1,}"));
  EXPECT_FALSE(testing::matches(g, "{\"a\":    1}"));  // whitespace is bounded
  EXPECT_EQ(json_object_grammar(), json_object_grammar());  // compiled once
  std::mt19937 rng(5);
  for (int i = 0; i < 30; ++i) {
    std::string text, why;
    ASSERT_TRUE(random_walk(g, testing::synthetic_vocab().vocab, rng, &text, &why)) << why;
    EXPECT_TRUE(Json::parse(text).is_object()) << text;
  }
}

}  // namespace
}  // namespace ggflow::grammar
