// The Matcher: masks equal a brute-force oracle (each token tried on a restored copy) on random
// states, over a synthetic vocabulary and SmolLM2's; tokens that end inside a UTF-8 character;
// end-of-generation and special tokens; snapshots and copies; the shared mask cache; and the
// run-time bounds on ambiguous, deep and expensive grammars.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "require_file.h"

namespace ggflow::grammar {
namespace {

using testing::allowed_ids;
using testing::bit;
using testing::must_match;
using testing::must_parse;
using testing::oracle_mask;

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(GGFLOW_ROOT) + "/tests/grammar/data/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint32_t> mask_of(const Matcher& m) {
  std::vector<uint32_t> bits(m.vocab().mask_words());
  auto n = m.fill_mask(bits);
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().str());
  return bits;
}

// Random walks: at each state the mask must equal the oracle; then a random allowed token.
// Returns the number of states checked.
int walk_against_oracle(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const TokenVocab>& v, uint32_t seed, int walks,
                        int max_steps, int check_every = 1) {
  std::mt19937 rng(seed);
  int checked = 0;
  for (int w = 0; w < walks; ++w) {
    Matcher m = must_match(g, v);
    for (int step = 0; step < max_steps; ++step) {
      const auto bits = mask_of(m);
      if (step % check_every == 0) {
        const auto want = oracle_mask(m);
        ++checked;
        if (bits != want) {
          const auto got_ids = allowed_ids(bits, v->n_vocab()), want_ids = allowed_ids(want, v->n_vocab());
          ADD_FAILURE() << "mask != oracle at walk " << w << " step " << step << ": " << got_ids.size() << " vs " << want_ids.size();
          for (int32_t id = 0; id < v->n_vocab(); ++id)
            if (bit(bits, id) != bit(want, id)) {
              ADD_FAILURE() << "first difference: token " << id << " '" << v->piece(id) << "' mask " << bit(bits, id);
              break;
            }
          return checked;
        }
      }
      const auto ids = allowed_ids(bits, v->n_vocab());
      if (ids.empty()) break;
      const int32_t id = ids[rng() % ids.size()];
      auto st = m.accept_token(id);
      EXPECT_TRUE(st.ok()) << st.error().str();
      if (m.is_ended()) break;
    }
  }
  return checked;
}

std::vector<std::shared_ptr<const Grammar>> oracle_grammars() {
  std::vector<std::shared_ptr<const Grammar>> gs;
  for (const char* f : {"json.gbnf", "arithmetic.gbnf", "c.gbnf", "list.gbnf", "chess.gbnf"}) gs.push_back(must_parse(read_data(f)));
  gs.push_back(json_object_grammar());
  auto schema = compile_json_schema(Json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6}, "tags": {"type": "array", "items": {"enum": ["a", "b", "é"]}},
      "n": {"type": "integer", "minimum": -5, "maximum": 300}, "ok": {"type": ["boolean", "null"]}},
      "required": ["name"], "additionalProperties": {"type": "number"}})"));
  EXPECT_TRUE(schema.ok()) << schema.error().str();
  gs.push_back(*schema);
  // Code points split across tokens, and `.` (which must still refuse invalid UTF-8).
  gs.push_back(must_parse("root ::= ( \"caf\xC3\xA9\" | [\\u00e0-\\u00ff] | \"\xE6\x97\xA5\" | \"\xF0\x9F\x98\x80\" | . )+ \"!\"\n"));
  return gs;
}

TEST(GrammarMatcher, MaskEqualsOracleOnSyntheticVocab) {
  const auto v = testing::synthetic_vocab().vocab;
  int checked = 0;
  uint32_t seed = 1;
  for (const auto& g : oracle_grammars()) checked += walk_against_oracle(g, v, seed++, 6, 60);
  EXPECT_GT(checked, 500);
}

// With room for only two cached step rows, the rows are dropped and refilled during every mask
// walk; masks stay exact.
TEST(GrammarMatcher, MaskEqualsOracleWhenStepRowsAreDropped) {
  Limits tiny;
  tiny.max_step_rows = 2;
  std::vector<std::string> pieces;  // no shared cache: every mask is walked
  const auto& sv = testing::synthetic_vocab();
  for (int32_t id = 0; id < sv.vocab->n_vocab(); ++id) pieces.push_back(sv.vocab->piece(id));
  auto v = TokenVocab::from_pieces(pieces, std::vector<int32_t>{sv.control}, std::vector<int32_t>{sv.eos}, {.mask_cache_bytes = 0});
  ASSERT_TRUE(v.ok());
  int checked = 0;
  for (const char* f : {"json.gbnf", "c.gbnf"}) {
    auto g = parse_gbnf(read_data(f), "root", tiny);
    ASSERT_TRUE(g.ok()) << g.error().str();
    checked += walk_against_oracle(*g, *v, 9, 3, 40);
  }
  auto schema = compile_json_schema(Json::parse(R"({"type": "array", "items": {"type": "string", "maxLength": 5}})"), tiny);
  ASSERT_TRUE(schema.ok());
  checked += walk_against_oracle(*schema, *v, 10, 3, 40);
  if (auto big = testing::smollm2_vocab()) checked += walk_against_oracle(*schema, big, 11, 1, 12, 3);
  EXPECT_GT(checked, 100);
}

TEST(GrammarMatcher, MaskEqualsOracleOnSmolLM2Vocab) {
  GGFLOW_REQUIRE_FILE(testing::smollm2_path(), "SmolLM2 model not present (scripts/setup.sh installs it)");
  const auto v = testing::smollm2_vocab();
  ASSERT_TRUE(v);
  ASSERT_EQ(v->n_vocab(), 49152);
  int checked = 0;
  uint32_t seed = 100;
  for (const auto& g : oracle_grammars()) checked += walk_against_oracle(g, v, seed++, 1, 24, 4);
  EXPECT_GE(checked, 30);
}

TEST(GrammarMatcher, PartialUtf8Tokens) {
  const auto& sv = testing::synthetic_vocab();
  const auto& v = *sv.vocab;
  auto id_of = [&](std::string_view piece) {
    for (int32_t id = 0; id < v.n_vocab(); ++id)
      if (v.piece(id) == piece) return id;
    ADD_FAILURE() << "no token for the piece";
    return -1;
  };
  auto g = must_parse("root ::= \"caf\xC3\xA9!\" | \"\xE6\x97\xA5\"\n");
  Matcher m = must_match(g);
  ASSERT_TRUE(m.accept_token(id_of("caf\xC3")).ok());  // ends inside é
  EXPECT_FALSE(m.is_complete());
  auto bits = mask_of(m);
  EXPECT_TRUE(bit(bits, id_of("\xA9")));
  EXPECT_TRUE(bit(bits, id_of("\xA9!")));
  EXPECT_FALSE(bit(bits, id_of("\xC3\xA9")));
  EXPECT_FALSE(bit(bits, sv.eos));
  std::set<std::string> pieces;  // "\xA9" is in the vocabulary twice
  for (int32_t id : allowed_ids(bits, v.n_vocab())) pieces.insert(v.piece(id));
  EXPECT_EQ(pieces, (std::set<std::string>{"\xA9", "\xA9!"}));
  ASSERT_TRUE(m.accept_token(id_of("\xA9!")).ok());
  EXPECT_TRUE(m.is_complete());
  // Three tokens for one character.
  Matcher j = must_match(g);
  ASSERT_TRUE(j.accept_token(id_of("\xE6")).ok());
  ASSERT_TRUE(j.accept_token(id_of("\x97")).ok());
  EXPECT_FALSE(j.accept_token(id_of("\xA9")).ok());  // the wrong last byte
  ASSERT_TRUE(j.accept_token(id_of("\xA5")).ok());
  EXPECT_TRUE(j.is_complete());
  // Under `.`, invalid UTF-8 is never allowed: overlong forms, surrogates, stray bytes.
  auto any = must_parse("root ::= .*\n");
  Matcher a = must_match(any);
  bits = mask_of(a);
  for (const char* bad : {"\xC0\x80", "\xED\xA0\x80", "\x80", "\xFF", "\xF5", "\xC0", "\xC1"}) EXPECT_FALSE(bit(bits, id_of(bad))) << "allowed a bad byte";
  for (const char* good : {"\xC3", "\xE6\x97", "\xF0\x9F", "\xF0\x9F\x98\x80", "\xE6\x97\xA5"}) EXPECT_TRUE(bit(bits, id_of(good)));
  ASSERT_TRUE(a.accept_token(id_of("\xF0\x9F")).ok());
  bits = mask_of(a);
  EXPECT_TRUE(bit(bits, id_of("\x98\x80")));
  EXPECT_FALSE(bit(bits, id_of("\xF0\x9F")));
  EXPECT_FALSE(a.is_complete());  // half a character is never a complete text
  EXPECT_FALSE(a.accept_token(sv.eos).ok());
}

TEST(GrammarMatcher, EndOfGenerationAndSpecialTokens) {
  const auto& sv = testing::synthetic_vocab();
  auto g = must_parse("root ::= \"ab\" \"c\"?\n");
  Matcher m = must_match(g);
  auto bits = mask_of(m);
  EXPECT_FALSE(bit(bits, sv.eos));
  EXPECT_FALSE(bit(bits, sv.control));
  EXPECT_FALSE(bit(bits, sv.empty));
  auto early = m.accept_token(sv.eos);
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().what.find("before the grammar is complete"), std::string::npos) << early.error().str();
  EXPECT_NE(m.accept_token(sv.control).error().what.find("special token"), std::string::npos);
  EXPECT_NE(m.accept_token(sv.empty).error().what.find("no bytes"), std::string::npos);
  EXPECT_NE(m.accept_token(-1).error().what.find("outside the vocabulary"), std::string::npos);
  ASSERT_TRUE(m.accept_bytes("ab").ok());
  bits = mask_of(m);
  EXPECT_TRUE(bit(bits, sv.eos));
  EXPECT_FALSE(bit(bits, sv.control));
  ASSERT_TRUE(m.accept_token(sv.eos).ok());
  EXPECT_TRUE(m.is_ended());
  bits = mask_of(m);
  EXPECT_TRUE(allowed_ids(bits, sv.vocab->n_vocab()).empty());
  EXPECT_FALSE(m.accept_bytes("c").ok());
}

TEST(GrammarMatcher, RejectionSaysWhatWasExpectedAndKeepsState) {
  auto g = must_parse("root ::= \"{\" [0-9]+ \"}\"\n");
  Matcher m = must_match(g);
  ASSERT_TRUE(m.accept_bytes("{12").ok());
  const auto before = mask_of(m);
  auto st = m.accept_bytes("3x}");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what.find("(byte 1) does not fit after \"{123\": no parse continues; the grammar expects [0-9], \"}\""), std::string::npos)
      << st.error().str();
  EXPECT_EQ(mask_of(m), before);  // unchanged
  EXPECT_TRUE(m.accept_bytes("3}").ok());
  EXPECT_TRUE(m.is_complete());
}

TEST(GrammarMatcher, SnapshotRestoreAndCopy) {
  const auto v = testing::synthetic_vocab().vocab;
  auto g = must_parse(read_data("json.gbnf"));
  std::mt19937 rng(7);
  Matcher m = must_match(g, v);
  std::vector<Matcher::Snapshot> snaps;
  std::vector<std::vector<uint32_t>> masks;
  for (int step = 0; step < 40; ++step) {
    snaps.push_back(m.snapshot());
    masks.push_back(mask_of(m));
    Matcher copy = m;  // a copy answers the same
    EXPECT_EQ(mask_of(copy), masks.back());
    EXPECT_EQ(copy.is_complete(), m.is_complete());
    const auto ids = allowed_ids(masks.back(), v->n_vocab());
    if (ids.empty()) break;
    ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]).ok());
  }
  for (size_t i = snaps.size(); i-- > 0;) {
    m.restore(snaps[i]);
    EXPECT_EQ(mask_of(m), masks[i]) << "restored step " << i;
  }
  // A snapshot restores into another matcher of an equal grammar (fingerprints match).
  Matcher other = must_match(must_parse(read_data("json.gbnf")), v);
  other.restore(snaps[snaps.size() / 2]);
  EXPECT_EQ(mask_of(other), masks[snaps.size() / 2]);
}

TEST(GrammarMatcher, SharedMaskCacheAcrossRequests) {
  auto opts = TokenVocab::Options{};
  auto v = TokenVocab::from_pieces({"a", "b", "ab", "}", "{", "<eos>"}, std::vector<int32_t>{}, std::vector<int32_t>{5}, opts);
  ASSERT_TRUE(v.ok());
  auto g1 = must_parse("root ::= \"{\" [ab]* \"}\"\n");
  auto g2 = must_parse("root ::= \"{\" [ab]* \"}\"\n");  // compiled again: same fingerprint
  Matcher m1 = must_match(g1, *v), m2 = must_match(g2, *v);
  ASSERT_TRUE(m1.accept_bytes("{ab").ok());
  ASSERT_TRUE(m2.accept_bytes("{ba").ok());  // the same parse state
  const auto before = (*v)->cache_stats();
  const auto a = mask_of(m1);
  const auto b = mask_of(m2);
  const auto after = (*v)->cache_stats();
  EXPECT_EQ(a, b);
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(allowed_ids(a, 6), (std::vector<int32_t>{0, 1, 2, 3}));
  // A bounded cache evicts: 1 byte of budget keeps nothing.
  opts.mask_cache_bytes = 1;
  auto tiny = TokenVocab::from_pieces({"a", "<eos>"}, std::vector<int32_t>{}, std::vector<int32_t>{1}, opts);
  Matcher t = must_match(must_parse("root ::= \"a\"*\n"), *tiny);
  mask_of(t);
  EXPECT_EQ((*tiny)->cache_stats().entries, 0u);
}

// Ambiguity: equal parses merge; exponentially many distinct ones hit Limits::max_stacks with
// an error, quickly and in bounded memory.
TEST(GrammarMatcher, AmbiguityIsBounded) {
  const auto v = testing::synthetic_vocab().vocab;
  auto merged = must_parse("root ::= ( \"a\" | \"a\" | \"aa\" )*\n");
  Matcher m = must_match(merged, v);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(m.accept_bytes(std::string(5000, 'a')).ok());
  EXPECT_TRUE(m.is_complete());
  // After n a's: 2^n pending suffixes of b/c, each under 3 tops (two "a", one "b" or "c").
  auto exp = must_parse("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n");
  Matcher e = must_match(exp, v);
  auto st = e.accept_bytes(std::string(40, 'a'));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what.find("too ambiguous here: more than Limits::max_stacks = 256 parses"), std::string::npos) << st.error().str();
  // Up to the limit it works, and the mask is still exact.
  Matcher ok = must_match(exp, v);
  ASSERT_TRUE(ok.accept_bytes(std::string(5, 'a')).ok());  // 96 parses
  EXPECT_EQ(mask_of(ok), oracle_mask(ok));
  // A mask where some token would exceed the limit leaves that token out, like accept does.
  Matcher edge = must_match(exp, v);
  ASSERT_TRUE(edge.accept_bytes(std::string(6, 'a')).ok());  // 192 parses; one more "a" makes 384
  EXPECT_EQ(mask_of(edge), oracle_mask(edge));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0);
}

TEST(GrammarMatcher, DepthAndWorkAreBounded) {
  const auto v = testing::synthetic_vocab().vocab;
  auto nest = must_parse("root ::= \"(\" root \")\" | \"x\"\n");
  Matcher m = must_match(nest, v);
  auto st = m.accept_bytes(std::string(5000, '('));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what.find("deeper than Limits::max_stack_depth = 2048"), std::string::npos) << st.error().str();
  Matcher fine = must_match(nest, v);
  EXPECT_TRUE(fine.accept_bytes(std::string(2000, '(') + "x" + std::string(2000, ')')).ok());
  EXPECT_TRUE(fine.is_complete());
  // A closure that expands many references for one character.
  std::string wide = "root ::= r0\n";
  for (int i = 0; i < 12; ++i) wide += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " | r" + std::to_string(i + 1) + " \"b\"\n";
  wide += "r12 ::= \"a\"\n";
  Limits tight;
  tight.max_closure_steps = 20;
  auto g = parse_gbnf(wide, "root", tight);
  ASSERT_TRUE(g.ok()) << g.error().str();
  auto w = Matcher::create(*g, v);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what.find("max_closure_steps = 20"), std::string::npos) << w.error().str();
  Limits masks;
  masks.max_mask_work = 10;
  auto g2 = parse_gbnf(read_data("json.gbnf"), "root", masks);
  ASSERT_TRUE(g2.ok());
  std::vector<std::string> pieces;  // a vocabulary without the shared cache (which may hold the mask)
  for (int32_t id = 0; id < v->n_vocab(); ++id) pieces.push_back(v->piece(id));
  auto uncached = TokenVocab::from_pieces(pieces, std::vector<int32_t>{}, std::vector<int32_t>{}, {.mask_cache_bytes = 0});
  ASSERT_TRUE(uncached.ok());
  Matcher mw = must_match(*g2, *uncached);
  std::vector<uint32_t> bits(v->mask_words());
  auto r = mw.fill_mask(bits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("max_mask_work = 10"), std::string::npos) << r.error().str();
}

// Matchers on many threads share one vocabulary's mask cache: each thread's masks equal what a
// matcher alone computes.
TEST(GrammarMatcher, ConcurrentMatchersShareTheCache) {
  auto pieces = std::vector<std::string>();
  const auto& sv = testing::synthetic_vocab();
  for (int32_t id = 0; id < sv.vocab->n_vocab(); ++id) pieces.push_back(sv.vocab->piece(id));
  auto shared = TokenVocab::from_pieces(pieces, std::vector<int32_t>{sv.control}, std::vector<int32_t>{sv.eos}, {.mask_cache_bytes = 64 << 10});
  ASSERT_TRUE(shared.ok());
  auto g = must_parse(read_data("json.gbnf"));
  // Each thread replays its own random walk; the expected masks come from the unshared vocabulary.
  constexpr int kThreads = 4, kSteps = 60;
  std::vector<std::vector<int32_t>> walks(kThreads);
  std::vector<std::vector<std::vector<uint32_t>>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937 rng(100 + t % 2);  // two pairs of equal walks: shared states
    Matcher m = must_match(g, sv.vocab);
    for (int step = 0; step < kSteps; ++step) {
      want[t].push_back(mask_of(m));
      const auto ids = allowed_ids(want[t].back(), sv.vocab->n_vocab());
      if (ids.empty()) break;
      walks[t].push_back(ids[rng() % ids.size()]);
      ASSERT_TRUE(m.accept_token(walks[t].back()).ok());
    }
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        auto m = Matcher::create(g, *shared);
        for (size_t step = 0; step < walks[t].size(); ++step) {
          std::vector<uint32_t> bits((*shared)->mask_words());
          if (!m->fill_mask(bits).ok() || bits != want[t][step]) ++mismatches;
          if (!m->accept_token(walks[t][step]).ok()) ++mismatches;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT((*shared)->cache_stats().hits, 0u);
}

TEST(GrammarMatcher, VocabularyErrors) {
  EXPECT_FALSE(TokenVocab::from_pieces({}, std::vector<int32_t>{}, std::vector<int32_t>{}).ok());
  auto bad = TokenVocab::from_pieces({"a"}, std::vector<int32_t>{3}, std::vector<int32_t>{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("special id 3 is outside"), std::string::npos);
}

TEST(GrammarMatcher, FromTokenizerMarksSpecialTokens) {
  GGFLOW_REQUIRE_FILE(testing::smollm2_path(), "SmolLM2 model not present (scripts/setup.sh installs it)");
  const auto v = testing::smollm2_vocab();
  ASSERT_TRUE(v);
  auto f = gguf::File::open(testing::smollm2_path());
  ASSERT_TRUE(f.ok());
  auto tok = text::Tokenizer::from_file(*f);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE(v->is_eog(tok->eos()));
  EXPECT_TRUE(v->is_special(tok->eos()));
  const int32_t im_start = tok->find_token("<|im_start|>");
  ASSERT_GE(im_start, 0);
  EXPECT_TRUE(v->is_special(im_start));
  EXPECT_FALSE(v->is_eog(im_start));
  // The whole vocabulary walks: under `.*` every ordinary token that is valid UTF-8 (or the
  // start of it) is allowed.
  Matcher m = must_match(must_parse("root ::= .*\n"), v);
  const auto bits = mask_of(m);
  EXPECT_EQ(bits, oracle_mask(m));
  EXPECT_GT(allowed_ids(bits, v->n_vocab()).size(), 48000u);
}

}  // namespace
}  // namespace ggflow::grammar
