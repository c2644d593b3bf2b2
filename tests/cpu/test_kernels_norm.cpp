// Kernel sweep, part 2: RMSNorm and LayerNorm (cpu/kernels/norm.h) and softmax (softmax.h).
// Every shape (one row, odd sizes, sizes off 8/16, strides, in place) x option x ISA:
//  - SIMD == scalar twin by memcmp; row-range splits give the same bits;
//  - the twin against a double-precision reference and against the IR's reference kernels
//    (RMSNorm, LayerNorm; Multiply, Add, Softmax for the masked, scaled softmax), evaluated here, within the
//    bounds stated below.
// Prints "N passed, N failed".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/norm.h"
#include "cpu/kernels/softmax.h"
#include "ir/ops.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::ir_eval;
using sweep::isa_name;
using sweep::normal_floats;
using sweep::param;
using sweep::same_bits;
using sweep::tensor;

sweep::Tally tally("test_kernels_norm");

// ---- RMSNorm
// Bounds: |y - y_double| <= 1e-6 |y_double| + 1e-30 per element (16 partial sums keep the sum's
// rounding error near sqrt(n/16) ulp; measured worst is printed), and the same against the IR's
// sequential f32 sum.
constexpr double kRmsBound = 1e-6;

TEST(KernelsNorm, RmsNormSweep) {
  std::mt19937 rng(1);
  const int64_t sizes[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 576, 1000, 2048, 2049};
  double worst_twin = 0, worst_ir = 0;
  for (int64_t n : sizes)
    for (int64_t rows : {1, 3})
      for (bool with_gamma : {false, true})
        for (float sigma : {1e-3f, 1.0f, 300.0f}) {
          const float eps = sigma < 1e-2f ? 1e-6f : 1e-5f;
          const int64_t xs = n + 3, ys = n + 1;
          std::vector<float> x = normal_floats(rows * xs, rng, sigma), g = normal_floats(n, rng, 1.0f);
          const float* gamma = with_gamma ? g.data() : nullptr;
          std::vector<float> twin(rows * ys, 0.0f);
          rmsnorm(Isa::scalar, x.data(), xs, gamma, eps, twin.data(), ys, n, 0, rows);
          const std::string tag = "rmsnorm n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                  (with_gamma ? " gamma" : "") + " sigma=" + std::to_string(sigma);
          // the IR's RMSNorm on the packed rows
          std::vector<float> packed(rows * n);
          for (int64_t r = 0; r < rows; ++r) std::copy(x.begin() + r * xs, x.begin() + r * xs + n, packed.begin() + r * n);
          std::vector<float> ir;
          if (with_gamma)
            ir = ir_eval(ir::ops::rms_norm(param({rows, n}), param({n}), eps), {tensor({rows, n}, packed), tensor({n}, g)});
          else
            ir = ir_eval(ir::ops::rms_norm(param({rows, n}), std::nullopt, eps), {tensor({rows, n}, packed)});
          if (ir.size() != static_cast<size_t>(rows * n)) ir.assign(rows * n, 0.0f);
          double e_twin = 0, e_ir = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const float* px = x.data() + r * xs;
            double ss = 0;
            for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(px[i]) * px[i];
            const double dscale = 1.0 / std::sqrt(ss / n + eps);
            for (int64_t i = 0; i < n; ++i) {
              const double ref = px[i] * dscale * (gamma ? gamma[i] : 1.0);
              const double tol = std::fabs(ref) + 1e-30;
              e_twin = std::max(e_twin, std::fabs(twin[r * ys + i] - ref) / tol);
              e_ir = std::max(e_ir, std::fabs(twin[r * ys + i] - static_cast<double>(ir[r * n + i])) / tol);
            }
          }
          worst_twin = std::max(worst_twin, e_twin), worst_ir = std::max(worst_ir, e_ir);
          tally.check(e_twin <= kRmsBound, tag + ": twin vs double " + std::to_string(e_twin));
          tally.check(e_ir <= 2 * kRmsBound, tag + ": twin vs IR " + std::to_string(e_ir));
          for (Isa isa : supported_isas()) {
            std::vector<float> y(rows * ys, 0.0f), split(rows * ys, 0.0f);
            rmsnorm(isa, x.data(), xs, gamma, eps, y.data(), ys, n, 0, rows);
            tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
            for (int64_t r = 0; r < rows; ++r) rmsnorm(isa, x.data(), xs, gamma, eps, split.data(), ys, n, r, r + 1);
            tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " row split differs");
          }
        }
  std::printf("  rmsnorm: max relative error twin vs double %.3g, twin vs IR RMSNorm %.3g (bounds %.0e, %.0e)\n",
              worst_twin, worst_ir, kRmsBound, 2 * kRmsBound);
  // in place, one row
  for (Isa isa : supported_isas()) {
    std::vector<float> x = normal_floats(77, rng, 2.0f), want(77), g = normal_floats(77, rng, 1.0f);
    rmsnorm(Isa::scalar, x.data(), 0, g.data(), 1e-6f, want.data(), 0, 77, 0, 1);
    rmsnorm(isa, x.data(), 0, g.data(), 1e-6f, x.data(), 0, 77, 0, 1);
    tally.check(same_bits(x, want), "rmsnorm in place " + isa_name(isa));
  }
}

// ---- LayerNorm
// Bounds, absolute (y is ~N(0, 1) after the norm; the mean's rounding shifts every element alike):
// |y - y_double| <= 1e-5 + 4 u per element, and 1e-4 + 4 u against the IR, whose sequential f32
// sums carry ~sqrt(n) ulp of the row's sum; u = 2^-23 |mean| / std is the rounding of x - mean in
// f32 that no order avoids (large on rows offset far from 0 with a small spread: a row of two
// values ~3000 apart by ~1). Rows offset by 10 sigma test the centring.
constexpr double kLayerNormBound = 1e-5, kLayerNormIrBound = 1e-4;

TEST(KernelsNorm, LayerNormSweep) {
  std::mt19937 rng(3);
  const int64_t sizes[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 384, 1000, 1536, 2049};
  double worst_twin = 0, worst_ir = 0;
  for (int64_t n : sizes)
    for (int64_t rows : {1, 3})
      for (float sigma : {1e-3f, 1.0f, 300.0f})
        for (float offset : {0.0f, 10.0f}) {
          const float eps = 1e-12f;
          const int64_t xs = n + 3, ys = n + 1;
          std::vector<float> x = normal_floats(rows * xs, rng, sigma);
          for (float& v : x) v += offset * sigma;
          std::vector<float> twin(rows * ys, 0.0f);
          layernorm(Isa::scalar, x.data(), xs, eps, twin.data(), ys, n, 0, rows);
          const std::string tag = "layernorm n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                  " sigma=" + std::to_string(sigma) + " offset=" + std::to_string(offset);
          std::vector<float> packed(rows * n);
          for (int64_t r = 0; r < rows; ++r) std::copy(x.begin() + r * xs, x.begin() + r * xs + n, packed.begin() + r * n);
          std::vector<float> ir = ir_eval(ir::ops::layer_norm(param({rows, n}), eps), {tensor({rows, n}, packed)});
          if (ir.size() != static_cast<size_t>(rows * n)) ir.assign(rows * n, 0.0f);
          double e_twin = 0, e_ir = 0;  // errors beyond the conditioning term 4 u, in units of the bounds
          for (int64_t r = 0; r < rows; ++r) {
            const float* px = x.data() + r * xs;
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < n; ++i) sum += px[i];
            const double mean = sum / n;
            for (int64_t i = 0; i < n; ++i) sq += (px[i] - mean) * (px[i] - mean);
            const double inv = 1.0 / std::sqrt(sq / n + eps);
            const double u = std::ldexp(1.0, -23) * std::fabs(mean) * inv;
            for (int64_t i = 0; i < n; ++i) {
              const double ref = (px[i] - mean) * inv;
              e_twin = std::max(e_twin, std::fabs(twin[r * ys + i] - ref) / (kLayerNormBound + 4 * u));
              e_ir = std::max(e_ir, std::fabs(twin[r * ys + i] - static_cast<double>(ir[r * n + i])) / (kLayerNormIrBound + 4 * u));
            }
          }
          // one element: x - mean is 0 (or a rounding residue), so only the bits are compared
          if (n > 1) {
            worst_twin = std::max(worst_twin, e_twin), worst_ir = std::max(worst_ir, e_ir);
            tally.check(e_twin <= 1.0, tag + ": twin vs double, in bound units " + std::to_string(e_twin));
            tally.check(e_ir <= 1.0, tag + ": twin vs IR, in bound units " + std::to_string(e_ir));
          }
          for (Isa isa : supported_isas()) {
            std::vector<float> y(rows * ys, 0.0f), split(rows * ys, 0.0f);
            layernorm(isa, x.data(), xs, eps, y.data(), ys, n, 0, rows);
            tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
            for (int64_t r = 0; r < rows; ++r) layernorm(isa, x.data(), xs, eps, split.data(), ys, n, r, r + 1);
            tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " row split differs");
          }
        }
  std::printf("  layernorm: worst error / bound, twin vs double %.3g (1e-5 + 4u), twin vs IR LayerNorm %.3g (1e-4 + 4u)\n",
              worst_twin, worst_ir);
  for (Isa isa : supported_isas()) {  // in place
    std::vector<float> x = normal_floats(77, rng, 2.0f), want(77);
    layernorm(Isa::scalar, x.data(), 0, 1e-5f, want.data(), 0, 77, 0, 1);
    layernorm(isa, x.data(), 0, 1e-5f, x.data(), 0, 77, 0, 1);
    tally.check(same_bits(x, want), "layernorm in place " + isa_name(isa));
  }
}

// ---- softmax
// Reference: s = x*scale + mask in f32 (as the kernel and the IR form it), then exp(s - m) / sum
// in double. Bound: |y - ref| <= 2e-6 (|ref| + 1e-4 max(ref)) per element: relative for every
// probability above 1e-4 of the row's largest; below, the f32 rounding of s - m (which the IR shares)
// dominates. An all -inf row gives zeros. Against the IR's f32 formula the bound is
// 4e-6 + 5e-7 sqrt(n): the IR's sequential sum of n terms carries ~sqrt(n) ulp.
TEST(KernelsNorm, SoftmaxSweep) {
  std::mt19937 rng(2);
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t sizes[] = {1, 2, 5, 8, 15, 16, 17, 31, 32, 33, 100, 1000, 4097};
  double worst_twin = 0, worst_ir = 0, worst_ir_ratio = 0;
  for (int64_t n : sizes)
    for (int64_t rows : {1, 4})
      for (int mask_kind = 0; mask_kind < 4; ++mask_kind)  // none, causal (-inf), random additive, one all -inf row
        for (float scale : {1.0f, 0.125f}) {
          const int64_t xs = n + 2, ys = n, ms = mask_kind == 2 ? n : n + 1;
          std::vector<float> x = normal_floats(rows * xs, rng, 4.0f), mask(rows * ms, 0.0f);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < n; ++i) {
              float& m = mask[r * ms + i];
              if (mask_kind == 1) m = i > r + n / 2 ? ninf : 0.0f;
              if (mask_kind == 2) m = static_cast<float>(static_cast<int>(rng() % 7)) - 3.0f;
              if (mask_kind == 3) m = r == 0 ? ninf : 0.0f;
            }
          const float* pm = mask_kind ? mask.data() : nullptr;
          std::vector<float> twin(rows * ys);
          softmax(Isa::scalar, x.data(), xs, pm, ms, scale, twin.data(), ys, n, 0, rows);
          const std::string tag = "softmax n=" + std::to_string(n) + " rows=" + std::to_string(rows) + " mask=" +
                                  std::to_string(mask_kind) + " scale=" + std::to_string(scale);
          // the IR: Softmax(Add(Multiply(x, scale), mask)) on packed rows (as a graph without a
          // fused op computes it)
          std::vector<float> xp(rows * n), mp(rows * n);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0; i < n; ++i) xp[r * n + i] = x[r * xs + i], mp[r * n + i] = mask[r * ms + i];
          std::vector<float> sx = ir_eval(ir::ops::multiply(param({rows, n}), param({1})),
                                          {tensor({rows, n}, xp), tensor({1}, {scale})});
          if (pm) sx = ir_eval(ir::ops::add(param({rows, n}), param({rows, n})), {tensor({rows, n}, sx), tensor({rows, n}, mp)});
          std::vector<float> ir = ir_eval(ir::ops::softmax(param({rows, n}), -1), {tensor({rows, n}, sx)});
          if (ir.size() != static_cast<size_t>(rows * n)) ir.assign(rows * n, 0.0f);
          double e_twin = 0, e_ir = 0;
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> s(n);
            float mx = ninf;
            for (int64_t i = 0; i < n; ++i) {
              s[i] = x[r * xs + i] * scale;
              if (pm) s[i] = s[i] + pm[r * ms + i];
              mx = std::max(mx, s[i]);
            }
            std::vector<double> ref(n, 0.0);
            if (mx != ninf) {
              double sum = 0;
              for (int64_t i = 0; i < n; ++i) ref[i] = std::exp(static_cast<double>(s[i]) - mx), sum += ref[i];
              for (int64_t i = 0; i < n; ++i) ref[i] /= sum;
            }
            double rmax = 0;
            for (double v : ref) rmax = std::max(rmax, v);
            for (int64_t i = 0; i < n; ++i) {
              const double tol = std::fabs(ref[i]) + 1e-4 * rmax + 1e-300;
              e_twin = std::max(e_twin, std::fabs(twin[r * ys + i] - ref[i]) / tol);
              e_ir = std::max(e_ir, std::fabs(twin[r * ys + i] - static_cast<double>(ir[r * n + i])) / tol);
              if (mx == ninf) e_twin = std::max(e_twin, twin[r * ys + i] == 0.0f ? 0.0 : 1.0);
            }
          }
          worst_twin = std::max(worst_twin, e_twin), worst_ir = std::max(worst_ir, e_ir);
          tally.check(e_twin <= 2e-6, tag + ": twin vs double " + std::to_string(e_twin));
          // the IR's sequential f32 sum adds its own ~sqrt(n) ulp
          const double ir_bound = 4e-6 + 5e-7 * std::sqrt(static_cast<double>(n));
          worst_ir_ratio = std::max(worst_ir_ratio, e_ir / ir_bound);
          tally.check(e_ir <= ir_bound, tag + ": twin vs IR " + std::to_string(e_ir));
          for (Isa isa : supported_isas()) {
            std::vector<float> y(rows * ys), split(rows * ys);
            softmax(isa, x.data(), xs, pm, ms, scale, y.data(), ys, n, 0, rows);
            tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
            softmax(isa, x.data(), xs, pm, ms, scale, split.data(), ys, n, 0, rows / 2);
            softmax(isa, x.data(), xs, pm, ms, scale, split.data(), ys, n, rows / 2, rows);
            tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " row split differs");
          }
        }
  std::printf("  softmax: max relative error twin vs double %.3g (bound 2e-6), twin vs IR kernels %.3g (bound "
              "4e-6 + 5e-7 sqrt(n); worst at %.2f of it)\n", worst_twin, worst_ir, worst_ir_ratio);
  for (Isa isa : supported_isas()) {  // in place, shared mask row
    std::vector<float> x = normal_floats(3 * 45, rng, 3.0f), m = normal_floats(45, rng, 1.0f), want(3 * 45);
    softmax(Isa::scalar, x.data(), 45, m.data(), 0, 0.5f, want.data(), 45, 45, 0, 3);
    softmax(isa, x.data(), 45, m.data(), 0, 0.5f, x.data(), 45, 45, 0, 3);
    tally.check(same_bits(x, want), "softmax in place " + isa_name(isa));
  }
}

}  // namespace
}  // namespace ggflow::cpu
