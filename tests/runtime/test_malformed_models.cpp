// Models that parse but are not usable: ModelFile::open must refuse each with one clear error that
// names the tensor or key, at load, never a crash and never a model that computes garbage.
//
// The corpus is python/make_malformed_models.py (stories260K.gguf rewritten with one thing broken
// per file, with the expected error of each in manifest.tsv), generated at test time with .venv's
// python into a folder of this process's own under the build dir. Each case prints one line
// "[case] name: error" so that the list of cases and their messages can be read from the log.
#include <gtest/gtest.h>

#include "require_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/model_file.h"

namespace ggflow::runtime {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";
const std::string kPython = std::string(GGFLOW_ROOT) + "/.venv/bin/python";

struct Case {
  std::string name, expected;  // expected: a substring of the error; empty: the file opens
};

class MalformedModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kStories) || !fs::exists(kPython)) return;  // each test skips or fails below
    dir_ = fs::path(GGFLOW_TEST_BINARY_DIR) / ("malformed-models-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const std::string cmd = kPython + " " + GGFLOW_ROOT + "/python/make_malformed_models.py " + dir_.string() +
                            " --base " + kStories + " > " + (dir_.string() + ".log") + " 2>&1";
    gen_status_ = std::system(cmd.c_str());
    gen_cmd_ = cmd;
    std::ifstream log(dir_.string() + ".log");
    gen_log_.assign(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) {
      fs::remove_all(dir_);
      fs::remove(dir_.string() + ".log");
    }
  }
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " is missing: the base of the malformed-model corpus"));
    GGFLOW_REQUIRE_FILE(kPython, ::ggflow::testing::cat(kPython, " is missing: run scripts/setup.sh (it creates .venv with gguf)"));
    ASSERT_EQ(gen_status_, 0) << gen_cmd_ << " failed:\n" << gen_log_;
  }
  static std::vector<Case> manifest() {
    std::vector<Case> cases;
    std::ifstream in(dir_ / "manifest.tsv");
    for (std::string line; std::getline(in, line);) {
      auto tab = line.find('\t');
      if (tab == std::string::npos) continue;
      cases.push_back({line.substr(0, tab), line.substr(tab + 1)});
    }
    return cases;
  }
  static std::string path(const Case& c) { return (dir_ / (c.name + ".gguf")).string(); }

  static inline fs::path dir_;
  static inline int gen_status_ = -1;
  static inline std::string gen_cmd_, gen_log_;
};

TEST_F(MalformedModels, TheValidBaseOpens) {
  auto m = ModelFile::open(path({"valid", ""}));
  ASSERT_TRUE(m) << m.error().str();
  EXPECT_EQ((*m)->n_vocab(), 512);
  EXPECT_EQ((*m)->hparams().n_layer, 5);
  auto base = ModelFile::open(kStories);  // and the original file, which "valid" rewrites
  ASSERT_TRUE(base) << base.error().str();
}

TEST_F(MalformedModels, EachCaseFailsAtLoadWithItsMessage) {
  const std::vector<Case> cases = manifest();
  ASSERT_GE(cases.size(), 40u) << "manifest.tsv lists too few cases";
  int refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto m = ModelFile::open(path(c));
    if (c.expected.empty()) {
      EXPECT_TRUE(m) << c.name << " must open: " << m.error().str();
      std::printf("[case] %s: opens\n", c.name.c_str());
      continue;
    }
    ASSERT_FALSE(m) << c.name << " opened, but must fail with \"" << c.expected << "\"";
    const std::string msg = m.error().str();
    std::printf("[case] %s: %s\n", c.name.c_str(), msg.c_str());
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.name << ": got \"" << msg << "\", expected \"" << c.expected << "\"";
    EXPECT_FALSE(m.error().hint.empty()) << c.name << ": the error says what is wrong but not how to fix it";
    ++refused;
  }
  EXPECT_GE(refused, 40);
}

}  // namespace
}  // namespace ggflow::runtime
