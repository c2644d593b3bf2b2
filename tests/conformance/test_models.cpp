// Model conformance: ggflow's raw layout (builder -> translate -> the IR reference evaluator, and
// the CPU executor) against llama.cpp's logits, committed in goldens/<model>.json by python/gen_model_goldens.py.
//
// For each model the prompt is prefilled with logits for every position, then the decode tokens
// llama.cpp chose are fed one at a time (teacher forcing), so every row compares the same
// context. Per row:
//   top-1     our argmax == llama.cpp's argmax
//   NMSE      over llama.cpp's top-32 ids: Σ (ours − gold)² / Σ (gold − mean_gold_row)²; over
//             the full row where the golden has it (stories260K, 512 tokens)
//   mean/std  of our full row against llama.cpp's (the committed summary)
//
// Thresholds, from measurement (every run prints the figures; measured with llama-cpp-python
// 0.3.36 on x86-64, numbers in brackets are the worst seen over all positions):
//   f32 weights (stories260K): both sides compute in f32 and differ only in summation order
//     [NMSE 6.8e-13 on full rows]: NMSE < 1e-10, top-1 everywhere, the 32-token greedy
//     continuation identical (with FLASH_ATTN_EXT and with MUL_MAT + SOFT_MAX attention).
//   f16 weights (synthetic qwen2) [NMSE 3.0e-8, std of the row within 3e-5]: NMSE < 1e-6.
//   quantized weights (SmolLM2 Q4_1 [NMSE 1.5e-3], Gemma 3 Q4_K_M [NMSE 9.4e-4]): llama.cpp
//     rounds activations to 8 bits (Q8_0/Q8_1/Q8_K) before every dot product with a quantized
//     weight; the evaluator keeps f32 activations. That noise is what NMSE measures: NMSE < 5e-3,
//     row std within 5% [2.2%]. Top-1 must agree at every position except where llama.cpp's own
//     top-2 margin is below kTieEps = 0.05 logits (a near tie that 8-bit noise can flip); such
//     positions are listed in the output (none in the current goldens: the smallest margins are
//     0.22 for SmolLM2 and 0.058 for Gemma 3, and top-1 agrees everywhere).
// The CPU executor (the default) is checked against the same goldens with its own bounds: it
// computes f32 and f16 weights in f32 with FMA chains and a fixed partial-sum order (so only
// rounding differs: NMSE < 1e-8 for f32, < 1e-6 for f16), and, like llama.cpp, rounds
// activations to 8 bits before every quantized dot product, with its own rounding (round to
// nearest even) and per-block order. Two 8-bit noises then differ by up to a few tenths of a
// logit near the top: top-1 must agree wherever llama.cpp's margin is >= kCpuTieEps = 0.25
// logits [SmolLM2 position 7, margin 0.224, flips], NMSE < 5e-3 as for the evaluator. The
// reference evaluator stays the math oracle; the tests above run it explicitly.
#include <gtest/gtest.h>

#include "require_file.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/greedy.h"
#include "runtime/raw_runner.h"

namespace ggflow {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Limits {
  double nmse;      // worst NMSE per row
  double std_rel;   // |std(ours) / std(llama.cpp) - 1| per row
  bool allow_ties;  // top-1 may differ where llama.cpp's top-2 margin < kTieEps
};
constexpr Limits kF32{1e-10, 1e-5, false};
constexpr Limits kF16{1e-6, 1e-4, false};
constexpr Limits kQuant{5e-3, 0.05, true};
constexpr double kTieEps = 0.05;
constexpr Limits kCpuF32{1e-8, 1e-5, false};
constexpr Limits kCpuF16{1e-6, 1e-4, false};
constexpr Limits kCpuQuant{5e-3, 0.05, true};
constexpr double kCpuTieEps = 0.25;

struct Metrics {
  double nmse_topk = 0, nmse_full = -1;
  double dmean = 0, dstd = 0;
  int ours = -1, gold = -1;
  double margin = 0;
};

Metrics compare(const std::vector<float>& row, const json& g, const json* full) {
  Metrics m;
  double mu = g["mean"].get<double>(), num = 0, den = 0;
  auto ids = g["top_ids"].get<std::vector<int>>();
  auto vals = g["top_logits"].get<std::vector<double>>();
  for (size_t k = 0; k < ids.size(); ++k) {
    num += (row[ids[k]] - vals[k]) * (row[ids[k]] - vals[k]);
    den += (vals[k] - mu) * (vals[k] - mu);
  }
  m.nmse_topk = num / den;
  if (full) {
    auto f = full->get<std::vector<double>>();
    double n2 = 0, d2 = 0;
    for (size_t i = 0; i < f.size(); ++i) n2 += (row[i] - f[i]) * (row[i] - f[i]), d2 += (f[i] - mu) * (f[i] - mu);
    m.nmse_full = n2 / d2;
  }
  double s = 0, s2 = 0;
  for (float v : row) s += v;
  double mean = s / row.size();
  for (float v : row) s2 += (v - mean) * (v - mean);
  m.dmean = mean - mu;
  m.dstd = std::sqrt(s2 / row.size()) / g["std"].get<double>() - 1.0;
  m.ours = runtime::argmax(row);
  m.gold = g["argmax"].get<int>();
  m.margin = g["margin"].get<double>();
  return m;
}

json load_golden(const std::string& name) {
  std::ifstream in(std::string(GGFLOW_ROOT) + "/tests/conformance/goldens/" + name + ".json");
  return json::parse(in);
}

std::string model_path(const json& g) {
  if (g["model"] == "qwen2-synthetic") return GGFLOW_SYNTH_QWEN2;
  return std::string(GGFLOW_ROOT) + "/" + g["file"].get<std::string>();
}

std::string missing_reason(const std::string& path) {
  std::ifstream why(path + ".missing");  // written by python/link_models.py
  std::string text((std::istreambuf_iterator<char>(why)), std::istreambuf_iterator<char>());
  return path + " is missing" + (text.empty() ? "" : ": " + text);
}

// Runs the golden's tokens through the raw runner; returns one row per token.
std::vector<std::vector<float>> run(runtime::RawRunner& r, const json& g) {
  auto tokens = g["tokens"].get<std::vector<int32_t>>();
  size_t np = g["n_prompt"].get<size_t>();
  int64_t V = r.hparams().n_vocab;
  std::vector<std::vector<float>> rows;
  auto l = r.step(std::span<const int32_t>(tokens.data(), np), true);
  EXPECT_TRUE(l) << l.error().str();
  if (!l) return rows;
  for (size_t i = 0; i < np; ++i) rows.emplace_back(l->begin() + i * V, l->begin() + (i + 1) * V);
  for (size_t i = np; i < tokens.size(); ++i) {
    auto d = r.step(std::span<const int32_t>(&tokens[i], 1));
    EXPECT_TRUE(d) << d.error().str();
    if (!d) return rows;
    rows.emplace_back(d->begin(), d->end());
  }
  return rows;
}

void check_model(const std::string& name, const Limits& lim, runtime::Executor executor = runtime::Executor::ref) {
  const double tie_eps = executor == runtime::Executor::ref ? kTieEps : kCpuTieEps;
  json g = load_golden(name);
  std::string path = model_path(g);
  GGFLOW_REQUIRE_FILE(path, missing_reason(path));
  auto t0 = std::chrono::steady_clock::now();
  auto file = runtime::ModelFile::open(path);
  ASSERT_TRUE(file) << file.error().str();
  runtime::RunnerOptions opt;
  opt.compile.executor = executor;
  auto r = runtime::RawRunner::create(**file, opt);
  ASSERT_TRUE(r) << r.error().str();
  ASSERT_EQ((*r)->hparams().n_vocab, g["n_vocab"].get<int64_t>());
  std::printf("%s on %s\n", name.c_str(), (*r)->compiled().describe().c_str());
  auto rows = run(**r, g);
  ASSERT_EQ(rows.size(), g["rows"].size());
  double worst = 0;
  std::vector<size_t> ties;
  int agree = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json* full = g.contains("full") ? &g["full"][i] : nullptr;
    Metrics m = compare(rows[i], g["rows"][i], full);
    double nmse = full ? m.nmse_full : m.nmse_topk;
    worst = std::max(worst, nmse);
    agree += m.ours == m.gold;
    std::printf("%s pos %2zu: nmse %.3g%s, top-1 %d/%d, llama.cpp margin %.4f, mean %+.4f, std %+.2e\n", name.c_str(), i, nmse,
                full ? " (full row)" : " (top-32)", m.ours, m.gold, m.margin, m.dmean, m.dstd);
    EXPECT_LT(nmse, lim.nmse) << name << " position " << i;
    EXPECT_LT(std::abs(m.dstd), lim.std_rel) << name << " position " << i << ": std of the row";
    if (m.ours != m.gold) {
      if (lim.allow_ties && m.margin < tie_eps) ties.push_back(i);
      else ADD_FAILURE() << name << " position " << i << ": top-1 " << m.ours << " vs llama.cpp " << m.gold << " (margin " << m.margin << ")";
    }
  }
  std::string tie_list;
  for (size_t i : ties) tie_list += " " + std::to_string(i);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu positions, top-1 %d/%zu, worst NMSE %.3g, near-tie disagreements:%s, %.1f s\n", name.c_str(),
              rows.size(), agree, rows.size(), worst, tie_list.empty() ? " none" : tie_list.c_str(), secs);
}

TEST(ModelConformance, Stories260K) { check_model("stories260K", kF32); }
TEST(ModelConformance, SmolLM2) { check_model("smollm2", kQuant); }
TEST(ModelConformance, Gemma3) { check_model("gemma3", kQuant); }
TEST(ModelConformance, Qwen2Synthetic) { check_model("qwen2-synthetic", kF16); }
TEST(ModelConformance, CpuStories260K) { check_model("stories260K", kCpuF32, runtime::Executor::cpu); }
TEST(ModelConformance, CpuSmolLM2) { check_model("smollm2", kCpuQuant, runtime::Executor::cpu); }
TEST(ModelConformance, CpuGemma3) { check_model("gemma3", kCpuQuant, runtime::Executor::cpu); }
TEST(ModelConformance, CpuQwen2Synthetic) { check_model("qwen2-synthetic", kCpuF16, runtime::Executor::cpu); }

// f32 weights: llama.cpp's greedy continuation is reproduced token for token.
TEST(ModelConformance, Stories260KGreedy32) {
  json g = load_golden("stories260K");
  std::string path = model_path(g);
  GGFLOW_REQUIRE_FILE(path, missing_reason(path));
  auto tokens = g["tokens"].get<std::vector<int32_t>>();
  tokens.resize(g["n_prompt"].get<size_t>());
  for (auto [fa, ex] : {std::pair{true, runtime::Executor::ref}, {false, runtime::Executor::ref},
                        {true, runtime::Executor::cpu}, {false, runtime::Executor::cpu}}) {
    auto file = runtime::ModelFile::open(path, builder::BuildOptions{.flash_attn = fa});
    ASSERT_TRUE(file) << file.error().str();
    runtime::RunnerOptions opt;
    opt.compile.executor = ex;
    auto r = runtime::RawRunner::create(**file, opt);
    ASSERT_TRUE(r) << r.error().str();
    auto out = runtime::generate_greedy(**r, tokens, 32);
    ASSERT_TRUE(out) << out.error().str();
    EXPECT_EQ(*out, g["greedy"].get<std::vector<int32_t>>())
        << (fa ? "FLASH_ATTN_EXT" : "MUL_MAT + SOFT_MAX") << " on " << runtime::to_string(ex);
  }
}

}  // namespace
}  // namespace ggflow
