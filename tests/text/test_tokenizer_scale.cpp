// Scale and robustness on real vocabularies: four times the input gives about four times the ids
// (1 MB vs 4 MB; the time ratio is printed, not asserted: timing on a shared machine is noise), a
// 10 MB string tokenizes and round-trips, and random Unicode text round-trips exactly through
// byte-level BPE and SentencePiece vocabularies.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "gguf/file.h"

namespace fs = std::filesystem;
using namespace ggflow;
using namespace ggflow::text;

namespace {

Tokenizer load(const std::string& vocab) {
  const fs::path p = fs::path(GGFLOW_SHARED) / "data/tokenizer" / ("ggml-vocab-" + vocab + ".gguf");
  auto f = gguf::File::open(p.string());
  if (!f) throw std::runtime_error(f.error().str());  // gtest reports it as this test's failure
  auto t = Tokenizer::from_file(*f);
  if (!t) throw std::runtime_error(t.error().str());
  return std::move(*t);
}

// Mixed text: English, code, numbers, Cyrillic, CJK, emoji, whitespace runs.
std::string corpus(size_t bytes) {
  static const char* kParts[] = {
      "The quick brown fox jumps over the lazy dog. ",
      "def f(x):\n    return x * 2  # doubled\n",
      "3.14159 1,000,000 2024-06-01 ",
      "нещо на Български ",
      "我想在apple工作1314151天～ ",
      "🚀 🦙🦙 ✅ ",
      "\n\n\t  \n",
      "I've been 'told he's there, 'RE you sure? ",
  };
  std::string s;
  s.reserve(bytes + 64);
  std::mt19937 rng(7);
  while (s.size() < bytes) s += kParts[rng() % std::size(kParts)];
  return s;
}

double seconds_to_encode(const Tokenizer& t, const std::string& text, size_t* n_ids) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ids = t.encode(text, {.add_special = false, .parse_special = true});
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_TRUE(ids);
  *n_ids = ids ? ids->size() : 0;
  return std::chrono::duration<double>(t1 - t0).count();
}

TEST(TokenizerScale, FourTimesTheTextGivesAboutFourTimesTheIds) {
  for (const char* vocab : {"llama-bpe", "llama-spm"}) {
    Tokenizer t = load(vocab);
    const std::string small = corpus(1 << 20), large = corpus(4 << 20);
    size_t n_small = 0, n_large = 0;
    const double a = seconds_to_encode(t, small, &n_small);
    const double b = seconds_to_encode(t, large, &n_large);
    std::printf("%s: 1 MiB -> %zu ids in %.3f s (%.1f MB/s); 4 MiB -> %zu ids in %.3f s; "
                "time ratio 4M/1M = %.2f (linear = 4)\n",
                vocab, n_small, a, 1.0 / a, n_large, b, b / a);
    EXPECT_GT(n_large, 3.5 * n_small);  // the whole input was tokenized, not a prefix
    EXPECT_LT(n_large, 4.5 * n_small);
  }
}

TEST(TokenizerScale, TenMegabyteStringRoundTrips) {
  Tokenizer t = load("qwen2");
  const std::string text = corpus(10 << 20);
  auto ids = t.encode(text, {.add_special = false, .parse_special = false});
  ASSERT_TRUE(ids) << ids.error().str();
  EXPECT_GT(ids->size(), text.size() / 8);
  auto back = t.decode(*ids);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == text);
}

TEST(TokenizerScale, LongRunsOfOneCharacter) {
  Tokenizer bpe = load("gpt-2");
  Tokenizer spm = load("llama-spm");
  for (const std::string& s : {std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                               std::string(1 << 20, '\n')}) {
    for (const Tokenizer* t : {&bpe, &spm}) {
      auto ids = t->encode(s, {.add_special = false});
      ASSERT_TRUE(ids) << ids.error().str();
      EXPECT_EQ(*t->decode(*ids), s);
    }
  }
}

std::string random_text(std::mt19937& rng, size_t n_chars) {
  static const uint32_t kRanges[][2] = {
      {0x20, 0x7E}, {0x09, 0x0A}, {0xA0, 0x17F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x590, 0x6FF},
      {0x900, 0x97F}, {0xE00, 0xE7F}, {0x3040, 0x30FF}, {0x4E00, 0x4FFF}, {0xAC00, 0xAD00},
      {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0x300, 0x36F}, {0x2000, 0x206F},
  };
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& r = kRanges[rng() % std::size(kRanges)];
    utf8_append(s, r[0] + rng() % (r[1] - r[0] + 1));
  }
  return s;
}

TEST(TokenizerScale, RandomUnicodeRoundTrips) {
  std::mt19937 rng(1234);
  for (const char* vocab : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "falcon", "command-r",
                            "llama-spm", "phi-3", "gemma-4"}) {
    Tokenizer t = load(vocab);
    int bad = 0;
    for (int i = 0; i < 60; ++i) {
      const std::string s = random_text(rng, 1 + rng() % 40);
      auto ids = t.encode(s, {.add_special = false, .parse_special = false});
      ASSERT_TRUE(ids);
      auto back = t.decode(*ids);
      ASSERT_TRUE(back);
      if (*back != s) {
        ++bad;
        ADD_FAILURE() << vocab << ": round trip changed [" << s << "] into [" << *back << "]";
        if (bad > 3) break;
      }
    }
  }
}

}  // namespace
