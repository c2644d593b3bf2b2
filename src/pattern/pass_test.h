// Helpers for pass tests in the style of DESIGN.md section 7 (no test framework inside: each
// returns a Status whose error says what differs; tests assert `ok()` and print `error().str()`).
//
//   check_pass(before, pass, expected): build `before`, run the pass through a PassManager
//   (re-inference + verifier), compare the result with `expected` (structure, op types,
//   attributes, friendly names, rt_info, tensor names, element types, shapes with symbols
//   matched one-to-one), then evaluate both on random inputs and compare the outputs bit for bit;
//   unless options.same_semantics is false, the graph before the pass must compute the same too.
//   check_pass_unchanged(before, pass): the pass must report no change and the graph must come
//   out identical to a freshly built `before`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "ir/evaluator.h"
#include "ir/model.h"
#include "pattern/pass.h"

namespace ggflow::pattern {

using ModelFactory = std::function<ir::Model()>;

struct PassTestOptions {
  uint64_t seed = 20260101;
  int runs = 2;                                       // random input sets
  int64_t default_dim = 3;                            // length of a dynamic dim
  std::map<std::string, int64_t> dims;                // symbol name -> length ("T" -> 5)
  std::map<std::string, std::pair<int64_t, int64_t>> int_ranges;  // parameter -> [lo, hi)
  bool same_semantics = true;                         // before and after compute the same
  float tolerance = 0.0f;                             // 0: bit for bit
  std::map<std::string, ir::Tensor> state;            // initial variable values of every run
};

// Structural equality of two models (see above); the error names the first difference.
Status compare_models(const ir::Model& actual, const ir::Model& expected);
// Random values for the model's parameters (by friendly name), deterministic in `seed`.
std::map<std::string, ir::Tensor> random_inputs(const ir::Model& model, uint64_t seed, const PassTestOptions& options);
Status compare_outputs(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b, float tolerance,
                       const std::string& what);

Status check_pass(const ModelFactory& before, Pass& pass, const ModelFactory& expected,
                  const PassTestOptions& options = {});
Status check_pass_unchanged(const ModelFactory& before, Pass& pass, const PassTestOptions& options = {});

}  // namespace ggflow::pattern
