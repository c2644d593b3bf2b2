// The executor's plan fusions that merge steps (GGFLOW_PLAN_FUSION=0 turns them off; the
// invariance tests compare both plans by memcmp). Each keeps the bits of the steps it merges: the
// same kernels run on the same values, only where and when changes. Matmul groups are formed in
// compile() (they reorder the plan); these run after them:
//   - GLU: Multiply(Swish|Gelu(g), u) as one step;
//   - epilogue adds: Add(MatMul(x, W), r), r a residual or a constant row (a bias), done by the
//     matmul (or its group), each thread on the columns it wrote;
//   - RoPE: RoPE(Reshape(MatMul(x, W) [+ b]), pos) of a group member (the Q and K projections) done by
//     the group, each thread rotating the whole heads it wrote;
//   - prequantization: a GLU or an RMSNorm whose only readers are one packed matmul job (a single
//     matmul or one group) quantizes its rows for it on the thread that wrote them.
#include <algorithm>
#include <numeric>

#include "cpu/executor_impl.h"
#include "cpu/kernels/act.h"
#include "cpu/kernels/quant_act.h"
#include "ir/attrs.h"

namespace ggflow::cpu {

namespace {

// Per value: the step producing it, how many step inputs read it, and the last step reading it.
struct Uses {
  std::vector<int> producer;
  std::vector<uint32_t> readers;
  std::vector<int> reader;
};

Uses uses_of(const std::vector<Step>& steps) {
  uint32_t n_vals = 0;
  for (const Step& s : steps) n_vals = std::max(n_vals, s.out + static_cast<uint32_t>(std::max<size_t>(1, s.node->n_outputs())));
  Uses u{std::vector<int>(n_vals, -1), std::vector<uint32_t>(n_vals, 0), std::vector<int>(n_vals, -1)};
  for (size_t i = 0; i < steps.size(); ++i) u.producer[steps[i].out] = static_cast<int>(i);
  for (size_t i = 0; i < steps.size(); ++i)
    for (uint32_t v : steps[i].in) ++u.readers[v], u.reader[v] = static_cast<int>(i);  // Result steps are readers too
  return u;
}

// Both inputs of a binary node f32 with one static shape (the same dims and symbols).
bool same_f32_shapes(const ir::Node& n) {
  return n.input(0).type() == ir::ElementType::f32 && n.input(1).type() == ir::ElementType::f32 &&
         n.input(0).shape() == n.input(1).shape() && n.input(0).shape().rank_known() && n.input(0).shape().rank() >= 1;
}

// Input r of a binary node is one f32 row of n (every dim but the last 1), the other input f32 of
// a known rank at least r's, ending in n: the row is added to each of its rows.
bool is_row_of(const ir::Node& node, int r, int64_t n) {
  const ir::Shape &rs = node.input(r).shape(), &xs = node.input(1 - r).shape();
  if (node.input(r).type() != ir::ElementType::f32 || node.input(1 - r).type() != ir::ElementType::f32 ||
      !rs.rank_known() || !xs.rank_known() || rs.rank() < 1 || rs.rank() > xs.rank() || !rs[rs.rank() - 1].is(n) ||
      !xs[xs.rank() - 1].is(n))
    return false;
  for (size_t d = 0; d + 1 < rs.rank(); ++d)
    if (!rs[d].is(1)) return false;
  return true;
}

// Steps that write bytes in place (caches, state) or may (the reference kernel of an aliasing op).
bool writes_in_place(Kind k) {
  return k == Kind::scatter || k == Kind::paged_attention || k == Kind::sdpa || k == Kind::assign || k == Kind::fallback;
}

bool quantized_packed(const Step& m) { return m.kind == Kind::matmul && m.packed && act_format(m.wtype) != ActFormat::f32; }
}  // namespace

void Executor::Impl::fuse_steps() {
  fuse_glus();
  fuse_epilogue_adds();
  fuse_ropes();
  plan_prequant();
}

// GLU: Multiply(Swish|Gelu(g), u) with the activation read only there becomes one glu step reading
// g and u; the activation's step does nothing (Kind::fused). cpu::glu rounds act(g) and then the
// product, as the two steps did: the same bits.
void Executor::Impl::fuse_glus() {
  const Uses u = uses_of(steps);
  for (Step& s : steps) {
    if (s.kind != Kind::binary || s.node->type() != ir::OpType::Multiply || s.in.size() != 2 || !same_f32_shapes(*s.node))
      continue;
    for (int i = 0; i < 2; ++i) {
      const int p = u.producer[s.in[i]];
      if (p < 0 || u.readers[s.in[i]] != 1) continue;
      Step& a = steps[static_cast<size_t>(p)];
      if (a.kind != Kind::activation || a.in.size() != 1 || a.node->input(0).type() != ir::ElementType::f32) continue;
      const Act act = activation_of(*a.node);
      s.kind = Kind::glu;
      s.act = static_cast<int>(act);
      s.in = {a.in[0], s.in[1 - i]};
      a.kind = Kind::fused;
      break;
    }
  }
}

// Add(MatMul(x, W), r), the matmul read only there and r either computed before it (before its
// group's job) with the same shape (the residual after the attention's output projection and after the down
// projection) or a constant row of the matmul's N (the Q/K/V biases): the matmul, or its group,
// adds r to the columns it wrote (cpu::binary, one IEEE add per element, which commutes exactly)
// and the Add's value is the matmul's. No step in between may write bytes in place (r stays what
// it was).
void Executor::Impl::fuse_epilogue_adds() {
  const Uses u = uses_of(steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& a = steps[i];
    if (a.kind != Kind::binary || a.node->type() != ir::OpType::Add || a.in.size() != 2) continue;
    for (int j = 0; j < 2; ++j) {
      const int p = u.producer[a.in[j]], pr = u.producer[a.in[1 - j]];
      if (p < 0 || pr < 0 || u.readers[a.in[j]] != 1) continue;
      Step& m = steps[static_cast<size_t>(p)];
      if (m.kind != Kind::matmul || m.out != a.in[j]) continue;  // its one reader: this Add
      const bool row = steps[static_cast<size_t>(pr)].kind == Kind::constant && is_row_of(*a.node, 1 - j, m.N);
      const int runs_at = m.group >= 0 ? static_cast<int>(groups[static_cast<size_t>(m.group)].steps.front()) : p;
      if (!row && (pr >= runs_at || !same_f32_shapes(*a.node))) continue;  // r ready when the job starts
      bool clear = true;
      for (size_t k = static_cast<size_t>(p) + 1; k < i; ++k) clear = clear && !writes_in_place(steps[k].kind);
      if (!clear) continue;
      m.add_in = static_cast<int>(a.in[1 - j]);
      m.add_row = row;
      a.add_by = p;
      break;
    }
  }
}

// RoPE(Reshape(MatMul(x, W) [+ bias]), pos) where the matmul is a group member read only by that
// Reshape (or by the Add of its bias, done in its epilogue, read only by the Reshape),
// the Reshape read only by the RoPE and by ShapeOf steps (which read no bytes), and the positions
// a view of a value computed before the group (in the paged graph they are reshaped to a shape
// taken from the matmul's output, after it): the group rotates each member's rows once its thread
// has computed them (cpu::rope_apply, in place, on the same rows with the same tables: the same
// bits), split in parts of whole heads, and the RoPE's value is the Reshape's. No step in between
// may write bytes in place.
void Executor::Impl::fuse_ropes() {
  const Uses u = uses_of(steps);
  std::vector<uint32_t> shape_reads(u.readers.size(), 0);
  for (const Step& s : steps)
    if (s.kind == Kind::shape_of)
      for (uint32_t v : s.in) ++shape_reads[v];
  auto is_reshape = [](Kind k) { return k == Kind::reshape || k == Kind::squeeze || k == Kind::unsqueeze; };
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& r = steps[i];
    if (r.kind != Kind::rope || r.in.size() < 2 || r.in.size() > 3 || r.node->input(0).type() != ir::ElementType::f32)
      continue;
    const ir::Shape& xs = r.node->input(0).shape();
    if (!xs.rank_known() || xs.rank() < 3 || !xs[xs.rank() - 1].is_static() || xs[xs.rank() - 1].value() <= 0) continue;
    const int64_t S = xs[xs.rank() - 1].value();
    const int pv = u.producer[r.in[0]];
    if (pv < 0 || steps[static_cast<size_t>(pv)].kind != Kind::reshape || u.readers[r.in[0]] != 1 + shape_reads[r.in[0]])
      continue;
    uint32_t mv = steps[static_cast<size_t>(pv)].in[0];  // the matmul's value, or the Add done in its epilogue
    if (u.readers[mv] != 1 || u.producer[mv] < 0) continue;
    if (const Step& a = steps[static_cast<size_t>(u.producer[mv])]; a.kind == Kind::binary && a.add_by >= 0)
      mv = steps[static_cast<size_t>(a.add_by)].out;
    const int pm = u.producer[mv];
    if (pm < 0) continue;
    Step& m = steps[static_cast<size_t>(pm)];
    if (m.kind != Kind::matmul || m.group < 0 || m.out != mv || u.readers[mv] != 1 || m.rope >= 0 || m.N % S != 0)
      continue;
    MatmulGroup& g = groups[static_cast<size_t>(m.group)];
    const int lead = static_cast<int>(g.steps.front());
    uint32_t p = r.in[1];  // the positions, back through reshapes to a value computed before the group
    while (u.producer[p] > lead && is_reshape(steps[static_cast<size_t>(u.producer[p])].kind))
      p = steps[static_cast<size_t>(u.producer[p])].in[0];
    if (u.producer[p] < 0 || u.producer[p] >= lead) continue;
    if (r.in.size() == 3 && (u.producer[r.in[2]] < 0 || steps[static_cast<size_t>(u.producer[r.in[2]])].kind != Kind::constant))
      continue;
    bool clear = true;
    for (size_t k = static_cast<size_t>(lead) + 1; k < i; ++k) clear = clear && !writes_in_place(steps[k].kind);
    if (!clear) continue;
    int64_t first = 0;  // the member's first row in the group's split: on a head
    for (uint32_t j : g.steps) {
      if (j == static_cast<uint32_t>(pm)) break;
      first += steps[j].N;
    }
    const int64_t grain = std::lcm(g.grain, S);
    if (first % S != 0 || grain > 256) continue;
    g.grain = grain;
    m.rope = static_cast<int>(i), m.rope_pos = static_cast<int>(p);
    r.rope_by = pm;
  }
}

// Prequantization (Step::quant_for): the matmul job reading a GLU's or an RMSNorm's rows finds
// them quantized in pqbuf (quant_act.h: a row's bytes do not depend on the other rows, so who
// quantizes which rows changes nothing). One pqbuf: a producer is dropped while the job of the one
// before it has not run yet.
void Executor::Impl::plan_prequant() {
  const Uses u = uses_of(steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    Step& s = steps[i];
    if ((s.kind != Kind::glu && s.kind != Kind::rmsnorm) || u.readers[s.out] == 0 || u.reader[s.out] < 0) continue;
    const Step& last = steps[static_cast<size_t>(u.reader[s.out])];
    if (!quantized_packed(last)) continue;
    if (last.group < 0) {  // one matmul, its only reader
      if (u.readers[s.out] == 1 && !last.in.empty() && last.in[0] == s.out) s.quant_for = u.reader[s.out];
      continue;
    }
    // a group (its members next to each other): every reader a member reading the rows as x
    const MatmulGroup& g = groups[static_cast<size_t>(last.group)];
    bool all = u.readers[s.out] == g.steps.size();
    for (uint32_t mi : g.steps) all = all && !steps[mi].in.empty() && steps[mi].in[0] == s.out;
    if (all) s.quant_for = static_cast<int>(g.steps.front());
  }
  int pending = -1;  // the job the last producer quantized for, until it runs
  for (size_t i = 0; i < steps.size(); ++i) {
    if (static_cast<int>(i) == pending) pending = -1;
    Step& s = steps[i];
    if (s.quant_for < 0) continue;
    if (pending >= 0) s.quant_for = -1;
    else pending = s.quant_for;
  }
}

}  // namespace ggflow::cpu
