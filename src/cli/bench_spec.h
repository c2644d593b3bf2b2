// `ggflow bench --draft-model F | --lookup N --prompts FILE`: single-stream decode speed with and
// without speculative decoding on a prompt set (cmd_bench_spec.cpp).
#pragma once

#include <string>

#include "base/result.h"
#include "pipeline/speculative.h"

namespace ggflow::cli {

struct SpecBenchOptions {
  std::string model, prompts, kv_type = "f32";
  pipeline::SpeculativeOptions spec;
  int n = 128, threads = 0, reps = 3;
  bool json = false;
};

Status bench_speculative(const SpecBenchOptions& o);

}  // namespace ggflow::cli
