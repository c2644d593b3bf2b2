// Kernel sweep, part 1: the shared transcendental functions (cpu/kernels/math.h), the
// activations and GLUs (act.h) and elementwise arithmetic (elementwise.h).
//  - accuracy of exp / tanh / silu / gelu_erf / gelu_tanh against double-precision references over
//    dense sweeps (max ulp printed and bounded as math.h states);
//  - every ISA this CPU supports against the scalar twin by memcmp, for special values (NaN, inf,
//    zeros, subnormals, huge), dense sweeps and random bit patterns;
//  - every kernel x shape (odd sizes, one row, sizes off the SIMD widths, strides, broadcast,
//    in place) x ISA: SIMD == twin by memcmp, row-range splits give the same bits, and the twin
//    agrees with the IR's reference kernels (Swish, Gelu, Multiply, Add; evaluated) within a
//    stated bound (activations) or bit for bit (add, mul, scale: one IEEE operation each).
// Prints "N passed, N failed".
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/act.h"
#include "cpu/kernels/elementwise.h"
#include "cpu/kernels/math.h"
#include "gguf/dequant.h"
#include "ir/gelu_f16.h"
#include "ir/ops.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::ir_eval;
using sweep::param;
using sweep::same_bits;
using sweep::tensor;
using sweep::uniform_floats;

sweep::Tally tally("test_kernels_math");

double ulp_of(double r) {
  r = std::fabs(r);
  if (r < FLT_MIN) return std::ldexp(1.0, -149);
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 24);
}

// Error of y against the exact r, in ulps of r (subnormal r: in units of 2^-149).
struct Err {
  double normal = 0, subnormal = 0;
  float at = 0;
  bool inf_ok = true;
  void add(float x, float y, double r) {
    const float rf = static_cast<float>(r);
    if (std::isinf(rf)) {
      inf_ok = inf_ok && std::isinf(y) && (y > 0) == (rf > 0);
      return;
    }
    const double e = std::fabs(static_cast<double>(y) - r) / ulp_of(r);
    if (std::fabs(r) < FLT_MIN) subnormal = std::max(subnormal, e);
    else if (e > normal) normal = e, at = x;
  }
};

double ref_exp(double x) { return std::exp(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_silu(double x) { return x / (1.0 + std::exp(-x)); }
double ref_gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double ref_gelu_tanh(double x) {
  const double z = 2.0 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-z));
}

struct Fn {
  const char* name;
  float (*scalar)(float);
  double (*ref)(double);
  double bound_ulp;  // math.h's stated bound
  float lo, hi;      // sweep range
  std::function<void(Isa, const float*, float*, int64_t)> array;
};

std::vector<Fn> functions() {
  return {
      {"exp", [](float x) { return math::exp(x); }, ref_exp, 1.0, -105.0f, 90.0f,
       [](Isa i, const float* x, float* y, int64_t n) { exp_array(i, x, y, n); }},
      {"tanh", [](float x) { return math::tanh(x); }, ref_tanh, 2.0, -12.0f, 12.0f,
       [](Isa i, const float* x, float* y, int64_t n) { tanh_array(i, x, y, n); }},
      {"silu", [](float x) { return math::silu(x); }, ref_silu, 3.5, -110.0f, 100.0f,
       [](Isa i, const float* x, float* y, int64_t n) { activation(i, Act::silu, x, 0, y, 0, n, 0, 1); }},
      {"gelu_erf", [](float x) { return math::gelu_erf(x); }, ref_gelu_erf, 4.0, -20.0f, 20.0f,
       [](Isa i, const float* x, float* y, int64_t n) { activation(i, Act::gelu_erf, x, 0, y, 0, n, 0, 1); }},
      {"gelu_tanh", [](float x) { return math::gelu_tanh(x); }, ref_gelu_tanh, 4.0, -20.0f, 20.0f,
       [](Isa i, const float* x, float* y, int64_t n) { activation(i, Act::gelu_tanh, x, 0, y, 0, n, 0, 1); }},
  };
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                          std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                          1e-30f, -1e-30f, 1e30f, -1e30f, 88.7228f, 88.72284f, 88.8f, 89.0f, 89.5f, -87.3f,
                          -103.9f, -103.98f, -104.0f, -104.5f, -148.0f, -150.0f, -151.0f, -200.0f, -201.0f,
                          0.625f, -0.625f, 0.62499994f, 9.0f, 10.05f, -10.05f, 10.1f, -10.1f, 13.2f, -13.2f,
                          16.0f, -16.0f, 16.5f, -16.5f, 20.0f, -20.0f, 21.0f, -21.0f, 0.5f, -0.5f, 1.0f, -1.0f};
  uint32_t snan = 0x7F800001u;  // a signalling NaN: returned unchanged
  float f;
  std::memcpy(&f, &snan, 4);
  v.push_back(f);
  return v;
}

// ---- accuracy of the one definition of each function
TEST(KernelsMath, AccuracyAgainstDouble) {
  for (const Fn& f : functions()) {
    Err err;
    const long N = 4000000;
    for (long i = 0; i <= N; ++i) {
      const float x = f.lo + (f.hi - f.lo) * static_cast<float>(static_cast<double>(i) / N);
      err.add(x, f.scalar(x), f.ref(x));
    }
    for (long i = 0; i <= N / 4; ++i) {  // dense near zero, where the small-argument branches live
      const float x = -2.0f + 4.0f * static_cast<float>(static_cast<double>(i) / (N / 4));
      err.add(x, f.scalar(x), f.ref(x));
    }
    std::mt19937 rng(7);  // random magnitudes over many binades
    std::uniform_real_distribution<float> e(-40.0f, 7.0f);
    for (int i = 0; i < 200000; ++i) {
      const float x = (i & 1 ? -1.0f : 1.0f) * std::exp2(e(rng));
      err.add(x, f.scalar(x), f.ref(x));
    }
    std::printf("  %-9s max %.3f ulp (at %.9g) over [%g, %g]; subnormal results within %.2f x 2^-149\n", f.name,
                err.normal, err.at, f.lo, f.hi, err.subnormal);
    tally.check(err.normal <= f.bound_ulp, std::string(f.name) + ": " + std::to_string(err.normal) + " ulp > bound " +
                                               std::to_string(f.bound_ulp));
    tally.check(err.subnormal <= 2.0, std::string(f.name) + ": subnormal error " + std::to_string(err.subnormal));
    tally.check(err.inf_ok, std::string(f.name) + ": overflow mismatch");
  }
}

TEST(KernelsMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  auto is_neg_zero = [](float v) { return v == 0.0f && std::signbit(v); };
  tally.check(math::exp(-inf) == 0.0f, "exp(-inf) = 0");
  tally.check(math::exp(inf) == inf, "exp(inf) = inf");
  tally.check(math::exp(89.0f) == inf, "exp(89) = inf");
  tally.check(math::exp(0.0f) == 1.0f && math::exp(-0.0f) == 1.0f, "exp(0) = 1");
  tally.check(math::exp(-104.0f) == 0.0f, "exp(-104) = 0");
  tally.check(math::tanh(inf) == 1.0f && math::tanh(-inf) == -1.0f, "tanh(+-inf)");
  tally.check(is_neg_zero(math::tanh(-0.0f)), "tanh(-0) = -0");
  tally.check(math::silu(inf) == inf && is_neg_zero(math::silu(-inf)), "silu(+-inf)");
  tally.check(math::gelu_erf(inf) == inf && is_neg_zero(math::gelu_erf(-inf)), "gelu_erf(+-inf)");
  tally.check(math::gelu_tanh(inf) == inf && is_neg_zero(math::gelu_tanh(-inf)), "gelu_tanh(+-inf)");
  tally.check(math::silu(1e30f) == 1e30f && is_neg_zero(math::silu(-1e30f)), "silu(+-1e30)");
  for (const Fn& f : functions())
    for (float x : special_values())
      if (std::isnan(x)) {
        const float y = f.scalar(x);
        tally.check(same_bits(&x, &y, 1), std::string(f.name) + ": NaN input not returned unchanged");
      }
}

// ---- every ISA == the twin, bit for bit
TEST(KernelsMath, SimdEqualsTwin) {
  std::vector<float> x = special_values();
  for (int i = 0; i <= 200000; ++i) x.push_back(-120.0f + 240.0f * static_cast<float>(i) / 200000.0f);
  for (int i = 0; i <= 50000; ++i) x.push_back(-3.0f + 6.0f * static_cast<float>(i) / 50000.0f);
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t b = rng();
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
  }
  for (const Fn& f : functions()) {
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = f.scalar(x[i]);
    for (Isa isa : supported_isas()) {
      std::vector<float> got(x.size());
      f.array(isa, x.data(), got.data(), static_cast<int64_t>(x.size()));
      tally.check(same_bits(got, want), std::string(f.name) + " " + isa_name(isa) + " != scalar twin");
      for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33}) {  // tails at every offset
        std::vector<float> g2(n), w2(want.begin() + 100, want.begin() + 100 + n);
        f.array(isa, x.data() + 100, g2.data(), n);
        tally.check(same_bits(g2, w2), std::string(f.name) + " " + isa_name(isa) + " tail n=" + std::to_string(n));
      }
    }
  }
}

// ---- activations, GLUs and elementwise ops over rows: shapes x ISA
struct Shape {
  int64_t rows, n;
};
const Shape kShapes[] = {{1, 1}, {1, 3}, {1, 7}, {1, 8},   {1, 9},   {1, 15},  {1, 16}, {1, 17}, {2, 31},
                         {3, 33}, {1, 64}, {5, 100}, {2, 255}, {3, 576}, {1, 1000}, {4, 2049}};

// act over [rows, n] (and, for a GLU, Multiply by u) in the IR.
std::vector<float> ir_act(Act act, bool glu_form, int64_t rows, int64_t n, const std::vector<float>& x,
                          const std::vector<float>& u) {
  const ir::GeluMode mode = act == Act::gelu_erf ? ir::GeluMode::erf : act == Act::gelu_f16 ? ir::GeluMode::tanh_f16 : ir::GeluMode::tanh;
  ir::NodePtr a = act == Act::silu ? ir::ops::swish(param({rows, n})) : ir::ops::gelu(param({rows, n}), mode);
  std::vector<float> y = ir_eval(a, {tensor({rows, n}, x)});
  if (glu_form && y.size() == x.size()) y = ir_eval(ir::ops::multiply(param({rows, n}), param({rows, n})), {tensor({rows, n}, y), tensor({rows, n}, u)});
  if (y.size() != x.size()) y.assign(x.size(), 0.0f);
  return y;
}

TEST(KernelsMath, ActivationSweep) {
  std::mt19937 rng(3);
  struct A {
    Act act;
    const char* name;
  };
  const A acts[] = {{Act::silu, "silu"}, {Act::gelu_erf, "gelu_erf"}, {Act::gelu_tanh, "gelu_tanh"}, {Act::gelu_f16, "gelu_f16"}};
  double worst_ir = 0;
  for (const A& a : acts)
    for (const Shape& s : kShapes)
      for (bool glu_form : {false, true}) {
        const int64_t xs = s.n + 3, us = s.n + 5, ys = s.n + 1;  // strided rows
        // gelu_f16 also past its +-10 cut-offs
        const float span = a.act == Act::gelu_f16 ? 12.0f : 8.0f;
        std::vector<float> x = uniform_floats(s.rows * xs, rng, -span, span), u = uniform_floats(s.rows * us, rng, -2.0f, 2.0f);
        auto run = [&](Isa isa, int64_t r0, int64_t r1, std::vector<float>& y) {
          if (glu_form) glu(isa, a.act, x.data(), xs, u.data(), us, y.data(), ys, s.n, r0, r1);
          else activation(isa, a.act, x.data(), xs, y.data(), ys, s.n, r0, r1);
        };
        std::vector<float> twin(s.rows * ys, 0.0f);
        run(Isa::scalar, 0, s.rows, twin);
        const std::string tag = std::string(glu_form ? "glu " : "") + a.name + " rows=" + std::to_string(s.rows) +
                                " n=" + std::to_string(s.n);
        // twin vs the IR's f32 formula, relative to max(|y|, |x|): the IR's 0.5 x (1 + erf/tanh)
        // cancels for negative x, leaving an absolute error ~|x| 2^-24 there; the twin's own
        // accuracy against double is the AccuracyAgainstDouble test
        std::vector<float> xp(s.rows * s.n), up(s.rows * s.n);
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t i = 0; i < s.n; ++i) xp[r * s.n + i] = x[r * xs + i], up[r * s.n + i] = u[r * us + i];
        const std::vector<float> ir = ir_act(a.act, glu_form, s.rows, s.n, xp, up);
        double e = 0;
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t i = 0; i < s.n; ++i) {
            const float xv = xp[r * s.n + i], want = ir[r * s.n + i];
            const double scale = std::max<double>(std::fabs(want), std::fabs(xv) * (glu_form ? std::fabs(up[r * s.n + i]) : 1.0));
            if (scale > 0) e = std::max(e, std::fabs(twin[r * ys + i] - want) / scale);
          }
        worst_ir = std::max(worst_ir, e);
        tally.check(e <= 2e-6, tag + ": twin vs IR formula relative error " + std::to_string(e));
        for (Isa isa : supported_isas()) {
          std::vector<float> y(s.rows * ys, 0.0f);
          run(isa, 0, s.rows, y);
          tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
          std::vector<float> split(s.rows * ys, 0.0f);  // rows split in two ranges
          const int64_t mid = s.rows / 2;
          run(isa, 0, mid, split);
          run(isa, mid, s.rows, split);
          tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " row split differs");
        }
      }
  std::printf("  activations: twin vs IR reference kernels, max relative error %.3g (bound 2e-6)\n", worst_ir);
  // in place
  for (Isa isa : supported_isas()) {
    std::vector<float> x = uniform_floats(37, rng, -5.0f, 5.0f), want(37), y = x;
    activation(Isa::scalar, Act::gelu_tanh, x.data(), 0, want.data(), 0, 37, 0, 1);
    activation(isa, Act::gelu_tanh, y.data(), 0, y.data(), 0, 37, 0, 1);
    tally.check(same_bits(y, want), "in-place activation " + isa_name(isa));
    std::vector<float> g = uniform_floats(37, rng, -5.0f, 5.0f), u = uniform_floats(37, rng, -5.0f, 5.0f), w2(37);
    swiglu(Isa::scalar, g.data(), u.data(), w2.data(), 37);
    swiglu(isa, g.data(), u.data(), g.data(), 37);
    tally.check(same_bits(g, w2), "in-place swiglu " + isa_name(isa));
  }
}

TEST(KernelsMath, ElementwiseSweep) {
  std::mt19937 rng(5);
  for (const Shape& s : kShapes)
    for (int op = 0; op < 3; ++op)
      for (bool bcast : {false, true}) {
        if (op == 2 && bcast) continue;
        const int64_t as = s.n + 2, bs = bcast ? 0 : s.n + 4, ys = s.n;
        std::vector<float> a = uniform_floats(s.rows * as, rng, -100.0f, 100.0f);
        std::vector<float> b = uniform_floats(bcast ? s.n : s.rows * bs, rng, -100.0f, 100.0f);
        const float sc = 0.125f * 3.0f + 1e-3f;
        auto run = [&](Isa isa, int64_t r0, int64_t r1, std::vector<float>& y) {
          if (op == 0) binary(isa, Binary::add, a.data(), as, b.data(), bs, y.data(), ys, s.n, r0, r1);
          else if (op == 1) binary(isa, Binary::mul, a.data(), as, b.data(), bs, y.data(), ys, s.n, r0, r1);
          else scale(isa, a.data(), as, sc, y.data(), ys, s.n, r0, r1);
        };
        std::vector<float> twin(s.rows * ys);
        run(Isa::scalar, 0, s.rows, twin);
        const char* names[] = {"add", "mul", "scale"};
        const std::string tag = std::string(names[op]) + (bcast ? " bcast" : "") + " rows=" + std::to_string(s.rows) +
                                " n=" + std::to_string(s.n);
        // the IR's Add / Multiply (numpy broadcasting of the [n] row; scale as a [1] tensor)
        std::vector<float> ap(s.rows * s.n), bp(bcast ? s.n : s.rows * s.n);
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t i = 0; i < s.n; ++i) {
            ap[r * s.n + i] = a[r * as + i];
            if (!bcast) bp[r * s.n + i] = b[r * bs + i];
          }
        if (bcast) bp.assign(b.begin(), b.begin() + s.n);
        const std::vector<int64_t> bshape = bcast ? std::vector<int64_t>{s.n} : std::vector<int64_t>{s.rows, s.n};
        std::vector<float> ir;
        if (op == 0) ir = ir_eval(ir::ops::add(param({s.rows, s.n}), param(bshape)), {tensor({s.rows, s.n}, ap), tensor(bshape, bp)});
        if (op == 1) ir = ir_eval(ir::ops::multiply(param({s.rows, s.n}), param(bshape)), {tensor({s.rows, s.n}, ap), tensor(bshape, bp)});
        if (op == 2) ir = ir_eval(ir::ops::multiply(param({s.rows, s.n}), param({1})), {tensor({s.rows, s.n}, ap), tensor({1}, {sc})});
        bool ir_equal = ir.size() == static_cast<size_t>(s.rows * s.n);  // one IEEE op each: equal bits
        for (int64_t r = 0; ir_equal && r < s.rows; ++r)
          ir_equal = same_bits(ir.data() + r * s.n, twin.data() + r * ys, s.n);
        tally.check(ir_equal, tag + ": twin != IR");
        for (Isa isa : supported_isas()) {
          std::vector<float> y(s.rows * ys), split(s.rows * ys);
          run(isa, 0, s.rows, y);
          tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
          run(isa, 0, 1, split);
          run(isa, 1, s.rows, split);
          tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " row split differs");
        }
      }
}

}  // namespace
}  // namespace ggflow::cpu

namespace ggflow::cpu {
namespace {

// GGML's CPU GELU (ir/gelu_f16.h): the f16 table read at x's f16 rounding, as ggml-cpu fills it
// (the f32 tanh form at the f16 value, rounded to f16), 0 below -10, x above 10.
TEST(KernelsMath, GeluF16IsGgmlsTable) {
  std::mt19937 rng(11);
  std::vector<float> xs = uniform_floats(4096, rng, -11.0f, 11.0f);
  for (float v : {-10.0f, -9.999f, 0.0f, -0.0f, 1e-8f, 9.999f, 10.0f, 1e6f, -1e6f}) xs.push_back(v);
  for (float x : xs) {
    float want;
    if (x <= -10.0f) {
      want = 0.0f;
    } else if (x >= 10.0f) {
      want = x;
    } else {
      const float v = gguf::f16_to_f32(gguf::f32_to_f16(x));
      want = gguf::f16_to_f32(gguf::f32_to_f16(0.5f * v * (1.0f + std::tanh(0.79788456080286535587989211986876f * v * (1.0f + 0.044715f * v * v)))));
    }
    const float got = ir::gelu_f16(x);
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "x = " << x << ": " << got << " vs " << want;
  }
  // within f16's resolution of the exact GELU (tanh form) where |x| < 10
  double worst = 0;
  for (float x : xs)
    if (std::fabs(x) < 10.0f) worst = std::max(worst, std::fabs(ir::gelu_f16(x) - ref_gelu_tanh(x)) / std::max(1.0, std::fabs(double(x))));
  EXPECT_LT(worst, 2e-3);
}

}  // namespace
}  // namespace ggflow::cpu
