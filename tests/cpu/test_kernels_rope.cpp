// Kernel sweep, part 3: RoPE (cpu/kernels/rope.h), both modes, partial rotation, freq_factors,
// freq_scale and attn_factor, head sizes 6..256, 1 and 3 heads, positions up to 10^5:
//  - SIMD == scalar twin by memcmp; token-range splits and in-place give the same bits;
//  - the twin against the IR's RoPE kernel (ir/ops/rope.cpp, evaluated: powf, cosf/sinf, theta by
//    repeated products) within |y - y_ir| <= 1e-6 (|x0| + |x1|): the two differ only where libm's
//    cosf/sinf (and, for rare n_dims, powf) and the kernel's double cos/sin/pow round differently;
//  - bad n_dims are errors, not aborts.
// Prints "N passed, N failed".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/rope.h"
#include "ir/ops.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;
using sweep::same_bits;

sweep::Tally tally("test_kernels_rope");

// The IR's RoPE kernel (ir/ops/rope.cpp) on x [T, H, S], evaluated: the math oracle.
std::vector<float> ir_rope(const RopeParams& a, const std::vector<float>& x, const std::vector<int32_t>& pos, int64_t H,
                           int64_t S) {
  const int64_t T = static_cast<int64_t>(pos.size()), nd = a.n_dims == 0 ? S : a.n_dims;
  ir::RopeAttrs at;
  at.mode = a.mode == RopeMode::neox ? ir::RopeMode::neox : ir::RopeMode::normal;
  at.n_dims = a.n_dims, at.freq_base = a.freq_base, at.freq_scale = a.freq_scale, at.attn_factor = a.attn_factor;
  auto px = ir::ops::parameter(ir::ElementType::f32, ir::Shape::from({T, H, S}), "x");
  auto pp = ir::ops::parameter(ir::ElementType::i32, ir::Shape::from({T}), "pos");
  std::vector<ir::Tensor> in = {ir::Tensor::from_f32(ir::ElementType::f32, {T, H, S}, x),
                                ir::Tensor::i32({T}, std::vector<int64_t>(pos.begin(), pos.end()))};
  ir::NodePtr n;
  if (a.freq_factors) {
    n = ir::ops::rope(px, pp, at, ir::ops::parameter(ir::ElementType::f32, ir::Shape::from({nd / 2}), "ff"));
    in.push_back(ir::Tensor::from_f32(ir::ElementType::f32, {nd / 2}, std::vector<float>(a.freq_factors, a.freq_factors + nd / 2)));
  } else {
    n = ir::ops::rope(px, pp, at);
  }
  std::vector<float> y = sweep::ir_eval(n, in);
  if (y.empty()) y.assign(x.size(), 0.0f);  // the error failed the test
  return y;
}

TEST(KernelsRope, Sweep) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd01(0.0f, 1.0f);
  std::uniform_real_distribution<float> ffd(1.0f, 8.0f);
  const std::vector<int32_t> pos = {0, 1, 31, 4095, 100000, 7};
  const int64_t T = static_cast<int64_t>(pos.size());
  double worst = 0;
  for (int64_t S : {6, 18, 64, 80, 128, 256})
    for (int64_t ndims : {int64_t{0}, S / 2 % 2 == 0 ? S / 2 : S - 2, int64_t{2}})
      for (RopeMode mode : {RopeMode::normal, RopeMode::neox})
        for (bool with_ff : {false, true})
          for (int64_t H : {1, 3})
            for (int variant = 0; variant < 2; ++variant) {
              RopeParams p;
              p.n_dims = ndims;
              p.mode = mode;
              p.freq_base = variant ? 1000000.0f : 10000.0f;
              p.freq_scale = variant ? 0.25f : 1.0f;
              p.attn_factor = variant ? 1.25f : 1.0f;
              const int64_t nrot = rope_dims(p, S);
              std::vector<float> ff(nrot / 2);
              for (float& f : ff) f = ffd(rng);
              p.freq_factors = with_ff ? ff.data() : nullptr;
              const int64_t xs = H * S + 5, ys = H * S;  // token strides (x strided, y packed)
              std::vector<float> x(T * xs), packed(T * H * S);
              for (float& v : x) v = nd01(rng);
              for (int64_t t = 0; t < T; ++t)
                std::memcpy(packed.data() + t * H * S, x.data() + t * xs, H * S * sizeof(float));
              const std::string tag = "rope S=" + std::to_string(S) + " n_dims=" + std::to_string(nrot) +
                                      (mode == RopeMode::neox ? " neox" : " normal") + (with_ff ? " ff" : "") +
                                      " H=" + std::to_string(H) + " variant=" + std::to_string(variant);
              std::vector<float> twin(T * ys);
              auto st = rope(Isa::scalar, p, x.data(), xs, twin.data(), ys, pos.data(), H, S, 0, T);
              tally.check(st.ok(), tag + ": " + (st.ok() ? "" : st.error().what));
              const std::vector<float> ir = ir_rope(p, packed, pos, H, S);
              double e = 0;
              for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < H; ++h)
                  for (int64_t k = 0; k < S; ++k) {
                    const int64_t idx = (t * H + h) * S + k;
                    // the pair partner's magnitude enters the bound
                    const int64_t partner = k >= nrot ? k
                                            : mode == RopeMode::normal ? (k ^ 1)
                                            : (k < nrot / 2 ? k + nrot / 2 : k - nrot / 2);
                    const double mag = std::fabs(packed[(t * H + h) * S + k]) + std::fabs(packed[(t * H + h) * S + partner]);
                    e = std::max(e, std::fabs(twin[idx] - ir[idx]) / (mag * p.attn_factor + 1e-30));
                  }
              worst = std::max(worst, e);
              tally.check(e <= 1e-6, tag + ": twin vs IR " + std::to_string(e));
              for (Isa isa : supported_isas()) {
                std::vector<float> y(T * ys), split(T * ys);
                (void)rope(isa, p, x.data(), xs, y.data(), ys, pos.data(), H, S, 0, T);
                tally.check(same_bits(y, twin), tag + " " + isa_name(isa) + " != twin");
                (void)rope(isa, p, x.data(), xs, split.data(), ys, pos.data(), H, S, 0, 2);
                (void)rope(isa, p, x.data(), xs, split.data(), ys, pos.data(), H, S, 2, T);
                tally.check(same_bits(split, twin), tag + " " + isa_name(isa) + " token split differs");
                std::vector<float> inplace = packed;  // in place on packed rows
                (void)rope(isa, p, inplace.data(), ys, inplace.data(), ys, pos.data(), H, S, 0, T);
                tally.check(same_bits(inplace, twin), tag + " " + isa_name(isa) + " in place differs");
              }
            }
  std::printf("  rope: twin vs IR RoPE kernel, max |dy| / (|x0| + |x1|) = %.3g (bound 1e-6)\n", worst);
}

TEST(KernelsRope, Errors) {
  std::vector<float> x(64), y(64);
  const int32_t pos[1] = {3};
  RopeParams p;
  p.n_dims = 7;
  tally.check(!rope(Isa::scalar, p, x.data(), 64, y.data(), 64, pos, 1, 64, 0, 1).ok(), "odd n_dims accepted");
  p.n_dims = 66;
  tally.check(!rope(Isa::scalar, p, x.data(), 64, y.data(), 64, pos, 1, 64, 0, 1).ok(), "n_dims > head size accepted");
  p.n_dims = 0;
  tally.check(!rope(Isa::scalar, p, x.data(), 64, y.data(), 64, pos, 1, 0, 0, 1).ok(), "head size 0 accepted");
  std::vector<float> big(2 * kRopeMaxDims + 2);
  tally.check(!rope(Isa::scalar, p, big.data(), 0, big.data(), 0, pos, 1, kRopeMaxDims + 2, 0, 1).ok(),
              "n_dims beyond the kernel limit accepted");
  tally.check(rope(Isa::scalar, p, x.data(), 64, y.data(), 64, pos, 1, 64, 0, 1).ok(), "valid rope rejected");
}

}  // namespace
}  // namespace ggflow::cpu
