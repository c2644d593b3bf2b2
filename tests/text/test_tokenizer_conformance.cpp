// Tokenizer conformance: every vocabulary in ../shared/data/tokenizer/ with .inp/.out files must
// reproduce every line of ids (the reference tokenizers' output, as llama.cpp's test-tokenizer-0
// checks it: no BOS/EOS, special tokens not parsed). Prints "N passed, M failed" per vocabulary.
// Round trips detokenize(tokenize(x)) == x must hold for every line of every BPE and
// SentencePiece vocabulary; WordPiece (bert-bge) lowercases and strips accents, so its round
// trips are only counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/tokenizer.h"
#include "gguf/file.h"

namespace fs = std::filesystem;
using namespace ggflow;
using namespace ggflow::text;

namespace {

const fs::path kDir = fs::path(GGFLOW_SHARED) / "data" / "tokenizer";

// Vocabularies left out, with the reason (the test lists them).
const std::map<std::string, std::string> kLeftOut = {};

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Strings separated by a line "__ggml_vocab_test__" (the last may or may not end with one).
std::vector<std::string> split_inputs(const std::string& all) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t hit = all.find(sep, pos);
    if (hit == std::string::npos) {
      std::string last = all.substr(pos);
      const std::string tail = "\n__ggml_vocab_test__";
      if (last.size() >= tail.size() && last.ends_with(tail)) last.resize(last.size() - tail.size());
      if (!last.empty()) out.push_back(last);
      break;
    }
    out.push_back(all.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& all) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(all);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    int32_t id;
    while (ids >> id) v.push_back(id);
    out.push_back(v);
  }
  return out;
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

std::vector<std::string> vocab_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kDir)) {
    const std::string f = e.path().filename().string();
    if (f.starts_with("ggml-vocab-") && f.ends_with(".gguf") &&
        fs::exists(e.path().string() + ".inp") && fs::exists(e.path().string() + ".out"))
      names.push_back(f.substr(11, f.size() - 11 - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

class TokenizerConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerConformance, ReproducesEveryLine) {
  const std::string name = GetParam();
  if (auto it = kLeftOut.find(name); it != kLeftOut.end()) {
    std::printf("%s: left out: %s\n", name.c_str(), it->second.c_str());
    GTEST_SKIP() << it->second;
  }
  const fs::path gguf_path = kDir / ("ggml-vocab-" + name + ".gguf");
  auto file = gguf::File::open(gguf_path.string());
  ASSERT_TRUE(file) << file.error().str();
  auto tok = Tokenizer::from_file(*file);
  ASSERT_TRUE(tok) << tok.error().str();
  const auto inputs = split_inputs(read_all(gguf_path.string() + ".inp"));
  const auto expected = read_outputs(read_all(gguf_path.string() + ".out"));
  ASSERT_EQ(inputs.size(), expected.size()) << "inp/out disagree in count";

  EncodeOptions opt;
  opt.add_special = false;
  opt.parse_special = false;
  int passed = 0, failed = 0, rt_ok = 0, rt_bad = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto ids = tok->encode(inputs[i], opt);
    ASSERT_TRUE(ids) << ids.error().str();
    if (*ids == expected[i]) {
      ++passed;
    } else {
      ++failed;
      ADD_FAILURE() << name << " line " << i << " input [" << inputs[i] << "]\n  expected: "
                    << join(expected[i]) << "\n  got:      " << join(*ids);
    }
    auto text = tok->decode(*ids);
    ASSERT_TRUE(text) << text.error().str();
    if (*text == inputs[i]) ++rt_ok;
    else ++rt_bad;
  }
  std::printf("%s: %d passed, %d failed (round trip: %d exact, %d changed by normalization)\n",
              name.c_str(), passed, failed, rt_ok, rt_bad);
  // BPE and SentencePiece keep every character of these inputs (byte-level alphabet, byte
  // fallback): the round trip must be exact. WordPiece lowercases and drops accents and spacing.
  if (tok->kind() != VocabKind::Wpm) {
    EXPECT_EQ(rt_bad, 0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocab, TokenizerConformance, ::testing::ValuesIn(vocab_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(TokenizerConformance, FindsVocabularies) { EXPECT_GE(vocab_names().size(), 15u); }

}  // namespace
