// Gemma 2's attention logit soft-cap through every layout: a tiny one-layer model built as the
// builder builds its graphs (GgmlGraph -> frontend::translate), whose attention is FLASH_ATTN_EXT
// with logit_softcap != 0. The same steps (a 37-token prompt, crossing a 32-token KV block, then
// two decode tokens) run in the raw, SDPA and PagedAttention layouts:
//  - on the CPU executor (its own attention kernel, no fallback), every ISA this machine has: the
//    last-row logits of every step are identical bit for bit (memcmp) across layouts and ISAs;
//  - on the reference evaluator: identical across layouts too, and within 1e-5 (relative to the
//    largest logit) of the CPU executor's;
//  - the cap is wired end to end: the SDPA carries it, PagedAttention gets it as input 13, and
//    the logits differ from the same model without it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "cpu/isa.h"
#include "frontend/translate.h"
#include "runtime/compiled_model.h"
#include "runtime/paged_runner.h"
#include "transforms/layouts.h"

namespace ggflow::transforms {
namespace {

using frontend::GgmlGraph;
using frontend::GgmlType;
using runtime::CompileOptions;
using runtime::Executor;

constexpr int64_t kV = 48, kE = 64, kH = 4, kHkv = 2, kD = 16, kEkv = kHkv * kD;
constexpr float kSoftcap = 3.0f;  // q.k / sqrt(D) reaches ~±8 here: most scores are bent

// The steps every layout runs: a prompt of 37 tokens, then 2 decode tokens.
std::vector<std::vector<int32_t>> steps() {
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 37; ++i) prompt.push_back((i * 7 + 3) % kV);
  return {prompt, {5}, {41}};
}

// f32 weight [rows, cols] (GGML ne {cols, rows}) of N(0, sd), kept alive by the graph.
int weight(GgmlGraph& g, std::mt19937& rng, const std::string& name, int64_t cols, int64_t rows, float sd) {
  auto w = std::make_shared<std::vector<float>>(cols * rows);
  std::normal_distribution<float> nd(0.0f, sd);
  for (float& f : *w) f = nd(rng);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(w->data()), w->size() * sizeof(float));
  return g.weight(name, GgmlType::F32, {cols, rows, 1, 1}, rows > 1 ? 2 : 1, bytes, w);
}

// The raw-layout model (the builder's contract, builder/build.h): embedding, Q/K/V, RoPE, SET_ROWS
// caches, FLASH_ATTN_EXT(scale 1/sqrt(D), logit_softcap), output projection, the inp_out_ids rows,
// residual, RMS-normed LM head.
Result<ir::Model> tiny_model(float softcap) {
  GgmlGraph g;
  std::mt19937 rng(2024);
  const auto T = g.symbol("T"), KV = g.symbol("KV"), O = g.symbol("O");
  int tokens = g.input("inp_tokens", GgmlType::I32, {T, 1, 1, 1});
  int pos = g.input("inp_pos", GgmlType::I32, {T, 1, 1, 1});
  int out_ids = g.input("inp_out_ids", GgmlType::I32, {O, 1, 1, 1});
  int kv_idxs = g.input("self_kv_idxs", GgmlType::I64, {T, 1, 1, 1});
  int mask = g.input("self_kq_mask", GgmlType::F32, {KV, T, 1, 1});
  int embd = weight(g, rng, "token_embd.weight", kE, kV, 1.0f);
  int x = g.get_rows(embd, tokens);                                          // f32 [E, T]
  g.set_name(x, "inp_embd");
  const float wsd = 2.0f / std::sqrt(static_cast<float>(kE));
  int wq = weight(g, rng, "blk.0.attn_q.weight", kE, kH * kD, wsd), wk = weight(g, rng, "blk.0.attn_k.weight", kE, kEkv, wsd);
  int wv = weight(g, rng, "blk.0.attn_v.weight", kE, kEkv, wsd), wo = weight(g, rng, "blk.0.attn_output.weight", kH * kD, kE, wsd);
  int q = g.reshape(g.mul_mat(wq, x), {kD, kH, T, 1});                       // [D, H, T]
  int k = g.reshape(g.mul_mat(wk, x), {kD, kHkv, T, 1});                     // [D, Hkv, T]
  int v = g.mul_mat(wv, x);                                                  // [Ekv, T]
  frontend::RopeParams rp;
  rp.n_dims = static_cast<int>(kD);
  rp.n_ctx_orig = 128;
  q = g.rope(q, pos, std::nullopt, rp);
  k = g.rope(k, pos, std::nullopt, rp);
  g.set_name(q, "Qcur-0");
  g.set_name(k, "Kcur-0");
  int ck = g.input("cache_k_l0", GgmlType::F32, {kEkv, KV, 1, 1});
  int cv = g.input("cache_v_l0", GgmlType::F32, {kEkv, KV, 1, 1});
  ck = g.set_rows(ck, g.reshape(k, {kEkv, T, 1, 1}), kv_idxs);               // [Ekv, KV]
  cv = g.set_rows(cv, v, kv_idxs);
  g.add_output("cache_k_l0_out", ck);
  g.add_output("cache_v_l0_out", cv);
  int K = g.permute(g.reshape(ck, {kD, kHkv, KV, 1}), 0, 2, 1, 3);           // [D, KV, Hkv]
  int V = g.permute(g.reshape(cv, {kD, kHkv, KV, 1}), 0, 2, 1, 3);
  int Q = g.permute(q, 0, 2, 1, 3);                                          // [D, T, H]
  int o = g.flash_attn_ext(Q, K, V, mask, 1.0f / std::sqrt(static_cast<float>(kD)), 0.0f, softcap);  // [D, H, T]
  o = g.mul_mat(wo, g.reshape(o, {kH * kD, T, 1, 1}));                       // [E, T]
  x = g.add(g.get_rows(o, out_ids), g.get_rows(x, out_ids));                 // [E, O]
  int onorm = weight(g, rng, "output_norm.weight", kE, 1, 1.0f);
  int out = weight(g, rng, "output.weight", kE, kV, wsd);
  g.add_output("logits", g.mul_mat(out, g.mul(g.rms_norm(x, 1e-5f), onorm)));  // [V, O]
  return frontend::translate(g);
}

using Rows = std::vector<float>;  // the last row's logits of every step, concatenated

// The CPU executor ran attention on its own kernel (cpu/kernels/attention.h), not the IR fallback.
Status native_attention(const runtime::CompiledModel& cm) {
  if (cm.executor() == Executor::cpu && cm.fallback_summary().find("Attention") != std::string::npos)
    return make_error("attention fell back to the reference kernel: " + cm.fallback_summary());
  return {};
}

Result<Rows> run_raw(ir::Model m, const CompileOptions& opt) {
  auto cm = runtime::compile(std::move(m), opt);
  if (!cm) return cm.error();
  size_t tok = 0, pos = 0, out_ids = 0, kv = 0, mask = 0;
  if (auto s = (*cm)->bind_inputs({{&tok, "inp_tokens"}, {&pos, "inp_pos"}, {&out_ids, "inp_out_ids"},
                                   {&kv, "self_kv_idxs"}, {&mask, "self_kq_mask"}});
      !s)
    return s.error();
  auto lo = (*cm)->output("logits");
  if (!lo) return lo.error();
  if (auto s = (*cm)->resize_caches(64); !s) return s.error();
  std::vector<ir::Tensor> in((*cm)->n_inputs());
  Rows rows;
  int64_t P = 0;
  for (const auto& step : steps()) {
    const int64_t T = static_cast<int64_t>(step.size()), KV = P + T;
    std::vector<int64_t> ids(step.begin(), step.end()), p(T);
    for (int64_t i = 0; i < T; ++i) p[i] = P + i;
    std::vector<float> m(T * KV);                                             // f32 [1, 1, T, KV]
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < KV; ++j) m[i * KV + j] = j <= P + i ? 0.0f : -INFINITY;
    in[tok] = ir::Tensor::i32({1, 1, 1, T}, ids);
    in[pos] = ir::Tensor::i32({1, 1, 1, T}, p);
    in[out_ids] = ir::Tensor::i32({1, 1, 1, 1}, {T - 1});
    in[kv] = ir::Tensor::i64({1, 1, 1, T}, p);
    in[mask] = ir::Tensor::f32({1, 1, T, KV}, std::move(m));
    if (auto s = (*cm)->run(in, KV); !s) return s.error();
    const ir::Tensor& l = (*cm)->output(*lo);                                 // f32 [1, 1, 1, V]
    rows.insert(rows.end(), l.data<float>(), l.data<float>() + l.numel());
    P = KV;
    if (auto s = native_attention(**cm); !s) return s.error();
  }
  return rows;
}

Result<Rows> run_sdpa(ir::Model m, const CompileOptions& opt) {
  auto cm = runtime::compile(std::move(m), opt);
  if (!cm) return cm.error();
  size_t ids = 0, mask = 0, pos = 0, beam = 0;
  if (auto s = (*cm)->bind_inputs({{&ids, "input_ids"}, {&mask, "attention_mask"}, {&pos, "position_ids"}, {&beam, "beam_idx"}}); !s)
    return s.error();
  auto lo = (*cm)->output("logits");
  if (!lo) return lo.error();
  std::vector<ir::Tensor> in((*cm)->n_inputs());
  Rows rows;
  int64_t P = 0;
  for (const auto& step : steps()) {
    const int64_t T = static_cast<int64_t>(step.size());
    std::vector<int64_t> p(T);
    for (int64_t i = 0; i < T; ++i) p[i] = P + i;
    in[ids] = ir::Tensor::i64({1, T}, std::vector<int64_t>(step.begin(), step.end()));  // i64 [1, T]
    in[mask] = ir::Tensor::i64({1, P + T}, std::vector<int64_t>(P + T, 1));            // i64 [1, P+T]
    in[pos] = ir::Tensor::i64({1, T}, p);                                               // i64 [1, T]
    in[beam] = ir::Tensor::i32({1}, {0});                                               // i32 [1]
    if (auto s = (*cm)->run(in); !s) return s.error();
    const ir::Tensor& l = (*cm)->output(*lo);                                           // f32 [1, 1, V]
    rows.insert(rows.end(), l.data<float>(), l.data<float>() + l.numel());
    P += T;
    if (auto s = native_attention(**cm); !s) return s.error();
  }
  return rows;
}

Result<Rows> run_paged(ir::Model m, const CompileOptions& opt) {
  auto r = runtime::PagedRunner::from_model(std::move(m), kV, 4, opt);
  if (!r) return r.error();
  const int seq = (*r)->add_sequence();
  Rows rows;
  for (const auto& step : steps()) {
    auto l = (*r)->step({{seq, step}});
    if (!l) return l.error();
    rows.insert(rows.end(), l->row(0).begin(), l->row(0).end());
    if (auto s = native_attention((*r)->compiled()); !s) return s.error();
  }
  return rows;
}

// The raw model converted to `layout` and run with `opt`.
Result<Rows> run_layout(const ir::Model& raw, Layout layout, const CompileOptions& opt) {
  auto m = raw.clone();
  if (!m) return m.error();
  if (layout != Layout::raw)
    if (auto s = to_layout(*m, layout, {}); !s) return s.error();
  switch (layout) {
    case Layout::raw: return run_raw(std::move(*m), opt);
    case Layout::sdpa: return run_sdpa(std::move(*m), opt);
    case Layout::paged: return run_paged(std::move(*m), opt);
  }
  return make_error("unknown layout");
}

// The CPU executor with the instruction set forced (read when the plan is compiled).
Result<Rows> run_cpu(const ir::Model& raw, Layout layout, cpu::Isa isa) {
  ::setenv("GGFLOW_ISA", std::string(cpu::to_string(isa)).c_str(), 1);
  CompileOptions o;
  o.threads = 2;
  auto r = run_layout(raw, layout, o);
  ::unsetenv("GGFLOW_ISA");
  return r;
}

bool same_bits(const Rows& a, const Rows& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string name(Layout l, const std::string& exec) { return std::string(to_string(l)) + "/" + exec; }

TEST(LayoutsSoftcap, CarriedIntoEveryLayout) {
  auto raw = tiny_model(kSoftcap);
  ASSERT_TRUE(raw) << raw.error().str();
  for (Layout l : {Layout::raw, Layout::sdpa, Layout::paged}) {
    auto m = raw->clone();
    ASSERT_TRUE(m) << m.error().str();
    if (l != Layout::raw) {
      auto s = to_layout(*m, l, {});
      ASSERT_TRUE(s.ok()) << s.error().str();
    }
    auto order = m->ordered();
    ASSERT_TRUE(order);
    int attention = 0;
    for (const auto& n : *order) {
      if (n->type() == ir::OpType::ScaledDotProductAttention) {
        ++attention;
        EXPECT_EQ(n->attrs<ir::SdpaAttrs>().logit_softcap, kSoftcap) << to_string(l);
      }
      if (n->type() == ir::OpType::PagedAttention) {
        ++attention;
        ASSERT_EQ(n->n_inputs(), 14u) << "input 13 carries the soft-cap";
        const ir::Node& c = *n->input(13).node;
        ASSERT_EQ(c.type(), ir::OpType::Constant);
        EXPECT_EQ(c.attrs<ir::ConstantAttrs>().value.to_f32(), std::vector<float>{kSoftcap});
      }
    }
    EXPECT_EQ(attention, 1) << to_string(l);
  }
}

TEST(LayoutsSoftcap, RawSdpaPagedIdenticalOnEveryIsaAndCloseToReference) {
  auto raw = tiny_model(kSoftcap);
  ASSERT_TRUE(raw) << raw.error().str();
  const Layout layouts[] = {Layout::raw, Layout::sdpa, Layout::paged};
  // CPU executor: every layout on every ISA equals the first run bit for bit
  Rows cpu_ref;
  std::string first;
  for (cpu::Isa isa : cpu::supported_isas())
    for (Layout l : layouts) {
      const std::string what = name(l, std::string("cpu/") + std::string(cpu::to_string(isa)));
      auto r = run_cpu(*raw, l, isa);
      ASSERT_TRUE(r) << what << ": " << r.error().str();
      ASSERT_EQ(r->size(), static_cast<size_t>(3 * kV)) << what;
      if (cpu_ref.empty()) {
        cpu_ref = *r, first = what;
        continue;
      }
      EXPECT_TRUE(same_bits(*r, cpu_ref)) << what << " differs from " << first;
    }
  // reference evaluator: the layouts agree bit for bit, and the CPU executor is close to it
  CompileOptions ref_opt;
  ref_opt.executor = Executor::ref;
  Rows ref;
  for (Layout l : layouts) {
    auto r = run_layout(*raw, l, ref_opt);
    ASSERT_TRUE(r) << name(l, "ref") << ": " << r.error().str();
    if (ref.empty()) {
      ref = *r;
      continue;
    }
    EXPECT_TRUE(same_bits(*r, ref)) << name(l, "ref") << " differs from raw/ref";
  }
  double amax = 0, err = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    amax = std::max(amax, std::fabs(static_cast<double>(ref[i]))), err = std::max(err, std::fabs(static_cast<double>(cpu_ref[i]) - ref[i]));
  EXPECT_LE(err, 1e-5 * amax) << "CPU executor vs reference evaluator, max |logit| " << amax;
  std::printf("  soft-capped layouts: max |cpu - ref| = %.3g (max |logit| %.3g)\n", err, amax);
  // the cap is applied: the model without it gives other logits
  auto plain = tiny_model(0.0f);
  ASSERT_TRUE(plain) << plain.error().str();
  auto p = run_cpu(*plain, Layout::paged, cpu::best_isa());
  ASSERT_TRUE(p) << p.error().str();
  EXPECT_FALSE(same_bits(*p, cpu_ref)) << "softcap " << kSoftcap << " changed nothing";
}

}  // namespace
}  // namespace ggflow::transforms
