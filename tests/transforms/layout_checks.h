// The layout checks on a real model file, shared by test_layouts_e2e.cpp (the real models) and
// tests/conformance/test_families.cpp (every supported family): the same prompt in the raw, SDPA
// and PagedAttention layouts gives identical logits bit for bit (memcmp) — one sequence (a
// prefill then kDecode greedy steps), and in the PA layout several sequences of different
// lengths in one call with one prompt prefilled in chunks of 7.
#pragma once

#include <gtest/gtest.h>

#include "require_file.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/greedy.h"
#include "runtime/paged_runner.h"
#include "runtime/raw_runner.h"

namespace ggflow::transforms::layout_checks {

using runtime::generate_greedy;
using runtime::PagedRunner;

// The file opened, the model converted to `layout` and compiled, one sequence.
inline Result<std::unique_ptr<runtime::SequenceRunner>> open_engine(const std::string& path, Layout layout) {
  auto f = runtime::ModelFile::open(path);
  if (!f) return f.error();
  return runtime::open_sequence_runner(**f, layout);
}

inline constexpr int kDecode = 16;

inline std::vector<int32_t> prompt(int n, int salt, int64_t vocab) {
  std::vector<int32_t> p;
  const int64_t range = std::min<int64_t>(vocab - 1, 400);
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(1 + (i * 37 + salt * 101 + 11) % range));
  return p;
}

struct Timer {
  std::string what;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~Timer() {
    std::fprintf(stderr, "[timing] %s: %.2f s\n", what.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// first differing row/element, for messages
inline std::string first_diff(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return "row " + std::to_string(i / vocab) + " logit " + std::to_string(i % vocab) + ": " + std::to_string(a[i]) +
             " vs " + std::to_string(b[i]);
  return "none";
}


// Raw, SDPA and PA single-sequence greedy runs: identical logits rows.
inline void single_sequence(const std::string& path, int n_prompt) {
  GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (run scripts/setup.sh)"));
  auto raw = open_engine(path, Layout::raw);
  ASSERT_TRUE(static_cast<bool>(raw)) << raw.error().str();
  const int64_t V = (*raw)->n_vocab();
  auto p = prompt(n_prompt, 0, V);
  std::vector<float> ref;
  std::vector<int32_t> ref_tokens;
  {
    Timer t{path + " raw " + std::to_string(n_prompt) + "+" + std::to_string(kDecode)};
    auto g = generate_greedy(**raw, p, kDecode, &ref);
    ASSERT_TRUE(static_cast<bool>(g)) << g.error().str();
    ref_tokens = *g;
  }
  for (Layout l : {Layout::sdpa, Layout::paged}) {
    Timer t{path + " " + to_string(l) + " " + std::to_string(n_prompt) + "+" + std::to_string(kDecode)};
    auto e = open_engine(path, l);
    ASSERT_TRUE(static_cast<bool>(e)) << to_string(l) << ": " << e.error().str();
    std::vector<float> rows;
    auto g = generate_greedy(**e, p, kDecode, &rows);
    ASSERT_TRUE(static_cast<bool>(g)) << to_string(l) << ": " << g.error().str();
    EXPECT_EQ(*g, ref_tokens) << to_string(l);
    EXPECT_TRUE(same_bits(rows, ref)) << to_string(l) << " differs from raw at " << first_diff(rows, ref, V);
  }
}

// PA: three sequences of different lengths in one call (then batched decode steps), and one
// prompt prefilled in chunks of 7, against raw runs of each prompt alone.
inline void paged_batched_and_chunked(const std::string& path, int n_prompt, int decode) {
  GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (run scripts/setup.sh)"));
  Timer t{path + " paged batched + chunked"};
  auto file = runtime::ModelFile::open(path);
  ASSERT_TRUE(static_cast<bool>(file)) << file.error().str();
  auto pe = PagedRunner::create(**file, 8);
  ASSERT_TRUE(static_cast<bool>(pe)) << pe.error().str();
  PagedRunner& e = **pe;
  const int64_t V = e.n_vocab();
  const std::vector<std::vector<int32_t>> prompts = {prompt(n_prompt, 1, V), prompt(n_prompt / 2 + 3, 2, V),
                                                     prompt(5, 3, V), prompt(n_prompt, 4, V)};
  std::vector<std::vector<float>> ref(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = open_engine(path, Layout::raw);
    ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
    auto g = generate_greedy(**r, prompts[i], decode + 1, &ref[i]);
    ASSERT_TRUE(static_cast<bool>(g)) << g.error().str();
  }
  // sequences 0..2 prefilled together; sequence 3 in chunks of 7, its chunks riding along
  std::vector<int> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(e.add_sequence());
  std::vector<std::vector<float>> got(prompts.size());
  std::vector<int32_t> next(prompts.size());
  std::vector<bool> started(prompts.size(), false);
  size_t chunk_pos = 0;
  for (int step = 0; step < 64; ++step) {
    std::vector<PagedRunner::Chunk> chunks;
    std::vector<size_t> who;
    for (size_t i = 0; i < 3; ++i) {
      if (static_cast<int>(got[i].size() / V) > decode) continue;
      chunks.push_back({ids[i], started[i] ? std::vector<int32_t>{next[i]} : prompts[i]});
      who.push_back(i);
    }
    const auto& p3 = prompts[3];
    bool in_prefill = chunk_pos < p3.size();
    if (in_prefill || static_cast<int>(got[3].size() / V) <= decode) {
      if (in_prefill) {
        size_t n = std::min<size_t>(7, p3.size() - chunk_pos);
        chunks.push_back({ids[3], std::vector<int32_t>(p3.begin() + chunk_pos, p3.begin() + chunk_pos + n)});
        chunk_pos += n;
      } else {
        chunks.push_back({ids[3], {next[3]}});
      }
      who.push_back(3);
    }
    if (chunks.empty()) break;
    auto r = e.step(chunks);
    ASSERT_TRUE(static_cast<bool>(r)) << "step " << step << ": " << r.error().str();
    for (size_t c = 0; c < who.size(); ++c) {
      size_t i = who[c];
      if (i == 3 && chunk_pos < p3.size()) continue;  // a middle chunk: its last row needs no logits
      started[i] = true;
      auto row = r->row(static_cast<int64_t>(c));
      got[i].insert(got[i].end(), row.begin(), row.end());
      next[i] = runtime::argmax(row);
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], ref[i])) << "sequence " << i << " (" << prompts[i].size()
                                            << " prompt tokens) differs from raw at " << first_diff(got[i], ref[i], V);
}

}  // namespace ggflow::transforms::layout_checks
