// Chat-template conformance: every template in ../shared/data/chat-templates and the real models'
// templates, rendered for each case of tests/text/data/templates/cases.json, must equal byte for
// byte what Python's jinja2 renders (python/gen_template_expected.py wrote the expected outputs).
// Where jinja2 raised, ggflow must fail too, with a message.
#include <gtest/gtest.h>

#include "require_file.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "text/template.h"
#include "gguf/file.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const fs::path kData = fs::path(GGFLOW_ROOT) / "tests/text/data/templates";

// The clock of python/gen_template_expected.py (FIXED_NOW): 2025-03-07 14:05:09.
std::string fixed_strftime(const std::string& fmt) {
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 7;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  tm.tm_wday = 5;
  tm.tm_yday = 65;
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return std::string(buf, n);
}

// Templates that need a construct the engine does not implement (it fails with an error naming
// the construct instead of rendering): template stem -> reason. Keep this short.
const std::map<std::string, std::string> kKnownUnsupported = {};

std::string first_diff(const std::string& a, const std::string& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  size_t from = k > 40 ? k - 40 : 0;
  return "at byte " + std::to_string(k) + "\n  expected: " + ordered_json(b.substr(from, 120)).dump() +
         "\n  got:      " + ordered_json(a.substr(from, 120)).dump();
}

}  // namespace

TEST(TemplateConformance, AllTemplatesMatchJinja2) {
  ordered_json cases = ordered_json::parse(read(kData / "cases.json"));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kData / "expected"))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 63u) << "expected outputs missing: run python/gen_template_expected.py";
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& file : files) {
    ordered_json doc = ordered_json::parse(read(file));
    std::string ref = doc["template"];
    fs::path src = ref.rfind("shared:", 0) == 0 ? fs::path(GGFLOW_SHARED) / "data/chat-templates" / ref.substr(7)
                                                : fs::path(GGFLOW_ROOT) / ref;
    std::string stem = file.stem().string();
    bool known = kKnownUnsupported.count(stem) > 0;
    auto tpl = ggflow::text::ChatTemplate::parse(read(src));
    for (const auto& c : cases) {
      std::string name = c["name"];
      const ordered_json& want = doc["cases"][name];
      ggflow::Result<std::string> got = ggflow::make_error("template did not parse");
      if (tpl) {
        ggflow::text::ChatTemplate t = *tpl;
        t.strftime_now = fixed_strftime;
        ggflow::text::ChatInputs in;
        in.messages = c["messages"];
        if (c.contains("tools")) in.tools = c["tools"];
        in.add_generation_prompt = c["add_generation_prompt"];
        in.bos_token = "<s>";
        in.eos_token = "</s>";
        got = t.render(in);
      } else {
        got = tpl.error();
      }
      bool ok;
      std::string why;
      if (want.contains("error")) {
        ok = !got.ok() && !got.error().what.empty();
        if (!ok) why = "jinja2 raised (" + want["error"].get<std::string>() + ") but ggflow rendered";
      } else if (!got.ok()) {
        ok = false;
        why = "ggflow failed: " + got.error().what;
      } else {
        ok = *got == want["output"].get<std::string>();
        if (!ok) why = "output differs " + first_diff(*got, want["output"]);
      }
      if (known) {
        EXPECT_FALSE(got.ok() && !ok) << stem << "/" << name << " is known-unsupported but rendered wrong text";
        ++skipped;
        continue;
      }
      if (ok) ++passed;
      else {
        ++failed;
        ADD_FAILURE() << stem << " / " << name << ": " << why;
      }
    }
  }
  std::printf("template conformance: %d passed, %d failed, %d known-unsupported (%zu templates)\n", passed,
              failed, skipped, files.size());
  EXPECT_EQ(failed, 0);
}

// The real models' templates are tested through their extracted copies above; check that the
// copies still equal what the GGUF files carry (skipped when a model is not installed).
TEST(TemplateConformance, ExtractedModelTemplatesMatchTheGgufFiles) {
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kData / "models")) {
    fs::path gguf_path = fs::path(GGFLOW_ROOT) / "models" / (e.path().stem().string() + ".gguf");
    if (!fs::exists(gguf_path)) continue;
    auto file = ggflow::gguf::File::open(gguf_path.string());
    ASSERT_TRUE(file.ok()) << file.error().str();
    auto tpl = file->get<std::string>("tokenizer.chat_template");
    ASSERT_TRUE(tpl.ok()) << tpl.error().str();
    EXPECT_EQ(*tpl, read(e.path())) << e.path() << " is stale: rerun python/gen_template_expected.py";
    ++checked;
  }
  if (checked == 0) {
    const char* why = "no model with an embedded chat template in models/ (run scripts/setup.sh)";
    if (ggflow::testing::models_required()) FAIL() << why;
    GTEST_SKIP() << why;
  }
}
