// The grammars of tests/grammar/data/*.gbnf (JSON, arithmetic, a C-like language, lists, chess
// moves: the languages of llama.cpp's published grammars, written here): each compiles, matches
// its "# accept:" texts completely and refuses its "# reject:" texts, also when the text arrives
// split into tokens at every possible byte boundary (a token may end inside a UTF-8 character).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "grammar_test_util.h"

namespace ggflow::grammar {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name, gbnf;
  std::vector<std::string> accept, reject;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  const fs::path dir = fs::path(GGFLOW_ROOT) / "tests/grammar/data";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".gbnf") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    Case c{f.stem().string(), ss.str(), {}, {}};
    std::istringstream lines(c.gbnf);
    std::string line;
    while (std::getline(lines, line)) {
      for (const char* tag : {"# accept: ", "# reject: "}) {
        if (line.rfind(tag, 0) != 0) continue;
        const std::string text = nlohmann::json::parse(line.substr(std::strlen(tag))).get<std::string>();
        (tag[2] == 'a' ? c.accept : c.reject).push_back(text);
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(GrammarData, DataFilesAcceptAndReject) {
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 5u) << "tests/grammar/data/*.gbnf";
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto g = testing::must_parse(c.gbnf);
    ASSERT_TRUE(g);
    EXPECT_GE(c.accept.size(), 2u);
    EXPECT_GE(c.reject.size(), 3u);
    for (const auto& text : c.accept) EXPECT_TRUE(testing::matches(g, text)) << "should accept: " << text;
    for (const auto& text : c.reject) EXPECT_FALSE(testing::matches(g, text)) << "should reject: " << text;
  }
}

// Feeding a text in two parts, split at every byte, ends in the same verdict as feeding it whole.
TEST(GrammarData, SplitAtEveryByte) {
  for (const auto& c : load_cases()) {
    SCOPED_TRACE(c.name);
    auto g = testing::must_parse(c.gbnf);
    ASSERT_TRUE(g);
    std::vector<std::pair<std::string, bool>> texts;
    for (const auto& t : c.accept) texts.push_back({t, true});
    for (const auto& t : c.reject) texts.push_back({t, false});
    for (const auto& [text, ok] : texts)
      for (size_t cut = 0; cut <= text.size(); ++cut) {
        Matcher m = testing::must_match(g);
        const bool fits = m.accept_bytes(text.substr(0, cut)).ok() && m.accept_bytes(text.substr(cut)).ok() && m.is_complete();
        EXPECT_EQ(fits, ok) << "text " << text << " cut at " << cut;
      }
  }
}

}  // namespace
}  // namespace ggflow::grammar
