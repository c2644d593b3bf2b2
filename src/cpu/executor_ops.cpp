// The executor's native kernels: each binds one IR op to the SIMD kernels of cpu/kernels when the
// inputs at hand fit (dense f32 activations, constant weights, ...), and otherwise says so
// (*done = false) so the step runs on the reference kernel. Work is split over outputs only.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "cpu/executor_impl.h"
#include "cpu/kernels/act.h"
#include "cpu/kernels/attention.h"
#include "cpu/kernels/elementwise.h"
#include "cpu/kernels/get_rows.h"
#include "cpu/kernels/matmul.h"
#include "cpu/kernels/matmul_packed.h"
#include "cpu/kernels/norm.h"
#include "cpu/kernels/quant_act.h"
#include "cpu/kernels/rope.h"
#include "cpu/kernels/side_prefetch.h"
#include "ir/attrs.h"

namespace ggflow::cpu {

namespace {
using ir::ElementType;

// Rows per part for a cheap row-wise kernel (a few operations per element: norms, adds, RoPE, cache
// writes) on rows of n elements: a part of fewer elements than this costs more to hand to another
// core (the wake-up, and the rows moving between the cores' caches) than to compute where the
// rows are (a decode batch's 8 tokens run on the calling thread; prefill chunks still split).
int64_t cheap_grain(int64_t n) {
  constexpr int64_t kMinPartElems = 8192;
  return std::max<int64_t>(4, (kMinPartElems + std::max<int64_t>(1, n) - 1) / std::max<int64_t>(1, n));
}

// Integer values (i32/i64, dense) into int32s, checked to fit.
Status to_i32(const Val& v, int32_t* dst, const ir::Node& n) {
  if (!ir::is_integer(v.type) || !v.contiguous()) return make_error(n.describe() + ": expected a dense integer input");
  const size_t es = ir::scalar_size(v.type);
  for (int64_t i = 0, e = v.numel(); i < e; ++i) {
    const int64_t x = ir::load_i64(v.type, v.data + i * es);
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      return make_error(n.describe() + ": index " + std::to_string(x) + " does not fit 32 bits");
    dst[i] = static_cast<int32_t>(x);
  }
  return {};
}

float scalar_f32(const Val& v) { return ir::load_f32(v.type, v.data); }
int64_t scalar_i64(const Val& v) { return ir::load_i64(v.type, v.data); }

// The first error of a parallel kernel.
struct FirstError {
  std::atomic<bool> set{false};
  Status status;
  void note(Status s) {
    if (!s && !set.exchange(true)) status = std::move(s);
  }
};
}  // namespace

Status Executor::Impl::quantize_rows(const Step& s, const float* x, int64_t T, const void** X, size_t* xrb) {
  const int64_t K = s.K;
  *X = x;
  *xrb = static_cast<size_t>(K) * sizeof(float);
  if (act_format(s.wtype) == ActFormat::f32) return {};
  *xrb = quant_act_row_bytes(s.wtype, K);  // activations quantized per token, once
  const size_t rb = *xrb;
  if (s.prequant_run == run_count) {  // by the GLU or RMSNorm that wrote x (Step::quant_for): the same rows
    *X = pqbuf.owner.get();
    return {};
  }
  uint8_t* q = qbuf.ensure(std::max<size_t>(1, static_cast<size_t>(T) * rb));
  FirstError err;
  auto quant = [&](int64_t b, int64_t e, int) { err.note(quantize_act_rows(isa, s.wtype, x + b * K, K, e - b, K, q + b * rb, rb)); };
  if (T >= 16) pool->parallel_for(T, 4, quant);
  else quant(0, T, 0);
  if (err.set) return make_error(s.node->describe() + ": " + err.status.error().what);
  *X = q;
  return {};
}

// quant_act.h: a row's bytes do not depend on the other rows, so who quantizes which rows changes
// nothing; the job (quantize_rows) finds them in pqbuf when prequant_run is this run.
template <class F>
Status Executor::Impl::write_rows(const Step& s, int64_t rows, int64_t grain, int64_t n, float* y, F kernel) {
  Step* m = s.quant_for >= 0 ? &steps[static_cast<size_t>(s.quant_for)] : nullptr;
  if (m && m->K != n) m = nullptr;  // the plan said so; the shapes at run time do not
  const size_t rb = m ? quant_act_row_bytes(m->wtype, n) : 0;
  uint8_t* q = m ? pqbuf.ensure(std::max<size_t>(1, static_cast<size_t>(rows) * rb)) : nullptr;
  FirstError err;
  pool->parallel_for(rows, grain, [&](int64_t b, int64_t e, int) {
    kernel(b, e);
    if (m) err.note(quantize_act_rows(isa, m->wtype, y + b * n, n, e - b, n, q + static_cast<size_t>(b) * rb, rb));
  });
  if (err.set) return make_error(s.node->describe() + ": " + err.status.error().what);
  if (m) m->prequant_run = run_count;
  return {};
}

Status Executor::Impl::matmul(Step& s, bool* done) {
  if (s.group >= 0) {
    MatmulGroup& g = groups[static_cast<size_t>(s.group)];
    if (g.steps.front() == static_cast<uint32_t>(&s - steps.data())) return matmul_group(g, done);
    if (g.ran == run_count) return {};  // computed with the group's first step
  }
  const Val& a0 = in(s, 0);
  if (a0.type != ElementType::f32 || a0.rank < 1 || a0.dim(-1) != s.K) return *done = false, Status{};
  Val tmp;
  const Val& a = dense(a0, scratch, tmp);
  const int64_t K = s.K, N = s.N, T = a.numel() / K;
  int64_t shape[exec::kMaxRank];
  for (int i = 0; i + 1 < a.rank; ++i) shape[i] = a.shape[i];
  shape[a.rank - 1] = N;
  Val& y = alloc_out(s, std::span<const int64_t>(shape, static_cast<size_t>(a.rank)));
  const void* X = nullptr;
  size_t xrb = 0;
  if (auto st = quantize_rows(s, a.as<const float>(), T, &X, &xrb); !st) return st;
  float* C = y.as<float>();
  // A fused Add (Step::add_in): each thread adds r to the columns it wrote.
  int64_t rs = 0;
  const float* R = epilogue_addend(s, y, &rs);
  auto add_residual = [&](int64_t b, int64_t e) {
    if (R) cpu::binary(isa, Binary::add, C + b, N, R + b, rs, C + b, N, e - b, 0, T);
  };
  if (s.packed) {  // row ranges in multiples of kPackRows (the pool's grain), as matmul_packed needs
    const uint8_t* P = s.packed->data;
    if (auto st = cpu::matmul_packed(isa, s.wtype, P, N, K, X, xrb, T, C, N, 0, 0); !st)
      return make_error(s.node->describe() + ": " + st.error().what, st.error().hint);
    pool->parallel_for(N, kPackRows, [&](int64_t b, int64_t e, int t) {
      (void)cpu::matmul_packed(isa, s.wtype, P, N, K, X, xrb, T, C, N, b, e);  // validated above
      add_residual(b, e);
      queue_next_weights(s, t);
    });
  } else {
    if (auto st = cpu::matmul(isa, s.wtype, s.weight, s.w_row_bytes, K, X, xrb, T, C, N, 0, 0); !st)
      return make_error(s.node->describe() + ": " + st.error().what, st.error().hint);
    pool->parallel_for(N, 16, [&](int64_t b, int64_t e, int) {
      (void)cpu::matmul(isa, s.wtype, s.weight, s.w_row_bytes, K, X, xrb, T, C, N, b, e);  // validated above
      add_residual(b, e);
    });
  }
  if (R) s.added_run = run_count;
  return {};
}

const float* Executor::Impl::epilogue_addend(const Step& s, const Val& y, int64_t* stride) {
  if (s.add_in < 0) return nullptr;
  const Val& r = vals[static_cast<size_t>(s.add_in)];
  if (r.type != ElementType::f32 || !r.contiguous() || r.rank < 1 || y.rank < 1 || r.dim(-1) != y.dim(-1)) return nullptr;
  if (s.add_row) {  // one row [.., N], every dim but the last 1
    *stride = 0;
    return r.numel() == y.dim(-1) ? r.as<const float>() : nullptr;
  }
  bool same = r.rank == y.rank;  // [T, N] like y
  for (int i = 0; same && i < r.rank; ++i) same = r.shape[i] == y.shape[i];
  *stride = y.dim(-1);
  return same ? r.as<const float>() : nullptr;
}

void Executor::Impl::queue_next_weights(const Step& s, int thread) {
  if (s.next_job < 0) return;
  const Step& lead = steps[static_cast<size_t>(s.next_job)];
  uint32_t single = static_cast<uint32_t>(s.next_job);
  std::span<const uint32_t> members(&single, 1);
  if (lead.group >= 0) members = groups[static_cast<size_t>(lead.group)].steps;
  int64_t rows = 0;
  for (uint32_t m : members) rows += steps[m].N;
  int64_t b, e;
  ThreadPool::part_of(rows, lead.group >= 0 ? groups[static_cast<size_t>(lead.group)].grain : kPackRows, pool->size(),
                      thread, &b, &e);
  SidePrefetch& q = weight_prefetch();
  q.clear();
  for (int64_t first = 0; uint32_t m : members) {
    const Step& ms = steps[m];
    const int64_t lo = std::max(b, first), hi = std::min(e, first + ms.N);
    if (lo < hi) {  // jobs are packed matmuls (compile links only those)
      const size_t gb = packed_bytes(ms.wtype, kPackRows, ms.K);  // one group of 16 rows
      const size_t g0 = static_cast<size_t>((lo - first) / kPackRows), g1 = static_cast<size_t>((hi - first + kPackRows - 1) / kPackRows);
      q.add(ms.packed->data + g0 * gb, static_cast<int64_t>((g1 - g0) * gb));
    }
    first += ms.N;
  }
}

Status Executor::Impl::matmul_group(MatmulGroup& g, bool* done) {
  Step& lead = steps[g.steps.front()];
  const Val& a0 = in(lead, 0);
  if (a0.type != ElementType::f32 || a0.rank < 1 || a0.dim(-1) != lead.K) return *done = false, Status{};
  Val tmp;
  const Val& a = dense(a0, scratch, tmp);
  const int64_t K = lead.K, T = a.numel() / K;
  const void* X = nullptr;
  size_t xrb = 0;
  if (auto st = quantize_rows(lead, a.as<const float>(), T, &X, &xrb); !st) return st;
  // Every member's output, then one split of all their rows (members' N are multiples of 16).
  float* C[MatmulGroup::kMaxSteps];
  const float* R[MatmulGroup::kMaxSteps];
  int64_t rs[MatmulGroup::kMaxSteps], first_row[MatmulGroup::kMaxSteps + 1] = {0};
  const size_t nm = g.steps.size();
  for (size_t j = 0; j < nm; ++j) {
    const Step& s = steps[g.steps[j]];
    int64_t shape[exec::kMaxRank];
    for (int i = 0; i + 1 < a.rank; ++i) shape[i] = a.shape[i];
    shape[a.rank - 1] = s.N;
    const Val& y = alloc_out(s, std::span<const int64_t>(shape, static_cast<size_t>(a.rank)));
    C[j] = y.as<float>();
    R[j] = epilogue_addend(s, y, &rs[j]);  // a fused Add (bias or residual): each thread adds it to the columns it wrote
    first_row[j + 1] = first_row[j] + s.N;
    if (auto st = cpu::matmul_packed(isa, s.wtype, s.packed->data, s.N, K, X, xrb, T, C[j], s.N, 0, 0); !st)
      return make_error(s.node->describe() + ": " + st.error().what, st.error().hint);
  }
  // Members rotating their rows in the epilogue (Step::rope), after their bias: the RoPE's parameters
  // and this run's tables; a member whose values at hand do not fit leaves its RoPE step to run itself.
  struct Rotation {
    RopeParams rp;
    const float* tables = nullptr;
    int64_t S = 0, nd = 0;
  } rot[MatmulGroup::kMaxSteps];
  for (size_t j = 0; j < nm; ++j) {
    const Step& s = steps[g.steps[j]];
    if (s.rope < 0) continue;
    const Step& r = steps[static_cast<size_t>(s.rope)];
    const Val& p = vals[static_cast<size_t>(s.rope_pos)];
    const ir::Shape& xs = r.node->input(0).shape();
    // static, and N and the member's first row multiples of it, the grain too (fuse_ropes)
    const int64_t S = xs[xs.rank() - 1].value();
    if ((s.add_in >= 0 && !R[j]) || !ir::is_integer(p.type) || !p.contiguous() || p.numel() != T ||
        !rope_params(r, S, &rot[j].rp))
      continue;
    auto tables = find_rope_tables(r, rot[j].rp, S, p, T);
    if (!tables) return tables.error();
    rot[j].tables = *tables, rot[j].S = S, rot[j].nd = rope_dims(rot[j].rp, S);
  }
  pool->parallel_for(first_row[nm], g.grain, [&](int64_t b, int64_t e, int t) {
    for (size_t j = 0; j < nm; ++j) {
      const int64_t lo = std::max(b, first_row[j]), hi = std::min(e, first_row[j + 1]);
      if (lo >= hi) continue;
      const Step& s = steps[g.steps[j]];
      const int64_t n0 = lo - first_row[j], n1 = hi - first_row[j];
      (void)cpu::matmul_packed(isa, s.wtype, s.packed->data, s.N, K, X, xrb, T, C[j], s.N, n0, n1);  // validated above
      if (R[j]) cpu::binary(isa, Binary::add, C[j] + n0, s.N, R[j] + n0, rs[j], C[j] + n0, s.N, n1 - n0, 0, T);
      if (const Rotation& rt = rot[j]; rt.tables)  // whole heads: the grain is a multiple of S
        for (int64_t i = 0; i < T; ++i) {
          float* y = C[j] + i * s.N + n0;
          rope_apply(isa, rt.rp, rt.S, rt.tables + i * 2 * rt.nd, y, y, (n1 - n0) / rt.S);
        }
    }
    queue_next_weights(lead, t);
  });
  for (size_t j = 0; j < nm; ++j) {
    if (R[j]) steps[g.steps[j]].added_run = run_count;
    if (rot[j].tables) steps[g.steps[j]].roped_run = run_count;
  }
  g.ran = run_count;
  return {};
}

Status Executor::Impl::rmsnorm(Step& s, bool* done) {
  const Val& x0 = in(s, 0);
  if (x0.type != ElementType::f32 || x0.rank < 1) return *done = false, Status{};
  const float* gamma = nullptr;
  const int64_t H = x0.dim(-1);
  if (s.in.size() == 2) {
    const Val& g = in(s, 1);
    if (g.type != ElementType::f32 || !g.contiguous() || g.numel() != H) return *done = false, Status{};
    gamma = g.as<const float>();
  }
  Val tmp;
  const Val& x = dense(x0, scratch, tmp);
  const float eps = s.node->attrs<ir::RMSNormAttrs>().eps;
  const int64_t rows = H ? x.numel() / H : 0;
  const float* xp = x.as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(x.shape, static_cast<size_t>(x.rank)));
  float* yp = y.as<float>();
  return write_rows(s, rows, cheap_grain(H), H, yp,
                    [&](int64_t b, int64_t e) { cpu::rmsnorm(isa, xp, H, gamma, eps, yp, H, H, b, e); });
}

Status Executor::Impl::layernorm(Step& s, bool* done) {
  const Val& x0 = in(s, 0);
  if (x0.type != ElementType::f32 || x0.rank < 1) return *done = false, Status{};
  const int64_t H = x0.dim(-1);
  Val tmp;
  const Val& x = dense(x0, scratch, tmp);
  const float eps = s.node->attrs<ir::LayerNormAttrs>().eps;
  const int64_t rows = H ? x.numel() / H : 0;
  const float* xp = x.as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(x.shape, static_cast<size_t>(x.rank)));
  float* yp = y.as<float>();
  return write_rows(s, rows, cheap_grain(H), H, yp,
                    [&](int64_t b, int64_t e) { cpu::layernorm(isa, xp, H, eps, yp, H, H, b, e); });
}

Status Executor::Impl::binary(Step& s, bool* done) {
  if (s.add_by >= 0 && steps[static_cast<size_t>(s.add_by)].added_run == run_count) {  // done in the matmul's epilogue
    Val v = vals[steps[static_cast<size_t>(s.add_by)].out];
    out(s) = std::move(v);
    return {};
  }
  const Val* a = &in(s, 0);
  const Val* b = &in(s, 1);
  if (a->type != ElementType::f32 || b->type != ElementType::f32 || !a->contiguous() || !b->contiguous())
    return *done = false, Status{};
  const Binary op = s.node->type() == ir::OpType::Add ? Binary::add : Binary::mul;
  auto same_shape = [](const Val& p, const Val& q) {
    if (p.rank != q.rank) return false;
    for (int i = 0; i < p.rank; ++i)
      if (p.shape[i] != q.shape[i]) return false;
    return true;
  };
  // b is one row [.., H] broadcast over a's rows: every dim of b but the last is 1, rank <= a's.
  auto row_of = [](const Val& p, const Val& q) {
    if (q.rank > p.rank || q.rank == 0 || p.rank == 0 || q.dim(-1) != p.dim(-1)) return false;
    for (int i = 0; i + 1 < q.rank; ++i)
      if (q.shape[i] != 1) return false;
    return true;
  };
  int64_t n = 0, bs = 0;
  if (a->numel() == 1 && b->numel() > 1) std::swap(a, b);  // add and mul commute exactly
  if (b->numel() == 1 && b->rank <= a->rank && a->rank > 0) {  // a scalar: broadcast as a row of it
    n = a->dim(-1);
    float* row = reinterpret_cast<float*>(ibuf.ensure(static_cast<size_t>(std::max<int64_t>(n, 1)) * 4));
    std::fill(row, row + n, *b->as<const float>());
    const int64_t rows = n ? a->numel() / n : 0;
    const float* ap = a->as<const float>();
    Val& y = alloc_out(s, std::span<const int64_t>(a->shape, static_cast<size_t>(a->rank)));
    float* yp = y.as<float>();
    pool->parallel_for(rows, cheap_grain(n), [&](int64_t r0, int64_t r1, int) { cpu::binary(isa, op, ap, n, row, 0, yp, n, n, r0, r1); });
    return {};
  }
  if (same_shape(*a, *b)) {
    n = a->rank ? a->dim(-1) : 1;
    bs = n;
  } else if (row_of(*a, *b)) {
    n = a->dim(-1);
  } else if (row_of(*b, *a)) {  // add and mul commute exactly
    std::swap(a, b);
    n = a->dim(-1);
  } else {
    return *done = false, Status{};
  }
  const int64_t rows = n ? a->numel() / n : 0;
  const float* ap = a->as<const float>();
  const float* bp = b->as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(a->shape, static_cast<size_t>(a->rank)));
  float* yp = y.as<float>();
  pool->parallel_for(rows, cheap_grain(n), [&](int64_t r0, int64_t r1, int) { cpu::binary(isa, op, ap, n, bp, bs, yp, n, n, r0, r1); });
  return {};
}

Status Executor::Impl::activation(Step& s, bool* done) {
  const Val& x0 = in(s, 0);
  if (x0.type != ElementType::f32 || x0.rank < 1) return *done = false, Status{};
  const Act act = activation_of(*s.node);
  Val tmp;
  const Val& x = dense(x0, scratch, tmp);
  const int64_t n = x.dim(-1), rows = n ? x.numel() / n : 0;
  const float* xp = x.as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(x.shape, static_cast<size_t>(x.rank)));
  float* yp = y.as<float>();
  pool->parallel_for(rows, 4, [&](int64_t b, int64_t e, int) { cpu::activation(isa, act, xp, n, yp, n, n, b, e); });
  return {};
}

Status Executor::Impl::glu(Step& s) {
  Val tg, tu;
  const Val& g = dense(in(s, 0), scratch, tg);
  const Val& u = dense(in(s, 1), qbuf, tu);
  if (g.type != ElementType::f32 || u.type != ElementType::f32 || g.numel() != u.numel() || g.rank < 1)
    return make_error(s.node->describe() + ": the fused activation and its multiplier do not match");
  const int64_t n = g.dim(-1), rows = n ? g.numel() / n : 0;
  const float *gp = g.as<const float>(), *up = u.as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(g.shape, static_cast<size_t>(g.rank)));
  float* yp = y.as<float>();
  const Act act = static_cast<Act>(s.act);
  return write_rows(s, rows, 4, n, yp, [&](int64_t b, int64_t e) { cpu::glu(isa, act, gp, n, up, n, yp, n, n, b, e); });
}

bool Executor::Impl::rope_params(const Step& s, int64_t S, RopeParams* rp) {
  const auto& a = s.node->attrs<ir::RopeAttrs>();
  rp->n_dims = a.n_dims;
  rp->mode = a.mode == ir::RopeMode::neox ? RopeMode::neox : RopeMode::normal;
  rp->freq_base = a.freq_base;
  rp->freq_scale = a.freq_scale;
  rp->attn_factor = a.attn_factor;
  rp->freq_factors = nullptr;
  if (s.in.size() == 3) {
    const Val& ff = in(s, 2);
    if (ff.type != ElementType::f32 || !ff.contiguous() || ff.numel() < rope_dims(*rp, S) / 2) return false;
    rp->freq_factors = ff.as<const float>();
  }
  return true;
}

Result<const float*> Executor::Impl::find_rope_tables(const Step& s, const RopeParams& rp, int64_t S, const Val& p,
                                                 int64_t T) {
  if (auto st = rope_check(rp, S); !st) return make_error(s.node->describe() + ": " + st.error().what);
  int32_t* pos = reinterpret_cast<int32_t*>(ibuf.ensure(static_cast<size_t>(std::max<int64_t>(T, 1)) * 4));
  if (auto st = to_i32(p, pos, *s.node); !st) return st.error();
  const int64_t nd = rope_dims(rp, S);
  RopeTables* tb = nullptr;
  for (RopeTables& r : rope_tables)
    if (r.n_dims == nd && r.head_size == S && r.mode == static_cast<int>(rp.mode) && r.freq_base == rp.freq_base &&
        r.freq_scale == rp.freq_scale && r.attn_factor == rp.attn_factor && r.freq_factors == rp.freq_factors)
      tb = &r;
  if (!tb) {
    tb = &rope_tables.emplace_back();
    tb->n_dims = nd, tb->head_size = S, tb->mode = static_cast<int>(rp.mode), tb->freq_base = rp.freq_base;
    tb->freq_scale = rp.freq_scale, tb->attn_factor = rp.attn_factor, tb->freq_factors = rp.freq_factors;
  }
  float* tables = reinterpret_cast<float*>(tb->tables.ensure(static_cast<size_t>(std::max<int64_t>(T, 1) * 2 * nd) * 4));
  if (tb->run != run_count || static_cast<int64_t>(tb->pos.size()) != T ||
      std::memcmp(tb->pos.data(), pos, static_cast<size_t>(T) * 4) != 0) {
    tb->pos.assign(pos, pos + T);
    tb->run = run_count;
    pool->parallel_for(T, 8, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) rope_cache(rp, S, pos[t], tables + t * 2 * nd);
    });
  }
  return tables;
}

Status Executor::Impl::rope(Step& s, bool* done) {
  if (s.rope_by >= 0 && steps[static_cast<size_t>(s.rope_by)].roped_run == run_count) {  // rotated in the matmul's epilogue
    Val v = in(s, 0);
    out(s) = std::move(v);
    return {};
  }
  const Val& x0 = in(s, 0);
  const Val& p = in(s, 1);
  if (x0.type != ElementType::f32 || x0.rank < 3 || !ir::is_integer(p.type) || !p.contiguous())
    return *done = false, Status{};
  const int64_t H = x0.dim(-2), S = x0.dim(-1), T = H * S != 0 ? x0.numel() / (H * S) : 0;
  if (p.numel() != T) return *done = false, Status{};  // positions broadcast: the reference kernel
  RopeParams rp;
  if (!rope_params(s, S, &rp)) return *done = false, Status{};
  auto tables = find_rope_tables(s, rp, S, p, T);
  if (!tables) return tables.error();
  const int64_t nd = rope_dims(rp, S);
  Val tmp;
  const Val& x = dense(x0, scratch, tmp);
  const float* xp = x.as<const float>();
  Val& y = alloc_out(s, std::span<const int64_t>(x.shape, static_cast<size_t>(x.rank)));
  float* yp = y.as<float>();
  const float* tb = *tables;
  pool->parallel_for(T, cheap_grain(H * S), [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) rope_apply(isa, rp, S, tb + t * 2 * nd, xp + t * H * S, yp + t * H * S, H);
  });
  return {};
}

Status Executor::Impl::gather_rows(Step& s, bool* done) {
  const Val& tbl = in(s, 0);
  const Val& idx = in(s, 1);
  // [rows, ...] (a constant table is [rows, E]): each row the trailing dims, dense
  if (!idx.contiguous() || !ir::is_integer(idx.type) || tbl.rank < 2 || idx.rank + tbl.rank - 1 > exec::kMaxRank ||
      !tbl.contiguous())
    return *done = false, Status{};
  auto g = ir::to_ggml(tbl.type);
  if (!g) return *done = false, Status{};
  RowTable t;
  t.type = *g;
  t.data = tbl.data;
  t.n_rows = tbl.shape[0];
  t.row_elems = tbl.shape[0] > 0 ? tbl.numel() / tbl.shape[0] : 0;
  t.bytes = ir::byte_size(tbl.type, tbl.numel());
  const int64_t R = idx.numel();
  int32_t* ix = reinterpret_cast<int32_t*>(ibuf.ensure(static_cast<size_t>(std::max<int64_t>(R, 1)) * 4));
  if (auto st = to_i32(idx, ix, *s.node); !st) return st;
  int64_t shape[exec::kMaxRank];  // idx's dims, then the table's trailing dims
  for (int i = 0; i < idx.rank; ++i) shape[i] = idx.shape[i];
  for (int i = 1; i < tbl.rank; ++i) shape[idx.rank + i - 1] = tbl.shape[i];
  Val& y = alloc_out(s, std::span<const int64_t>(shape, static_cast<size_t>(idx.rank + tbl.rank - 1)));
  if (auto st = get_rows(isa, t, ix, y.as<float>(), t.row_elems, 0, R); !st)
    return make_error(s.node->describe() + ": " + st.error().what, "check the token ids against the vocabulary size");
  return {};
}

Status Executor::Impl::scatter(Step& s, bool* done) {
  const Val& d = in(s, 0);
  const Val& idx = in(s, 1);
  const Val& u = in(s, 2);
  // In place only into a cache the caller owns and nobody else reads.
  if (!d.writable || consumers[s.in[0]] != 1 || !d.contiguous() || !u.contiguous() || u.type != d.type ||
      ir::is_block(d.type) || !idx.contiguous() || !ir::is_integer(idx.type))
    return *done = false, Status{};
  const int64_t axis = s.node->attrs<ir::AxisAttrs>().axis < 0 ? s.node->attrs<ir::AxisAttrs>().axis + d.rank
                                                               : s.node->attrs<ir::AxisAttrs>().axis;
  if (axis < 0 || axis >= d.rank) return make_error(s.node->describe() + ": axis out of range");
  int64_t P = 1, S = 1;
  for (int i = 0; i < axis; ++i) P *= d.shape[i];
  for (int i = static_cast<int>(axis) + 1; i < d.rank; ++i) S *= d.shape[i];
  const int64_t N = d.shape[axis], I = idx.numel();
  if (u.numel() != P * I * S) return make_error(s.node->describe() + ": updates do not match the indices");
  const size_t es = ir::scalar_size(d.type), is = ir::scalar_size(idx.type);
  for (int64_t i = 0; i < I; ++i) {
    const int64_t k = ir::load_i64(idx.type, idx.data + i * is);
    if (k < -N || k >= N) return make_error(s.node->describe() + ": index " + std::to_string(k) + " out of range [0, " + std::to_string(N) + ")");
  }
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < I; ++i) {
      int64_t k = ir::load_i64(idx.type, idx.data + i * is);
      if (k < 0) k += N;
      std::memcpy(d.data + ((p * N + k) * S) * es, u.data + ((p * I + i) * S) * es, static_cast<size_t>(S) * es);
    }
  Val v = d;
  out(s) = std::move(v);
  return {};
}

namespace {
// A layer's caches [NB, Hkv, 32, S] as the attention kernels' KvCache (type checked by the caller).
KvCache kv_cache(const Val& kc, const Val& vc) {
  KvCache c;
  c.num_blocks = kc.shape[0], c.kv_heads = kc.shape[1], c.head_size = kc.shape[3], c.v_size = vc.shape[3];
  if (kc.type == ElementType::f16) c.k16 = kc.as<uint16_t>(), c.v16 = vc.as<uint16_t>();
  else if (kc.type == ElementType::q8_0) c.k8 = kc.as<uint8_t>(), c.v8 = vc.as<uint8_t>();
  else c.k = kc.as<float>(), c.v = vc.as<float>();
  return c;
}
}  // namespace

Status Executor::Impl::paged_attention(Step& s, bool* done) {
  const Val &q0 = in(s, 0), &k0 = in(s, 1), &v0 = in(s, 2), &kc = in(s, 3), &vc = in(s, 4);
  const ir::Node& n = *s.node;
  // an f32, f16 or q8_0 cache (attention.h)
  if (!kc.writable || !vc.writable || consumers[s.in[3]] != 1 || consumers[s.in[4]] != 1 ||
      !(kc.type == ElementType::f32 || kc.type == ElementType::f16 || kc.type == ElementType::q8_0) || vc.type != kc.type || q0.type != ElementType::f32 || k0.type != ElementType::f32 ||
      v0.type != ElementType::f32 || kc.rank != 4 || vc.rank != 4 || q0.rank != 2 || kc.shape[2] != kKvBlock ||
      in(s, 12).numel() != 0 || !kc.contiguous() || !vc.contiguous())
    return *done = false, Status{};
  const int64_t T = q0.shape[0], NB = kc.shape[0], Hk = kc.shape[1], S = kc.shape[3], Sv = vc.shape[3];
  if (S == 0 || q0.shape[1] % S != 0 || Hk == 0 || (q0.shape[1] / S) % Hk != 0 || vc.shape[0] != NB || vc.shape[1] != Hk)
    return make_error(n.describe() + ": q does not fit the caches", "see DESIGN.md section 4");
  const int64_t Hq = q0.shape[1] / S;
  if (k0.numel() != T * Hk * S || v0.numel() != T * Hk * Sv)
    return make_error(n.describe() + ": k or v do not fit q and the caches");
  const Val &past_v = in(s, 5), &sb_v = in(s, 6), &bi_v = in(s, 7), &bib_v = in(s, 8);
  const int64_t B = past_v.numel(), nbi = bi_v.numel();
  if (sb_v.numel() != B + 1 || bib_v.numel() != B + 1)
    return make_error(n.describe() + ": subsequence_begins / block_indices_begins must have B+1 = " + std::to_string(B + 1) + " entries");
  // int32 scratch: past [B], sb [B+1], bi [nbi], bib [B+1], positions [T], seq [T]
  int32_t* ints = reinterpret_cast<int32_t*>(ibuf.ensure(static_cast<size_t>(3 * B + 2 + nbi + 2 * T + 1) * 4));
  int32_t *past = ints, *sb = past + B, *bi = sb + B + 1, *bib = bi + nbi, *pos = bib + B + 1, *seq = pos + T;
  for (auto [v, dst] : {std::pair{&past_v, past}, {&sb_v, sb}, {&bi_v, bi}, {&bib_v, bib}})
    if (auto st = to_i32(*v, dst, n); !st) return st;
  if (sb[0] != 0 || sb[B] != T || bib[0] != 0)
    return make_error(n.describe() + ": subsequence_begins must run from 0 to T = " + std::to_string(T),
                      "they are prefix sums of the new tokens and of the block tables");
  const int64_t max_ctx = scalar_i64(in(s, 9)), window = scalar_i64(in(s, 11));
  float scale = scalar_f32(in(s, 10));
  if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(S));
  const float softcap = s.in.size() > 13 ? scalar_f32(in(s, 13)) : 0.0f;  // input 13, optional: 0 = off
  int64_t max_keys = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (sb[b + 1] < sb[b] || bib[b + 1] < bib[b] || bib[b + 1] > nbi)
      return make_error(n.describe() + ": sequence " + std::to_string(b) + ": begins are not increasing prefix sums");
    const int64_t len = static_cast<int64_t>(past[b]) + sb[b + 1] - sb[b];
    if (past[b] < 0 || len > static_cast<int64_t>(bib[b + 1] - bib[b]) * kKvBlock)
      return make_error(n.describe() + ": sequence " + std::to_string(b) + " needs " + std::to_string(len) +
                            " rows but its block table has " + std::to_string(bib[b + 1] - bib[b]) + " blocks of 32",
                        "allocate ceil((past + new) / block_size) blocks per sequence");
    if (len > max_ctx)
      return make_error(n.describe() + ": sequence " + std::to_string(b) + " has " + std::to_string(len) +
                        " rows, more than max_context_len " + std::to_string(max_ctx));
    for (int64_t t = sb[b]; t < sb[b + 1]; ++t) pos[t] = static_cast<int32_t>(past[b] + t - sb[b]), seq[t] = static_cast<int32_t>(b);
    max_keys = std::max(max_keys, len);
  }
  for (int64_t i = 0; i < nbi; ++i)
    if (bi[i] < 0 || bi[i] >= NB)
      return make_error(n.describe() + ": block index " + std::to_string(bi[i]) + " out of range [0, " + std::to_string(NB) + ")");
  Val tq, tk, tv;
  const Val& q = dense(q0, scratch, tq);
  const Val& k = dense(k0, qbuf, tk);
  const Val& v = dense(v0, kvbuf, tv);
  const KvCache cache = kv_cache(kc, vc);
  // fewer (token, kv head) groups than threads (one decode token on one kv head): split the
  // groups' q heads (each q head's bits are its own)
  const int64_t row_parts =
      T > 0 && T * Hk < pool->size() ? std::min<int64_t>(Hq / Hk, (pool->size() + T * Hk - 1) / (T * Hk)) : 1;
  // 1. this step's K/V rows into their blocks before anything reads them: in a decode batch (one
  // token per sequence) each attention item writes its own rows; else first, split over the threads
  bool decode = row_parts == 1;
  for (int64_t b = 0; b < B && decode; ++b) decode = sb[b + 1] - sb[b] == 1;
  FirstError werr;
  auto write = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = seq[t];
      werr.note(kv_write(isa, cache, bi + bib[b], bib[b + 1] - bib[b], pos[t], k.as<const float>() + t * Hk * S,
                         v.as<const float>() + t * Hk * Sv));
    }
  };
  if (!decode) pool->parallel_for(T, cheap_grain(Hk * (S + Sv)), write);
  if (werr.set) return make_error(n.describe() + ": " + werr.status.error().what);
  // 2. attention per (token, kv head)
  const int64_t out_shape[2] = {T, Hq * Sv};
  Val& y = alloc_out(s, out_shape);
  AttentionBatch ab;
  ab.q = q.as<const float>();
  ab.q_stride = Hq * S;
  ab.out = y.as<float>();
  ab.out_stride = Hq * Sv;
  ab.tokens = T;
  ab.q_heads = Hq;
  ab.positions = pos;
  ab.seq = seq;
  ab.block_indices = bi;
  ab.block_begins = bib;
  ab.n_seqs = B;
  ab.window = window;
  ab.scale = scale;
  ab.softcap = softcap;
  ab.row_parts = row_parts;
  if (decode) ab.k_new = k.as<const float>(), ab.v_new = v.as<const float>();
  const int64_t per = attention_rows_scratch_floats(cache, ab, max_keys);
  Buffer& sc = attn_scratch;
  float* scr = reinterpret_cast<float*>(sc.ensure(static_cast<size_t>(per * pool->size()) * 4 + 64));
  FirstError err;
  // Items (token, kv head, row part) cost about their key count, which grows along a causal prefill: split
  // them into one contiguous part per thread of about equal keys (outputs only: no bit changes).
  const int64_t items = attention_items(cache, ab), parts = std::min<int64_t>(pool->size(), items),
                per_token = T > 0 ? items / T : 1;
  int64_t total = 0;
  for (int64_t t = 0; t < T; ++t) total += (pos[t] + 1) * per_token;
  int64_t* bounds = reinterpret_cast<int64_t*>(bounds_buf.ensure(static_cast<size_t>(parts + 1) * 8));
  bounds[0] = 0;
  for (int64_t p = 1, i = 0, acc = 0; p <= parts; ++p) {
    const int64_t target = total * p / parts;
    while (i < items && (acc < target || p == parts)) acc += pos[i / per_token] + 1, ++i;
    bounds[p] = i;
  }
  // The next PagedAttention step reads the same rows of its own caches (same batch, same tables):
  // in a decode batch each thread queues its items' rows there, for the matmuls in between to
  // prefetch (side_prefetch.h; a prefill's tokens read overlapping rows, and its matmuls are long).
  KvCache next;
  if (decode && s.next_kv_params[0] >= 0 && static_cast<size_t>(std::max(s.next_kv_params[0], s.next_kv_params[1])) < run_params.size()) {
    const Val nk = exec::view_of(run_params[size_t(s.next_kv_params[0])]), nv = exec::view_of(run_params[size_t(s.next_kv_params[1])]);
    if (nk.type == kc.type && nv.type == vc.type && nk.rank == 4 && nv.rank == 4 && nk.contiguous() && nv.contiguous() &&
        std::equal(nk.shape, nk.shape + 4, kc.shape) && std::equal(nv.shape, nv.shape + 4, vc.shape))
      next = kv_cache(nk, nv);
  }
  pool->parallel_for(parts, 1, [&](int64_t b, int64_t e, int t) {
    for (int64_t p = b; p < e; ++p)
      if (bounds[p] < bounds[p + 1]) err.note(attention_rows(isa, cache, ab, bounds[p], bounds[p + 1], scr + t * per, per));
    if (next.num_blocks == 0) return;
    SidePrefetch& q = side_prefetch();
    q.clear();
    for (int64_t p = b; p < e; ++p) queue_rows(next, ab, bounds[p], bounds[p + 1], q);
  });
  if (err.set) return make_error(n.describe() + ": " + err.status.error().what);
  Val kout = kc, vout = vc;
  out(s, 1) = std::move(kout);
  out(s, 2) = std::move(vout);
  return {};
}

Status Executor::Impl::sdpa(Step& s, bool* done) {
  const Val &q = in(s, 0), &k = in(s, 1), &v = in(s, 2);
  const ir::Node& n = *s.node;
  const auto& a = n.attrs<ir::SdpaAttrs>();
  if (q.type != ElementType::f32 || k.type != ElementType::f32 || v.type != ElementType::f32 || q.rank < 3 ||
      k.rank != q.rank || v.rank != q.rank || q.stride[q.rank - 1] != 1 || k.stride[k.rank - 1] != 1 ||
      v.stride[v.rank - 1] != 1)
    return *done = false, Status{};
  const int r = q.rank;
  for (int i = 0; i + 3 < r; ++i)
    if (q.shape[i] != 1 || k.shape[i] != 1 || v.shape[i] != 1) return *done = false, Status{};  // batch 1 only
  const int64_t Hq = q.shape[r - 3], Tq = q.shape[r - 2], S = q.shape[r - 1], Hk = k.shape[r - 3], Tk = k.shape[r - 2],
                Sv = v.shape[r - 1];
  if (Hk == 0 || Hq % Hk != 0 || v.shape[r - 2] != Tk || v.shape[r - 3] != Hk || k.shape[r - 1] != S)
    return make_error(n.describe() + ": q, k, v do not fit together");
  // q8_0 scores: K and V as q8_0 blocks (the kernel's q8_0 cache; head sizes it takes, else the reference)
  if (a.q8_0_scores && (S % 32 != 0 || Sv % 32 != 0 || S > kMaxHalfRow || Sv > kMaxHalfRow)) return *done = false, Status{};
  const int64_t group = Hq / Hk;
  // The keys each query row sees: one run [lo, hi) where the mask is 0 (or true), -inf (false) elsewhere.
  const float* mask = nullptr;
  bool bool_mask = false;
  if (s.in.size() == 4) {
    const Val& m = in(s, 3);
    if (!m.contiguous() || m.numel() != Tq * Tk || !(m.type == ElementType::f32 || m.type == ElementType::boolean))
      return *done = false, Status{};
    bool_mask = m.type == ElementType::boolean;
    mask = bool_mask ? nullptr : m.as<const float>();
  }
  const Val* mval = s.in.size() == 4 ? &in(s, 3) : nullptr;
  int32_t* range = reinterpret_cast<int32_t*>(ibuf.ensure(static_cast<size_t>(2 * Tq + 1) * 4 + 4 * 64));
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < Tq; ++i) {
    int64_t lo = -1, hi = -1;
    for (int64_t j = 0; j < Tk; ++j) {
      bool see = true;
      if (mval) {
        if (bool_mask) {
          see = mval->data[i * Tk + j] != 0;
        } else {
          const float mv = mask[i * Tk + j];
          if (mv != 0.0f && mv != ninf) return *done = false, Status{};  // a general additive mask
          see = mv == 0.0f;
        }
      }
      if (a.causal && j > i + (Tk - Tq)) see = false;
      if (see) {
        if (hi >= 0 && hi != j) return *done = false, Status{};  // not one run of keys
        if (lo < 0) lo = j;
        hi = j + 1;
      }
    }
    range[2 * i] = static_cast<int32_t>(lo < 0 ? 0 : lo);
    range[2 * i + 1] = static_cast<int32_t>(hi < 0 ? 0 : hi);
  }
  // K/V into the block layout of the paged cache, so that every layout runs the same kernel: f32
  // rows, or with q8_0 scores q8_0 blocks (kv_write's rounding: exact on rows a q8_0 cache wrote,
  // so V's values and the keys' codes are the paged cache's).
  const int64_t NB = (Tk + kKvBlock - 1) / kKvBlock;
  KvCache cache{nullptr, nullptr, NB, Hk, S, Sv};
  auto bytes = [&](int64_t n) { return static_cast<size_t>(a.q8_0_scores ? n / 32 * 34 : n * 4 + 63) / 64 * 64 + 64; };
  const size_t kby = bytes(NB * Hk * kKvBlock * S), vby = bytes(NB * Hk * kKvBlock * Sv);
  uint8_t* kb = kvbuf.ensure(kby + vby + static_cast<size_t>(NB) * 4 + 64);
  uint8_t* vb = kb + kby;
  if (a.q8_0_scores) cache.k8 = kb, cache.v8 = vb;
  else cache.k = reinterpret_cast<float*>(kb), cache.v = reinterpret_cast<float*>(vb);
  int32_t* table = reinterpret_cast<int32_t*>(vb + vby);
  for (int64_t b = 0; b < NB; ++b) table[b] = static_cast<int32_t>(b);
  for (int64_t h = 0; h < Hk; ++h)
    for (int64_t j = 0; j < Tk; ++j) {
      const float* kr = reinterpret_cast<const float*>(k.data) + h * k.stride[r - 3] + j * k.stride[r - 2];
      const float* vr = reinterpret_cast<const float*>(v.data) + h * v.stride[r - 3] + j * v.stride[r - 2];
      kv_write_head(isa, cache, j / kKvBlock, h, j % kKvBlock, kr, vr);
    }
  int64_t shape[exec::kMaxRank];
  for (int i = 0; i < r; ++i) shape[i] = q.shape[i];
  shape[r - 1] = Sv;
  Val& y = alloc_out(s, std::span<const int64_t>(shape, static_cast<size_t>(r)));
  float* out = y.as<float>();
  const float scale = a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(static_cast<float>(S));
  const float softcap = a.logit_softcap;  // 0 = off; capped before the (range) mask, as the IR
  // Consecutive query rows of one kv head run as tiles (attention_queries): each query's bits are
  // those of attention() on it alone.
  const int64_t tile = attention_tile_queries(group, Tk);
  const int64_t per = attention_queries_scratch_floats(tile, group, Tk);
  float* scr = reinterpret_cast<float*>(attn_scratch.ensure(static_cast<size_t>(per * pool->size()) * 4 + 64));
  FirstError err;
  pool->parallel_for(Tq * Hk, 1, [&](int64_t b, int64_t e, int t) {
    AttentionQuery aq[kAttentionTile];
    for (int64_t g = 0; g < Hk; ++g) {
      // the items of kv head g in [b, e): query rows i in [i0, i1)
      const int64_t i0 = b <= g ? 0 : (b - g + Hk - 1) / Hk, i1 = e <= g ? 0 : (e - g + Hk - 1) / Hk;
      int64_t k = 0;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t lo = range[2 * i], hi = range[2 * i + 1];
        float* o = out + (g * group * Tq + i) * Sv;
        if (hi <= lo) {  // sees no key: zeros, as the reference
          for (int64_t h = 0; h < group; ++h) std::memset(o + h * Tq * Sv, 0, static_cast<size_t>(Sv) * 4);
          continue;
        }
        AttentionQuery& a = aq[k++];
        a.q = q.as<const float>() + (g * group) * q.stride[r - 3] + i * q.stride[r - 2];
        a.q_stride = q.stride[r - 3];
        a.out = o;
        a.out_stride = Tq * Sv;
        a.nq = group;
        a.kv_head = g;
        a.block_table = table;
        a.table_len = NB;
        a.n_keys = hi;
        a.window = lo > 0 ? hi - lo : 0;
        a.scale = scale;
        a.softcap = softcap;
        if (k == tile) err.note(attention_queries(isa, cache, aq, k, scr + t * per, per)), k = 0;
      }
      if (k > 0) err.note(attention_queries(isa, cache, aq, k, scr + t * per, per));
    }
  });
  if (err.set) return make_error(n.describe() + ": " + err.status.error().what);
  return {};
}

}  // namespace ggflow::cpu
