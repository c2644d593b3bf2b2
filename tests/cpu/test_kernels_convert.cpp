// Kernel sweep, part 7: f32 <-> f16 (cpu/kernels/convert.h). Every ISA gives gguf's bits: to_f16
// equals gguf::f32_to_f16 (itself checked against numpy's astype(float16) in tests/gguf) on special
// values (signed zeros, ties to even at several exponents, the largest half, the overflow edge
// 65520, f16 subnormals and their ties, f32 subnormals, infinities, NaN with payloads) and on random
// values over the whole f32 range, lengths 0..70 (every tail); from_f16 equals gguf::f16_to_f32 on
// all 65536 halves.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/kernels/convert.h"
#include "gguf/dequant.h"
#include "sweep.h"

namespace ggflow::cpu {
namespace {

using sweep::isa_name;

sweep::Tally tally("test_kernels_convert");

float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(KernelsConvert, ToF16EqualsGgufOnEveryIsa) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e30f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(), -1e-40f, 6.1035156e-05f, 6.0e-05f, 5.9604645e-08f,
                          2.9802322e-08f, 2.98e-08f, 8.940697e-08f, 1e-9f};
  for (int e = -24; e <= 15; e += 3) {  // ties: halfway between two halves, both parities
    const float ulp = std::ldexp(1.0f, std::max(e - 10, -24));
    for (int k : {0, 1, 2, 3}) v.push_back(std::ldexp(1.0f, e) + (k + 0.5f) * ulp), v.push_back(-v.back());
  }
  for (uint32_t u : {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x7FBFFFFFu, 0xFFFFFFFFu, 0x7FC02000u, 0x7F802000u})
    v.push_back(bits(u));
  std::mt19937 rng(3);
  for (int i = 0; i < 4000; ++i) v.push_back(bits(rng()));  // every exponent, NaNs included
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 4000; ++i) v.push_back(u(rng));
  std::vector<uint16_t> twin(v.size());
  for (size_t i = 0; i < v.size(); ++i) twin[i] = gguf::f32_to_f16(v[i]);
  for (Isa isa : supported_isas()) {
    std::vector<uint16_t> out(v.size(), 0x1234);
    to_f16(isa, v.data(), static_cast<int64_t>(v.size()), out.data());
    tally.check(out == twin, std::string("to_f16 ") + isa_name(isa) + " != gguf::f32_to_f16");
    bool tails = true;
    for (int64_t n = 0; n <= 70; ++n) {  // lengths: every tail, nothing written past n
      std::vector<uint16_t> o(n + 8, 0xBEEF);
      to_f16(isa, v.data() + 5, n, o.data());
      for (int64_t i = 0; i < n + 8; ++i) tails = tails && o[i] == (i < n ? twin[5 + i] : 0xBEEF);
    }
    tally.check(tails, std::string("to_f16 ") + isa_name(isa) + ": a tail length differs or writes past n");
  }
}

TEST(KernelsConvert, FromF16IsExactOnEveryIsa) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> twin(h.size());
  for (size_t i = 0; i < h.size(); ++i) twin[i] = gguf::f16_to_f32(h[i]);
  for (Isa isa : supported_isas()) {
    std::vector<float> out(h.size() + 3, 7.0f);
    from_f16(isa, h.data(), static_cast<int64_t>(h.size()) - 1, out.data());  // an odd length: a tail
    bool same = std::memcmp(out.data(), twin.data(), (h.size() - 1) * 4) == 0 && out[h.size() - 1] == 7.0f;
    tally.check(same, std::string("from_f16 ") + isa_name(isa) + " != gguf::f16_to_f32 (or wrote past n)");
    // the quiet variant: the same but for signaling NaNs, quieted; and to_f16 never makes one
    std::vector<float> quiet(h.size() + 3, 7.0f), twin_q(h.size());
    from_f16_quiet(isa, h.data(), static_cast<int64_t>(h.size()) - 1, quiet.data());
    from_f16_quiet(Isa::scalar, h.data(), static_cast<int64_t>(h.size()), twin_q.data());
    bool q_ok = std::memcmp(quiet.data(), twin_q.data(), (h.size() - 1) * 4) == 0 && quiet[h.size() - 1] == 7.0f;
    for (size_t i = 0; i < h.size(); ++i) {
      const bool snan = (h[i] & 0x7C00) == 0x7C00 && (h[i] & 0x3FF) != 0 && (h[i] & 0x200) == 0;
      q_ok = q_ok && (snan || std::memcmp(&twin_q[i], &twin[i], 4) == 0);
    }
    tally.check(q_ok, std::string("from_f16_quiet ") + isa_name(isa) + ": not from_f16's bits but for quieted signaling NaNs");
  }
  std::vector<float> all(65536 * 2);
  std::mt19937 rng(9);
  for (auto& x : all) {
    uint32_t u = rng();
    std::memcpy(&x, &u, 4);
  }
  std::vector<uint16_t> hs(all.size());
  to_f16(Isa::scalar, all.data(), static_cast<int64_t>(all.size()), hs.data());
  bool no_snan = true;
  for (uint16_t x : hs) no_snan = no_snan && !((x & 0x7C00) == 0x7C00 && (x & 0x3FF) != 0 && (x & 0x200) == 0);
  tally.check(no_snan, "to_f16 made a signaling NaN");
}

}  // namespace
}  // namespace ggflow::cpu
