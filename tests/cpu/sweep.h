// The scaffolding the kernel sweep tests (test_kernels_*.cpp) share:
//  - Tally: counts every check, fails the gtest on the first 25 failures, and at the end of the
//    run prints "<test>: N passed, N failed (ISAs: ...)";
//  - bit-for-bit comparison (memcmp) of kernel outputs, ISA names, random test data;
//  - the IR's reference kernels, evaluated on parameters, as the math oracle.
// Header-only; each test file is its own executable, so these live in one translation unit each.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/isa.h"
#include "ir/op_registry.h"
#include "ir/ops.h"

namespace ggflow::cpu::sweep {

inline std::string isa_name(Isa i) { return std::string(to_string(i)); }

// " scalar avx2 ...": the ISAs this CPU supports, each after a space.
inline std::string isa_list() {
  std::string isas;
  for (Isa i : supported_isas()) isas += " " + isa_name(i);
  return isas;
}

// The pass/fail count of one test executable. Construct one (at namespace scope) per test file: it
// registers a gtest environment that prints "<test>: N passed, N failed (ISAs: ...)" once all the
// tests have run.
class Tally {
 public:
  explicit Tally(const char* test) : test_(test) {
    ::testing::AddGlobalTestEnvironment(new Printer(*this));
  }
  Tally(const Tally&) = delete;
  Tally& operator=(const Tally&) = delete;

  // Counts one check; a failure also fails the current gtest with `what` (the first 25 only).
  void check(bool ok, const std::string& what) {
    if (ok) {
      ++passed;
    } else {
      ++failed;
      if (failed <= 25) ADD_FAILURE() << what;
    }
  }

  int passed = 0, failed = 0;

 private:
  class Printer : public ::testing::Environment {
   public:
    explicit Printer(const Tally& t) : t_(t) {}
    void TearDown() override {
      std::printf("%s: %d passed, %d failed (ISAs:%s)\n", t_.test_, t_.passed, t_.failed, isa_list().c_str());
    }

   private:
    const Tally& t_;
  };
  const char* test_;
};

// Bit-for-bit equality (memcmp): n floats at a and b; two vectors (sizes included).
inline bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && same_bits(a.data(), b.data(), static_cast<int64_t>(a.size()));
}

// n floats drawn uniformly from [lo, hi) / from N(0, sigma^2), each call with a fresh distribution.
inline std::vector<float> uniform_floats(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}
inline std::vector<float> normal_floats(size_t n, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// The IR's reference kernel for node n (built on parameters) on the values `in`: the math oracle.
// A node or evaluation error fails the test and gives an empty vector.
inline std::vector<float> ir_eval(const ir::NodePtr& n, const std::vector<ir::Tensor>& in) {
  if (n->error()) {
    ADD_FAILURE() << n->error()->what;
    return {};
  }
  auto r = ir::op_def(n->type()).eval(*n, in);
  if (!r) {
    ADD_FAILURE() << r.error().what;
    return {};
  }
  return (*r)[0].to_f32();
}
inline ir::NodePtr param(std::vector<int64_t> shape, ir::ElementType t = ir::ElementType::f32) {
  return ir::ops::parameter(t, ir::Shape::from(shape), "p");
}
inline ir::Tensor tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  return ir::Tensor::from_f32(ir::ElementType::f32, std::move(shape), v);
}

}  // namespace ggflow::cpu::sweep
