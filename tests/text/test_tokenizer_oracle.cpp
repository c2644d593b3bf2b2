// The real models' vocabularies (SmolLM2: byte-level BPE "smollm"; Gemma 3: SentencePiece with
// user-defined whitespace tokens; Qwen2.5-Coder 0.5B and 1.5B, `make models`: byte-level BPE
// "qwen2" with single digits and FIM / repository control tokens) give, for a fixed list of strings, the ids llama-cpp-python
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
// is on its end-of-generation list into a control token, "</s>" included ("control-looking token
// ... its type will be overridden"):
//   - Gemma 3's file marks "</s>" user-defined (text a model may write), so ggflow matches it
//     even in plain mode, while llama.cpp treats it as control and tokenizes it as characters:
//     ggflow's plain ids are the oracle's special-mode ids without the BOS.
//   - Qwen2.5's file marks "</s>" (id 128247) a normal token, which BPE never forms from text, so
//     ggflow tokenizes it as characters in both modes, while llama.cpp matches it as control in
//     special mode: ggflow's special ids are the oracle's plain ids (Qwen adds no BOS).
struct Divergence {
  const char* model;
  const char* text;
  bool in_special_mode;  // the mode that takes the other mode's ids
};
const Divergence kDivergences[] = {{"gemma3", "<s>[INST] hi [/INST]</s>", false},
                                   {"qwen2.5-coder-0.5b", "<s>[INST] hi [/INST]</s>", true},
                                   {"qwen2.5-coder-1.5b", "<s>[INST] hi [/INST]</s>", true}};

bool diverges(const std::string& model, const std::string& text, bool special_mode) {
  for (const auto& d : kDivergences)
    if (model == d.model && text == d.text && d.in_special_mode == special_mode) return true;
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
  GGFLOW_REQUIRE_FILE(model, ::ggflow::testing::cat(model, " not present (scripts/setup.sh links it; the Qwen2.5-Coder files: make models)"));
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
      if (diverges(name, text, mode.special)) {
        if (mode.special) {
          want = c.at("plain").get<std::vector<int32_t>>();
          if (tok->add_bos()) want.insert(want.begin(), tok->bos());
        } else {
          want = c.at("special").get<std::vector<int32_t>>();
          if (tok->add_bos() && !want.empty() && want.front() == tok->bos()) want.erase(want.begin());
        }
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
  std::printf("%s (oracle: %s): %d passed, %d failed (%d known divergence(s): '</s>' typed "
              "as the file says)\n",
              name.c_str(), j.value("oracle", std::string("?")).c_str(), passed, failed, divergent);
}

TEST(TokenizerOracle, SmolLM2MatchesLlamaCppPython) { check_model("smollm2"); }
TEST(TokenizerOracle, Gemma3MatchesLlamaCppPython) { check_model("gemma3"); }
TEST(TokenizerOracle, Qwen25Coder05BMatchesLlamaCppPython) { check_model("qwen2.5-coder-0.5b"); }
TEST(TokenizerOracle, Qwen25Coder15BMatchesLlamaCppPython) { check_model("qwen2.5-coder-1.5b"); }

}  // namespace
