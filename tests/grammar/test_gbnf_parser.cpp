// GBNF parsing and compilation: the syntax of grammar.h, errors with line:col, the compile-time
// refusals (left recursion, rules that never finish, limits) and the printed form.
#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace ggflow::grammar {
namespace {

using testing::matches;
using testing::must_parse;

std::string error_of(std::string_view gbnf, const Limits& limits = {}) {
  auto g = parse_gbnf(gbnf, "root", limits);
  EXPECT_FALSE(g.ok()) << "accepted:\n" << gbnf;
  return g.ok() ? "" : g.error().str();
}

TEST(GrammarGbnf, Literals) {
  auto g = must_parse(R"(root ::= "a\n\r\t\\\"\[\]\x41\u00e9\U0001F600" "")");
  EXPECT_TRUE(matches(g, "a\n\r\t\\\"[]A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "a"));
  g = must_parse("root ::= \"caf\xC3\xA9 \xE6\x97\xA5\"\n");  // UTF-8 in the text
  EXPECT_TRUE(matches(g, "caf\xC3\xA9 \xE6\x97\xA5"));
}

TEST(GrammarGbnf, ClassesAndAny) {
  auto g = must_parse(R"(root ::= [a-c0-9_] [^"\\] [\-\]x] [\x00-\x1F] . [^a-z])");
  EXPECT_TRUE(matches(g, "b'-\x01\xE6\x97\xA5Z"));
  EXPECT_TRUE(matches(g, "_a]\x1F!0"));
  EXPECT_FALSE(matches(g, "d'-\x01!Z"));   // d not in [a-c0-9_]
  EXPECT_FALSE(matches(g, "b\"-\x01!Z"));  // " excluded
  EXPECT_FALSE(matches(g, "b'-\x01!z"));   // z excluded
  g = must_parse("root ::= [a-] [-a]\n");   // a '-' at either end is literal
  EXPECT_TRUE(matches(g, "--"));
  EXPECT_TRUE(matches(g, "aa"));
}

TEST(GrammarGbnf, Repetitions) {
  auto g = must_parse(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{0,2} "xy"{2,3})");
  EXPECT_TRUE(matches(g, "bddexyxy"));
  EXPECT_TRUE(matches(g, "aaabbcddeeeffxyxyxy"));
  EXPECT_FALSE(matches(g, "ddexyxy"));       // b+ needs one
  EXPECT_FALSE(matches(g, "bdexyxy"));       // d{2}
  EXPECT_FALSE(matches(g, "bddexy"));        // xy{2,3}
  EXPECT_FALSE(matches(g, "bddefffxyxy"));   // f{0,2}
  EXPECT_FALSE(matches(g, "bddexyxyxyxy"));  // xy{2,3}
  g = must_parse("root ::= ( \"a\" | \"b\" ){ 1 , 3 } \"!\"\n");  // spaces inside braces
  EXPECT_TRUE(matches(g, "aba!"));
  EXPECT_FALSE(matches(g, "abab!"));
}

TEST(GrammarGbnf, MultiLineRulesAndComments) {
  auto g = must_parse(R"(# a comment line
root ::= greeting   # trailing comment
  | (
      "x"
      "y"   # inside a group
    )
greeting ::= "hi" |
  "hello"
   | "hey"
my_rule-2 ::= "unused"
)");
  EXPECT_TRUE(matches(g, "hi"));
  EXPECT_TRUE(matches(g, "hello"));
  EXPECT_TRUE(matches(g, "hey"));
  EXPECT_TRUE(matches(g, "xy"));
  EXPECT_FALSE(matches(g, "x"));
}

TEST(GrammarGbnf, RootIsConfigurable) {
  auto g = parse_gbnf("start ::= \"s\"\nroot ::= \"r\"\n", "start");
  ASSERT_TRUE(g.ok()) << g.error().str();
  EXPECT_TRUE(matches(*g, "s"));
  EXPECT_FALSE(matches(*g, "r"));
}

TEST(GrammarGbnf, ErrorsSayWhere) {
  EXPECT_EQ(error_of("root ::= \"a\" valu\n"),
            "grammar line 1 col 14: undefined rule 'valu' (hint: define it with 'valu ::= ...' or fix the name)");
  EXPECT_EQ(error_of("root ::= x\nx ::= \"a\"\nx ::= \"b\"\n"),
            "grammar line 3 col 1: rule 'x' is defined twice (first at line 2) (hint: merge the definitions with '|' or rename one)");
  EXPECT_NE(error_of("").find("empty grammar"), std::string::npos);
  EXPECT_NE(error_of("# only a comment\n").find("empty grammar"), std::string::npos);
  EXPECT_NE(error_of("other ::= \"a\"\n").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\\q\"\n").find("grammar line 1 col 12: bad escape '\\q' in string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc\n").find("grammar line 1 col 10: unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-z\n").find("grammar line 1 col 10: unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]\n").find("line 1 col 11: reversed range"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\x4\"\n").find("needs 2 hex digits"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\U00110000\"\n").find("above U+10FFFF"), std::string::npos);
  EXPECT_NE(error_of("root ::= ( \"a\"\n").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" )\n").find("this ')' has no '('"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"\n").find("expected '::='"), std::string::npos);
  EXPECT_NE(error_of("root ::= * \"a\"\n").find("'*' has nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}\n").find("max below min"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{2\n").find("expected '}'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n  \"b\"\n").find("line 2 col 3: expected a rule name"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\xFF\"\n").find("invalid UTF-8"), std::string::npos);
}

TEST(GrammarGbnf, LeftRecursionIsRefused) {
  const std::string direct = error_of("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n");
  EXPECT_NE(direct.find("line 2 col 1: left recursion: expr -> expr"), std::string::npos) << direct;
  EXPECT_NE(direct.find("right-recursive"), std::string::npos);
  const std::string indirect = error_of("root ::= a\na ::= b \"x\" | \"y\"\nb ::= c\nc ::= a \"z\"\n");
  EXPECT_NE(indirect.find("left recursion: a -> b -> c -> a"), std::string::npos) << indirect;
  // Behind a prefix that can match empty text.
  const std::string nullable = error_of("root ::= x\nx ::= opt x \"a\" | \"b\"\nopt ::= \"o\" | \"\"\n");
  EXPECT_NE(nullable.find("left recursion: x -> x"), std::string::npos) << nullable;
  EXPECT_NE(error_of("root ::= ( \"a\"? )*\n").find("left recursion"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= x? \"a\"\n").find("left recursion: x -> x-1 -> x"), std::string::npos);
  EXPECT_NE(error_of("root ::= root | \"a\"\n").find("left recursion: root -> root"), std::string::npos);
  // Right recursion and recursion after a consumed character are fine.
  auto g = must_parse("root ::= \"(\" root \")\" | \"x\"\n");
  EXPECT_TRUE(matches(g, "((x))"));
  EXPECT_FALSE(matches(g, "((x)"));
}

TEST(GrammarGbnf, RulesThatNeverFinishAreRefused) {
  EXPECT_NE(error_of("root ::= \"a\" root\n").find("rule 'root' can never finish"), std::string::npos);
  EXPECT_NE(error_of("root ::= root\n").find("can never finish"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" | \"b\" x\nx ::= \"c\" x\n").find("rule 'x' can never finish"), std::string::npos);
  EXPECT_NE(error_of("root ::= [^\\x00-\\U0010FFFF]\n").find("can never finish"), std::string::npos);
  // An unused broken rule is fine.
  auto g = must_parse("root ::= \"a\"\nunused ::= \"b\" unused\n");
  EXPECT_TRUE(matches(g, "a"));
}

TEST(GrammarGbnf, LimitsAreEnforced) {
  Limits small;
  small.max_repeat = 100;
  EXPECT_NE(error_of("root ::= \"a\"{0,101}\n", small).find("repetition count above the limit of 100"), std::string::npos);
  small = {};
  small.max_elements = 1000;
  EXPECT_NE(error_of("root ::= \"a\"{0,600} \"b\"{0,600}\n", small).find("more than 1000 elements"), std::string::npos);
  small = {};
  small.max_rules = 50;
  EXPECT_NE(error_of("root ::= \"a\"{0,60}\n", small).find("more than 50 rules"), std::string::npos);
  small = {};
  small.max_nesting = 5;
  EXPECT_NE(error_of("root ::= ((((((\"a\"))))))\n", small).find("nested more than 5 deep"), std::string::npos);
  EXPECT_TRUE(parse_gbnf("root ::= ((((\"a\"))))\n", "root", small).ok());
  small = {};
  small.max_text_bytes = 10;
  EXPECT_NE(error_of("root ::= \"abcdefgh\"\n", small).find("above the limit of 10"), std::string::npos);
  // The defaults refuse a repetition bomb quickly instead of building it.
  EXPECT_NE(error_of("root ::= ((\"a\"{0,10000}){0,10000}){0,10000}\n").find("more than"), std::string::npos);
}

TEST(GrammarGbnf, PrintedGrammarParsesBackEqual) {
  for (const char* src : {R"(root ::= "a"* ( "b" | [c-e] )+ "f"{2,4} [^"\\\n] . "\u00e9\x01")",
                          "root ::= x y?\nx ::= \"(\" x \")\" | \"\"\ny ::= [\\x00-\\x1F\\]\\-] y | \"z\"\n"}) {
    auto g = must_parse(src);
    ASSERT_TRUE(g);
    auto again = parse_gbnf(g->to_gbnf());
    ASSERT_TRUE(again.ok()) << again.error().str() << "\n" << g->to_gbnf();
    EXPECT_EQ((*again)->fingerprint(), g->fingerprint()) << g->to_gbnf() << "\n---\n" << (*again)->to_gbnf();
    EXPECT_EQ((*again)->to_gbnf(), g->to_gbnf());
  }
}

TEST(GrammarGbnf, FingerprintIgnoresNamesButNotRules) {
  auto a = must_parse("root ::= x\nx ::= \"a\" x | \"b\"\n");
  auto b = must_parse("root ::= y\ny ::= \"a\" y | \"b\"\n");
  auto c = must_parse("root ::= x\nx ::= \"a\" x | \"c\"\n");
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_NE(a->fingerprint(), c->fingerprint());
  Limits other;
  other.max_stacks = 7;
  auto d = parse_gbnf("root ::= x\nx ::= \"a\" x | \"b\"\n", "root", other);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(a->fingerprint(), (*d)->fingerprint());  // run-time limits change masks
}

}  // namespace
}  // namespace ggflow::grammar
