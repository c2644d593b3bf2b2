// Tokenizer algorithms on hand-built vocabularies: merge order, scores, byte fallback, special
// tokens, bad input, decoding and streaming. No files needed.
#include <gtest/gtest.h>

#include "text/pretok.h"
#include "text/tokenizer.h"
#include "text/tokenizer_stream.h"
#include "text/unicode.h"

using namespace ggflow;
using namespace ggflow::text;

namespace {

// Byte-level BPE: the 256 byte characters (id = byte), then merged tokens.
VocabData byte_bpe(std::vector<std::string> merged, std::vector<std::string> merges) {
  VocabData v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_to_unicode()[b]);
  for (auto& t : merged) v.tokens.push_back(t);
  v.merges = std::move(merges);
  v.types.assign(v.tokens.size(), 1);
  return v;
}

int32_t id_of(const Tokenizer& t, std::string_view s) { return t.find_token(s); }

EncodeOptions plain() {
  EncodeOptions o;
  o.add_special = false;
  o.parse_special = false;
  return o;
}

TEST(TokenizerBpe, MergesByRankNotByLength) {
  auto a = Tokenizer::create(byte_bpe({"ab", "bc"}, {"a b", "b c"}));
  ASSERT_TRUE(a) << a.error().str();
  EXPECT_EQ(*a->encode("abc", plain()), (std::vector<int32_t>{id_of(*a, "ab"), 'c'}));
  auto b = Tokenizer::create(byte_bpe({"ab", "bc"}, {"b c", "a b"}));
  ASSERT_TRUE(b);
  EXPECT_EQ(*b->encode("abc", plain()), (std::vector<int32_t>{'a', id_of(*b, "bc")}));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  auto t = Tokenizer::create(byte_bpe({"aa"}, {"a a"}));
  ASSERT_TRUE(t);
  const int32_t aa = id_of(*t, "aa");
  EXPECT_EQ(*t->encode("aaa", plain()), (std::vector<int32_t>{aa, 'a'}));
  EXPECT_EQ(*t->encode("aaaa", plain()), (std::vector<int32_t>{aa, aa}));
}

TEST(TokenizerBpe, PreTokenizerStopsMergesAtWordBoundaries) {
  // "Ġ" is the byte-level form of a space; gpt-2 splits " b" from "a".
  auto t = Tokenizer::create(byte_bpe({"aĠ", "Ġb"}, {"a Ġ", "Ġ b"}));
  ASSERT_TRUE(t);
  EXPECT_EQ(*t->encode("a b", plain()), (std::vector<int32_t>{'a', id_of(*t, "Ġb")}));
  EXPECT_EQ(*t->decode(*t->encode("a b", plain())), "a b");
}

TEST(TokenizerBpe, BadMergeLineIsAnError) {
  auto t = Tokenizer::create(byte_bpe({}, {"nospace"}));
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().what.find("merges[0]"), std::string::npos);
}

TEST(TokenizerBpe, UnknownPreTokenizerIsAnErrorWithHint) {
  auto v = byte_bpe({}, {});
  v.pre = "no-such-pre";
  auto t = Tokenizer::create(v);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().what.find("no-such-pre"), std::string::npos);
  EXPECT_NE(t.error().hint.find("qwen2"), std::string::npos);
}

TEST(TokenizerVocab, UnsupportedModelAndBadIdsAreErrors) {
  auto v = byte_bpe({}, {});
  v.model = "t5";
  auto unsupported = Tokenizer::create(v);
  ASSERT_FALSE(unsupported);
  EXPECT_NE(unsupported.error().what.find("'t5'"), std::string::npos);
  v.model = "gpt2";
  v.bos = 100000;
  auto t = Tokenizer::create(v);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().what.find("100000"), std::string::npos);
}

// SentencePiece: specials, 256 byte tokens, then pieces with scores.
VocabData spm() {
  VocabData v;
  v.model = "llama";
  auto add = [&](std::string t, float score, TokenType type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(score);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, 0, TokenType::Byte);
  }
  for (const char* p : {"\xE2\x96\x81", "a", "b", "c", "h", "i"}) add(p, -10, TokenType::Normal);
  add("ab", -5, TokenType::Normal);
  add("bc", -1, TokenType::Normal);
  add("\xE2\x96\x81h", -3, TokenType::Normal);
  add("\xE2\x96\x81hi", -2, TokenType::Normal);
  add("<u>", 0, TokenType::UserDefined);
  add("<|ctl|>", 0, TokenType::Control);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

TEST(TokenizerSpm, HigherScoreMergesFirst) {
  auto v = spm();
  v.add_space_prefix = false;
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t->encode("abc", plain()), (std::vector<int32_t>{id_of(*t, "a"), id_of(*t, "bc")}));
}

TEST(TokenizerSpm, SpacePrefixBosAndByteFallback) {
  auto t = Tokenizer::create(spm());
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->add_space_prefix());
  const auto ids = *t->encode("hi\xC3\xA9");  // "hié": é has no piece -> <0xC3><0xA9>
  EXPECT_EQ(ids, (std::vector<int32_t>{1, id_of(*t, "\xE2\x96\x81hi"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(*t->decode(ids), "hi\xC3\xA9");
  DecodeOptions keep;
  keep.strip_leading_space = false;
  keep.render_special = true;
  EXPECT_EQ(*t->decode(ids, keep), "<s> hi\xC3\xA9");
}

TEST(TokenizerSpecial, ParseSpecialSwitchAndUserDefined) {
  auto t = Tokenizer::create(spm());
  ASSERT_TRUE(t);
  const int32_t ctl = id_of(*t, "<|ctl|>"), u = id_of(*t, "<u>");
  auto on = *t->encode("a<|ctl|>b<u>", {.add_special = false, .parse_special = true});
  // As llama.cpp: the raw text after a special token gets the SPM space prefix again.
  const int32_t sp = id_of(*t, "\xE2\x96\x81");
  EXPECT_EQ(on, (std::vector<int32_t>{sp, id_of(*t, "a"), ctl, sp, id_of(*t, "b"), u}));
  // Untrusted input: the control token is text, the user-defined one still matches.
  auto off = *t->encode("<|ctl|><u>", plain());
  EXPECT_EQ(std::count(off.begin(), off.end(), ctl), 0);
  EXPECT_EQ(off.back(), u);
  EXPECT_GT(off.size(), 3u);
}

TEST(TokenizerSpecial, LongestTokenWinsAsInLlamaCpp) {
  auto v = byte_bpe({}, {});
  v.tokens.push_back("<a>");
  v.tokens.push_back("<a>b");
  v.types.push_back(3);
  v.types.push_back(3);
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t->encode("<a>b<a>"), (std::vector<int32_t>{257, 256}));
}

TEST(TokenizerInput, InvalidUtf8IsReplacedOrRefused) {
  auto t = Tokenizer::create(byte_bpe({}, {}));
  ASSERT_TRUE(t);
  auto replaced = t->encode("a\xFF" "b", plain());
  ASSERT_TRUE(replaced);
  EXPECT_EQ(*t->decode(*replaced), "a\xEF\xBF\xBD" "b");
  EncodeOptions strict = plain();
  strict.strict_utf8 = true;
  auto refused = t->encode("a\xFF" "b", strict);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().what.find("offset 1"), std::string::npos);
  EXPECT_TRUE(t->encode("", plain())->empty());
}

TEST(TokenizerDecode, OutOfRangeIdsAreErrors) {
  auto t = Tokenizer::create(spm());
  ASSERT_TRUE(t);
  const int32_t bad[] = {5, t->n_vocab()};
  auto r = t->decode(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().what.find(std::to_string(t->n_vocab())), std::string::npos);
  EXPECT_FALSE(t->piece(-1));
  StreamDecoder s(*t);
  EXPECT_FALSE(s.push(-7));
}

// A byte token whose text is not <0xNN> (a damaged vocabulary) decodes to its text; it threw
// from std::stoi and aborted (fuzz/regressions/fuzz_gguf_graph/byte-token-not-hex-threw-from-stoi.gguf).
TEST(TokenizerDecode, ByteTokenThatIsNotHexDecodesToItsText) {
  auto v = spm();
  for (const char* bad : {"<0xZZ>", "<0x-1>", "<0x 5>", "<0x4>"}) {
    v.tokens.push_back(bad);
    v.scores.push_back(0);
    v.types.push_back(static_cast<int32_t>(TokenType::Byte));
  }
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t) << t.error().str();
  const int32_t n = t->n_vocab();
  const int32_t ids[] = {3 + 0x41, 3 + 0xfe, n - 4, n - 3, n - 2, n - 1};
  auto r = t->decode(ids);
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(*r, "A\xFE<0xZZ><0x-1><0x 5><0x4>");
}

TEST(TokenizerStream, NeverEmitsHalfACharacter) {
  auto t = Tokenizer::create(spm());
  ASSERT_TRUE(t);
  const std::string llama = "\xF0\x9F\xA6\x99";  // U+1F999, only as 4 byte tokens
  auto ids = *t->encode("hi " + llama + "hi", plain());
  StreamDecoder s(*t);
  std::string all;
  for (int32_t id : ids) {
    auto part = s.push(id);
    ASSERT_TRUE(part);
    EXPECT_EQ(utf8_first_invalid(*part), part->size()) << "half a character was emitted";
    all += *part;
  }
  all += s.finish();
  EXPECT_EQ(all, "hi " + llama + "hi");
  EXPECT_EQ(all, *t->decode(ids));
}

TEST(TokenizerStream, DanglingBytesBecomeReplacementOnFinish) {
  auto t = Tokenizer::create(spm());
  ASSERT_TRUE(t);
  StreamDecoder s(*t);
  EXPECT_EQ(*s.push(3 + 0xF0), "");
  EXPECT_EQ(*s.push(3 + 0x9F), "");
  EXPECT_EQ(s.pending(), 2u);
  EXPECT_EQ(*s.push(3 + 'x'), "\xEF\xBF\xBD\xEF\xBF\xBDx");  // cannot complete any more
  EXPECT_EQ(*s.push(3 + 0xC3), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");
}

TEST(TokenizerWpm, NormalizesSplitsAndCutsGreedily) {
  VocabData v;
  v.model = "bert";
  v.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xE2\x96\x81hello", "\xE2\x96\x81,",
              "\xE2\x96\x81!", "\xE2\x96\x81un", "aff", "able", "\xE2\x96\x81\xE4\xBD\xA0"};
  v.types = {3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  v.unk = 1;
  v.cls = 2;
  v.sep = 3;
  auto t = Tokenizer::create(v);
  ASSERT_TRUE(t) << t.error().str();
  // Accents stripped, lowercased, punctuation and CJK split off, "unaffable" cut greedily,
  // an unknown word becomes [UNK]; [CLS] ... [SEP] around it.
  EXPECT_EQ(*t->encode("H\xC3\xA9llo, UNAFFABLE! xyz \xE4\xBD\xA0"),
            (std::vector<int32_t>{2, 4, 5, 7, 8, 9, 6, 1, 10, 3}));
  EXPECT_EQ(*t->decode(std::vector<int32_t>{4, 7, 8, 9}), "hello unaffable");
}

TEST(TokenizerUtf8, ValidationAndTails) {
  EXPECT_EQ(utf8_first_invalid("abc\xC3\xA9"), 5u);
  EXPECT_EQ(utf8_first_invalid("\xC0\x80"), 0u);          // overlong
  EXPECT_EQ(utf8_first_invalid("a\xED\xA0\x80"), 1u);     // surrogate
  EXPECT_EQ(utf8_first_invalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE2\x96\x81"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xE0\x80"), 0u);  // can never be valid
  EXPECT_EQ(utf8_sanitize("a\xFF\xFE" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(byte_level_decode(byte_to_unicode()[' '] + byte_to_unicode()[0xFF]), " \xFF");
}

TEST(TokenizerPretok, SplitsKeepEveryByte) {
  auto spec = pretok_spec_for("llama-bpe");
  ASSERT_TRUE(spec);
  auto p = Pretokenizer::create(*spec);
  ASSERT_TRUE(p) << p.error().str();
  std::vector<std::string_view> words;
  ASSERT_TRUE(p->split("Hello world's 12345  \n\n  x", words));
  std::vector<std::string> got(words.begin(), words.end());
  EXPECT_EQ(got, (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", "  \n\n",
                                           " ", " x"}));
}

}  // namespace
