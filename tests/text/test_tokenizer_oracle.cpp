// The real models' vocabularies (SmolLM2: byte-level BPE "smollm"; Gemma 3: SentencePiece with
// user-defined whitespace tokens) give, for a fixed list of strings, the ids llama-cpp-python
// gives. Expected ids: tests/text/data/tokenizer_expected_*.json, written by
// python/gen_tokenizer_expected.py (rerun it to regenerate). Prints "N passed, M failed".
#include <gtest/gtest.h>

#include "require_file.h"
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "text/tokenizer.h"
#include "gguf/file.h"

namespace fs = std::filesystem;
using namespace ggflow;
using namespace ggflow::text;

namespace {

// Where ggflow follows the file and llama.cpp does not. llama.cpp turns every token whose text
// is on its end-of-generation list into a control token, "</s>" included; Gemma 3's file marks
// "</s>" user-defined (text a model may write), so ggflow matches it even in plain mode, while
// llama.cpp then treats it as control and tokenizes it as characters. For these cases ggflow's
// plain ids must equal the oracle's special-mode ids without the BOS (where llama.cpp does
// match "</s>").
struct Divergence {
  const char* model;
  const char* text;
};
const Divergence kDivergences[] = {{"gemma3", "<s>[INST] hi [/INST]</s>"}};

bool diverges(const std::string& model, const std::string& text) {
  for (const auto& d : kDivergences)
    if (model == d.model && text == d.text) return true;
  return false;
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

void check_model(const std::string& name) {
  const fs::path json_path = fs::path(GGFLOW_ROOT) / "tests/text/data" /
                             ("tokenizer_expected_" + name + ".json");
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << "missing " << json_path << " (run python/gen_tokenizer_expected.py)";
  const auto j = nlohmann::json::parse(in);
  const fs::path model = fs::path(GGFLOW_ROOT) / j.at("model").get<std::string>();
  GGFLOW_REQUIRE_FILE(model, ::ggflow::testing::cat(model, " not present (scripts/setup.sh links it)"));
  auto file = gguf::File::open(model.string());
  ASSERT_TRUE(file) << file.error().str();
  auto tok = Tokenizer::from_file(*file);
  ASSERT_TRUE(tok) << tok.error().str();

  int passed = 0, failed = 0, divergent = 0;
  for (const auto& c : j.at("cases")) {
    const std::string text = c.at("text");
    struct Mode {
      const char* key;
      bool special;
    };
    for (Mode mode : {Mode{"special", true}, Mode{"plain", false}}) {
      EncodeOptions opt;
      opt.add_special = mode.special;
      opt.parse_special = mode.special;
      auto ids = tok->encode(text, opt);
      ASSERT_TRUE(ids) << ids.error().str();
      auto want = c.at(mode.key).get<std::vector<int32_t>>();
      if (!mode.special && diverges(name, text)) {
        want = c.at("special").get<std::vector<int32_t>>();
        if (tok->add_bos() && !want.empty() && want.front() == tok->bos()) want.erase(want.begin());
        ++divergent;
      }
      if (*ids == want) {
        ++passed;
      } else {
        ++failed;
        ADD_FAILURE() << name << " [" << mode.key << "] input [" << text << "]\n  expected: "
                      << join(want) << "\n  got:      " << join(*ids);
      }
    }
    auto decoded = tok->decode(c.at("plain").get<std::vector<int32_t>>());
    ASSERT_TRUE(decoded) << decoded.error().str();
    if (*decoded == c.at("decoded").get<std::string>()) {
      ++passed;
    } else {
      ++failed;
      ADD_FAILURE() << name << " [decode] input [" << text << "] got [" << *decoded << "]";
    }
  }
  std::printf("%s (oracle: %s): %d passed, %d failed (%d known divergence(s): '</s>' kept "
              "user-defined as the file says)\n",
              name.c_str(), j.value("oracle", std::string("?")).c_str(), passed, failed, divergent);
}

TEST(TokenizerOracle, SmolLM2MatchesLlamaCppPython) { check_model("smollm2"); }
TEST(TokenizerOracle, Gemma3MatchesLlamaCppPython) { check_model("gemma3"); }

}  // namespace
