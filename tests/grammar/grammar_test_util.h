// What the grammar tests share: a small synthetic vocabulary, SmolLM2's (when the model is
// present), whole-text matching, and the brute-force mask oracle.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_vocab.h"
#include "text/tokenizer.h"

namespace ggflow::grammar::testing {

inline std::string smollm2_path() { return std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf"; }

// Every single byte, pieces of JSON, words, UTF-8 characters split across tokens (é = C3 A9,
// 日 = E6 97 A5, 😀 = F0 9F 98 80), a control token, an end token and an empty token.
struct SyntheticVocab {
  std::shared_ptr<const TokenVocab> vocab;
  int32_t eos = -1, control = -1, empty = -1;
};
inline const SyntheticVocab& synthetic_vocab() {
  static const SyntheticVocab v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"{\"", "\":", "\", \"", "\"}", "true", "false", "null", "[", "]", "},", "{}", "[]", " \"", "\n  ", "  ",
                          "12", "3.14", "-1", "e+5", "\\n", "\\\"", "\\u00", "name", "age", "hello", " world", "ab", "abc", "aa",
                          "\xC3", "\xA9", "\xC3\xA9", "caf\xC3", "\xA9!", "\xE6\x97", "\xA5", "\xE6\x97\xA5", "\xF0\x9F", "\x98\x80",
                          "\xF0\x9F\x98\x80", "\xED\xA0\x80", "\xC0\x80", "1. ", "e4", " Nf3", "O-O", "- ", "int", " main", "()",
                          "return", " 0;", "\"a\"", "\"b\"", "\"c\"", "xyz", "0"})
      pieces.push_back(p);
    SyntheticVocab s;
    s.control = static_cast<int32_t>(pieces.size());
    pieces.push_back("<|ctrl|>");
    s.eos = static_cast<int32_t>(pieces.size());
    pieces.push_back("<|eos|>");
    s.empty = static_cast<int32_t>(pieces.size());
    pieces.push_back("");
    const std::vector<int32_t> special = {s.control}, eog = {s.eos};
    auto r = TokenVocab::from_pieces(pieces, special, eog);
    EXPECT_TRUE(r.ok());
    s.vocab = *r;
    return s;
  }();
  return v;
}

// SmolLM2's vocabulary, or nullptr when the model is missing (the caller skips).
inline std::shared_ptr<const TokenVocab> smollm2_vocab() {
  static const std::shared_ptr<const TokenVocab> v = []() -> std::shared_ptr<const TokenVocab> {
    if (!std::filesystem::exists(smollm2_path())) return nullptr;
    auto f = gguf::File::open(smollm2_path());
    if (!f) return nullptr;
    auto tok = text::Tokenizer::from_file(*f);
    if (!tok) return nullptr;
    auto r = TokenVocab::from_tokenizer(*tok);
    return r ? *r : nullptr;
  }();
  return v;
}

inline std::shared_ptr<const Grammar> must_parse(const std::string& gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().str()) << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

inline Matcher must_match(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> v = nullptr) {
  auto m = Matcher::create(std::move(g), v ? v : synthetic_vocab().vocab);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().str());
  return std::move(*m);
}

// The whole text is a sentence of the grammar.
inline bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m = must_match(g);
  return m.accept_bytes(text).ok() && m.is_complete();
}

inline bool bit(const std::vector<uint32_t>& bits, int32_t id) { return (bits[id >> 5] >> (id & 31)) & 1; }

// The mask by brute force: each token tried on a restored copy of the state.
inline std::vector<uint32_t> oracle_mask(Matcher& m) {
  const auto& v = m.vocab();
  std::vector<uint32_t> bits(v.mask_words(), 0);
  const auto start = m.snapshot();
  for (int32_t id = 0; id < v.n_vocab(); ++id) {
    if (m.accept_token(id).ok()) bits[id >> 5] |= 1u << (id & 31);
    m.restore(start);
  }
  return bits;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& bits, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab; ++id)
    if (bit(bits, id)) ids.push_back(id);
  return ids;
}

}  // namespace ggflow::grammar::testing
