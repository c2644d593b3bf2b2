// The PagedAttention reference kernel against ScaledDotProductAttention, bit for bit: three
// sequences in one call (a prefill from 0, a decode row after 37 cached rows, a chunk of 7 after
// 10), GQA 4/2, shuffled block tables, with and without a sliding window, with and without the
// logit soft-cap (PagedAttention's optional input 13 = SDPA's logit_softcap); and the cache writes.
// With f16 caches: the rows are rounded as they are written (gguf::f32_to_f16) and the attention
// equals SDPA on the rounded K/V, bit for bit; with q8_0 caches (head size 32) the same with each
// row quantized as gguf::quantize_q8_0.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "ir/ir.h"

namespace ggflow::ir {
namespace {

constexpr int64_t Hq = 4, Hkv = 2, BS = 32;
int64_t S = 8;  // head size: 32 for q8_0 caches

struct Seq {
  int64_t past, n;
};

ElementType g_ct = ElementType::f32;  // run_case's cache type: randv rounds to it

// n values drawn and rounded as the cache holds them (q8_0: per row of S = 32, and quantizing the
// rounded values again gives them back, so the op's own rounding of K/V changes nothing)
std::vector<float> randv(std::mt19937& g, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g_ct == ElementType::f16 ? gguf::f16_to_f32(gguf::f32_to_f16(d(g))) : d(g);
  if (g_ct == ElementType::q8_0) {
    std::vector<uint8_t> b(n / 32 * 34);
    gguf::quantize_q8_0(v.data(), static_cast<int64_t>(n), b.data());
    EXPECT_TRUE(gguf::dequantize(gguf::GgmlType::Q8_0, b, n, v.data()).ok());
  }
  return v;
}
// A cache tensor of type g_ct holding x.
Tensor cache_tensor(std::vector<int64_t> shape, const std::vector<float>& x) {
  if (g_ct != ElementType::q8_0) return Tensor::from_f32(g_ct, std::move(shape), x);
  Tensor t(ElementType::q8_0, std::move(shape));
  gguf::quantize_q8_0(x.data(), static_cast<int64_t>(x.size()), t.mutable_bytes());
  return t;
}

// softcap: 0 builds the 13-input op (no input 13); else input 13 = softcap and SDPA's attribute.
// ct: the caches' type; K, V (and the garbage) are drawn already rounded to it, so SDPA sees what the cache holds.
void run_case(int64_t window, float softcap = 0.0f, ElementType ct = ElementType::f32) {
  std::mt19937 g(7 + static_cast<unsigned>(window));
  g_ct = ct;
  S = ct == ElementType::q8_0 ? 32 : 8;
  const std::vector<Seq> seqs = {{0, 5}, {37, 1}, {10, 7}};
  int64_t T = 0, nblocks = 0;
  for (auto s : seqs) T += s.n, nblocks += (s.past + s.n + BS - 1) / BS;
  const int64_t NB = nblocks + 2;  // spare blocks stay untouched
  // full per-sequence K/V [L, Hkv, S] (past rows + new rows) and Q [n, Hq, S]
  std::vector<std::vector<float>> K, V, Q;
  for (auto s : seqs) {
    K.push_back(randv(g, (s.past + s.n) * Hkv * S));
    V.push_back(randv(g, (s.past + s.n) * Hkv * S));
    Q.push_back(randv(g, s.n * Hq * S));
  }
  // block tables: a shuffled list of blocks
  std::vector<int64_t> perm(NB);
  for (int64_t i = 0; i < NB; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), g);
  std::vector<int64_t> past, sb{0}, bi, bib{0};
  std::vector<float> kc = randv(g, NB * Hkv * BS * S), vc = randv(g, NB * Hkv * BS * S);  // garbage elsewhere
  std::vector<float> q, k, v;
  int64_t next = 0, max_ctx = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    auto s = seqs[si];
    int64_t L = s.past + s.n, nb = (L + BS - 1) / BS;
    past.push_back(s.past);
    sb.push_back(sb.back() + s.n);
    for (int64_t b = 0; b < nb; ++b) bi.push_back(perm[next++]);
    bib.push_back(static_cast<int64_t>(bi.size()));
    max_ctx = std::max(max_ctx, L);
    for (int64_t p = 0; p < s.past; ++p)  // cached rows
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < S; ++d) {
          int64_t row = (bi[bib[si] + p / BS] * Hkv + h) * BS + p % BS;
          kc[row * S + d] = K[si][(p * Hkv + h) * S + d];
          vc[row * S + d] = V[si][(p * Hkv + h) * S + d];
        }
    q.insert(q.end(), Q[si].begin(), Q[si].end());
    k.insert(k.end(), K[si].begin() + s.past * Hkv * S, K[si].end());
    v.insert(v.end(), V[si].begin() + s.past * Hkv * S, V[si].end());
  }
  ops::PagedAttentionInputs in{
      ops::constant(Tensor::f32({T, Hq * S}, q)), ops::constant(Tensor::f32({T, Hkv * S}, k)),
      ops::constant(Tensor::f32({T, Hkv * S}, v)), ops::constant(cache_tensor({NB, Hkv, BS, S}, kc)),
      ops::constant(cache_tensor({NB, Hkv, BS, S}, vc)), ops::const_i32(past), ops::const_i32(sb), ops::const_i32(bi),
      ops::const_i32(bib), ops::const_i32({max_ctx}, std::vector<int64_t>{}), ops::scalar_f32(0.3f),
      ops::const_i32({window}, std::vector<int64_t>{}), ops::const_f32({}, std::vector<int64_t>{0})};
  if (softcap != 0.0f) in.logit_softcap = ops::scalar_f32(softcap);
  auto pa = ops::paged_attention(in);
  ASSERT_FALSE(pa->error()) << pa->error()->str();
  EXPECT_EQ(pa->n_inputs(), softcap != 0.0f ? 14u : 13u);
  EXPECT_EQ(pa->out_shape().str(), "[" + std::to_string(T) + "," + std::to_string(Hq * S) + "]");
  Model m({ops::result(Value(pa, 0), "out"), ops::result(Value(pa, 1), "kc"), ops::result(Value(pa, 2), "vc")}, {});
  auto r = evaluate(m, {});
  ASSERT_TRUE(static_cast<bool>(r)) << r.error().str();
  EXPECT_EQ((*r)[1].type(), ct);
  auto out = (*r)[0].to_f32(), kc2 = (*r)[1].to_f32(), vc2 = (*r)[2].to_f32();

  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t si = 0; si < seqs.size(); ++si) {
    auto s = seqs[si];
    const int64_t L = s.past + s.n;
    // SDPA on the full sequence: q [1,Hq,n,S], k, v [1,Hkv,L,S], additive mask [1,1,n,L]
    std::vector<float> qh(Hq * s.n * S), kh(Hkv * L * S), vh(Hkv * L * S), mask(s.n * L);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t d = 0; d < S; ++d) qh[(h * s.n + i) * S + d] = Q[si][(i * Hq + h) * S + d];
    for (int64_t j = 0; j < L; ++j)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < S; ++d) {
          kh[(h * L + j) * S + d] = K[si][(j * Hkv + h) * S + d];
          vh[(h * L + j) * S + d] = V[si][(j * Hkv + h) * S + d];
        }
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t j = 0; j < L; ++j) {
        int64_t p = s.past + i;
        mask[i * L + j] = j <= p && (window == 0 || p - j < window) ? 0.0f : ninf;
      }
    auto sd = ops::sdpa(ops::constant(Tensor::f32({1, Hq, s.n, S}, qh)), ops::constant(Tensor::f32({1, Hkv, L, S}, kh)),
                        ops::constant(Tensor::f32({1, Hkv, L, S}, vh)), ops::constant(Tensor::f32({1, 1, s.n, L}, mask)),
                        false, 0.3f, softcap, ct == ElementType::q8_0);  // a q8_0 cache scores in q8_0 arithmetic
    auto rs = evaluate(Model({ops::result(sd, "o")}, {}), {});
    ASSERT_TRUE(static_cast<bool>(rs)) << rs.error().str();
    auto ref = (*rs)[0].to_f32();
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t h = 0; h < Hq; ++h) {
        const float* a = out.data() + ((sb[si] + i) * Hq + h) * S;
        const float* b = ref.data() + (h * s.n + i) * S;
        EXPECT_EQ(std::memcmp(a, b, S * sizeof(float)), 0) << "seq " << si << " row " << i << " head " << h;
      }
    // every row of the sequence is now in its blocks
    for (int64_t p = 0; p < L; ++p)
      for (int64_t h = 0; h < Hkv; ++h) {
        int64_t row = (bi[bib[si] + p / BS] * Hkv + h) * BS + p % BS;
        EXPECT_EQ(std::memcmp(&kc2[row * S], &K[si][(p * Hkv + h) * S], S * sizeof(float)), 0) << "k " << si << "," << p;
        EXPECT_EQ(std::memcmp(&vc2[row * S], &V[si][(p * Hkv + h) * S], S * sizeof(float)), 0) << "v " << si << "," << p;
      }
  }
  // the spare blocks are untouched
  for (int64_t b : {perm[NB - 1], perm[NB - 2]})
    EXPECT_EQ(std::memcmp(&kc2[b * Hkv * BS * S], &kc[b * Hkv * BS * S], Hkv * BS * S * sizeof(float)), 0);
}

TEST(PagedAttentionOp, MixedBatchMatchesSdpaBitForBit) { run_case(0); }
TEST(PagedAttentionOp, SlidingWindowMatchesSdpaBitForBit) { run_case(6); }
// q.k * 0.3 of random unit vectors (S = 8) reaches ~±3: a cap of 1.5 bends most scores.
TEST(PagedAttentionOp, LogitSoftcapMatchesSdpaBitForBit) { run_case(0, 1.5f); }
TEST(PagedAttentionOp, LogitSoftcapSlidingWindowMatchesSdpaBitForBit) { run_case(6, 1.5f); }
TEST(PagedAttentionOp, HalfCachesMatchSdpaOnTheRoundedValues) {
  run_case(0, 0.0f, ElementType::f16);
  run_case(6, 1.5f, ElementType::f16);
}
TEST(PagedAttentionOp, Q8CachesMatchSdpaOnTheRoundedValues) {
  run_case(0, 0.0f, ElementType::q8_0);
  run_case(6, 1.5f, ElementType::q8_0);
  g_ct = ElementType::f32, S = 8;
}

// The soft-cap changes the result (the capped op is not silently the plain one), and a non-finite
// or non-scalar input 13 is refused.
TEST(PagedAttentionOp, LogitSoftcapIsAppliedAndChecked) {
  const int64_t T = 3;
  auto mk = [&](std::optional<Value> cap) {
    std::mt19937 r(11);
    ops::PagedAttentionInputs in{
        ops::constant(Tensor::f32({T, Hq * S}, randv(r, T * Hq * S))), ops::constant(Tensor::f32({T, Hkv * S}, randv(r, T * Hkv * S))),
        ops::constant(Tensor::f32({T, Hkv * S}, randv(r, T * Hkv * S))), ops::constant(Tensor::f32({1, Hkv, BS, S}, std::vector<float>(Hkv * BS * S))),
        ops::constant(Tensor::f32({1, Hkv, BS, S}, std::vector<float>(Hkv * BS * S))), ops::const_i32({0}), ops::const_i32({0, T}),
        ops::const_i32({0}), ops::const_i32({0, 1}), ops::const_i32({T}, std::vector<int64_t>{}), ops::scalar_f32(1.0f),
        ops::const_i32({0}, std::vector<int64_t>{}), ops::const_f32({}, std::vector<int64_t>{0}), cap};
    return ops::paged_attention(in);
  };
  auto eval_out = [](const NodePtr& pa) { return evaluate(Model({ops::result(Value(pa, 0), "out")}, {}), {}); };
  auto plain = eval_out(mk(std::nullopt)), zero = eval_out(mk(ops::scalar_f32(0.0f))), capped = eval_out(mk(ops::scalar_f32(1.0f)));
  ASSERT_TRUE(plain && zero && capped);
  EXPECT_EQ(std::memcmp((*plain)[0].bytes(), (*zero)[0].bytes(), (*plain)[0].nbytes()), 0) << "input 13 = 0 is off";
  EXPECT_NE(std::memcmp((*plain)[0].bytes(), (*capped)[0].bytes(), (*plain)[0].nbytes()), 0) << "the cap is applied";
  auto not_scalar = mk(ops::const_f32({1.0f, 2.0f}, std::vector<int64_t>{2}));
  ASSERT_TRUE(not_scalar->error());
  EXPECT_NE(not_scalar->error()->what.find("logit_softcap"), std::string::npos) << not_scalar->error()->what;
  auto inf = eval_out(mk(ops::scalar_f32(std::numeric_limits<float>::infinity())));
  ASSERT_FALSE(static_cast<bool>(inf));
  EXPECT_NE(inf.error().what.find("logit_softcap"), std::string::npos) << inf.error().what;
}

TEST(PagedAttentionOp, RefusesBadInputs) {
  auto q = ops::parameter(ElementType::f32, {Symbol::named("T"), Symbol::named("W")}, "q");
  auto k = ops::parameter(ElementType::f32, {Symbol::named("T"), Hkv * S}, "k");
  auto kc = ops::parameter(ElementType::f32, {Symbol::named("NB"), Hkv, BS, S}, "kc");
  auto i = ops::parameter(ElementType::i32, {Symbol::named("B")}, "i");
  auto sc = ops::parameter(ElementType::i32, Shape{}, "s");
  auto pa = ops::paged_attention({q, k, k, kc, kc, i, i, i, i, sc, ops::scalar_f32(0), sc, ops::const_f32({}, std::vector<int64_t>{0})});
  ASSERT_TRUE(pa->error());
  EXPECT_NE(pa->error()->what.find("static width"), std::string::npos) << pa->error()->what;
}

}  // namespace
}  // namespace ggflow::ir
