// The comparison of ggflow's logits with a llama.cpp golden (python/gen_model_goldens.py), shared
// by the model conformance tests (test_models.cpp: the real models) and the family tests
// (test_families.cpp: the synthetic model of every supported family). test_models.cpp's comment
// explains the metrics and where each bound comes from.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/greedy.h"
#include "runtime/raw_runner.h"

namespace ggflow::conformance {

using nlohmann::json;

struct Limits {
  double nmse;      // worst NMSE per row
  double std_rel;   // |std(ours) / std(llama.cpp) - 1| per row
  bool allow_ties;  // top-1 may differ where llama.cpp's top-2 margin < kTieEps
  double tie_eps = 0;  // that margin; 0: kTieEps on the evaluator, kCpuTieEps on the CPU executor
};
inline constexpr Limits kF32{1e-10, 1e-5, false};
inline constexpr Limits kF16{1e-6, 1e-4, false};
inline constexpr Limits kQuant{5e-3, 0.05, true};
inline constexpr double kTieEps = 0.05;
inline constexpr Limits kCpuF32{1e-8, 1e-5, false};
inline constexpr Limits kCpuF16{1e-6, 1e-4, false};
inline constexpr Limits kCpuQuant{5e-3, 0.05, true};
inline constexpr double kCpuTieEps = 0.02;  // the CPU executor quantizes activations as llama.cpp

struct Metrics {
  double nmse_topk = 0, nmse_full = -1;
  double dmean = 0, dstd = 0;
  int ours = -1, gold = -1;
  double margin = 0;
};

inline Metrics compare(const std::vector<float>& row, const json& g, const json* full) {
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

// Runs the golden's tokens through the raw runner; returns one row per token.
inline std::vector<std::vector<float>> run(runtime::RawRunner& r, const json& g) {
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

// Every row of the golden against ggflow's raw runner on `path` (teacher forcing), with every
// adapter of `loras` applied.
inline void check_golden(const json& g, const std::string& path, const Limits& lim,
                         runtime::Executor executor = runtime::Executor::ref, const builder::BuildOptions& build = {},
                         std::span<const runtime::LoraSpec> loras = {}) {
  const std::string name = g["model"].get<std::string>();
  const double tie_eps = lim.tie_eps > 0 ? lim.tie_eps : executor == runtime::Executor::ref ? kTieEps : kCpuTieEps;
  auto t0 = std::chrono::steady_clock::now();
  auto file = runtime::ModelFile::open(path, build, loras);
  ASSERT_TRUE(file) << file.error().str();
  runtime::RunnerOptions opt;
  opt.compile.executor = executor;
  auto r = runtime::RawRunner::create(**file, opt);
  ASSERT_TRUE(r) << r.error().str();
  ASSERT_TRUE((*r)->set_lora((uint64_t(1) << loras.size()) - 1));
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

}  // namespace ggflow::conformance
