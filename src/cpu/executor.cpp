#include "cpu/executor.h"
#include "cpu/kernels/convert.h"
#include "cpu/kernels/matmul_packed.h"

#include <algorithm>
#include <map>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "cpu/executor_impl.h"
#include "cpu/host.h"
#include "cpu/kernel_registry.h"
#include "cpu/kernels/side_prefetch.h"
#include "ir/attrs.h"
#include "ir/kernel_util.h"

namespace ggflow::cpu {

namespace {

bool is_view_kind(Kind k) {
  return k == Kind::reshape || k == Kind::squeeze || k == Kind::unsqueeze || k == Kind::transpose || k == Kind::slice ||
         k == Kind::result || k == Kind::scatter || k == Kind::read_value || k == Kind::fallback;
}

bool needs_buffer(Kind k) {
  switch (k) {
    case Kind::shape_of: case Kind::convert:
    case Kind::reshape: case Kind::matmul: case Kind::rmsnorm: case Kind::layernorm: case Kind::binary: case Kind::activation: case Kind::glu:
    case Kind::rope: case Kind::gather_rows: case Kind::paged_attention: case Kind::sdpa: return true;
    default: return false;
  }
}

int64_t normalize(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace

Status Executor::Impl::compile(const ir::Model& m) {
  model = &m;
  const char* pf = std::getenv("GGFLOW_PLAN_FUSION");
  const bool plan_fusion = !(pf && std::strcmp(pf, "0") == 0);
  auto order = m.ordered();
  if (!order) return order.error();
  std::unordered_map<const ir::Node*, uint32_t> step_of, param_of;
  std::unordered_map<std::string, int> var_of;
  for (size_t i = 0; i < m.parameters().size(); ++i) param_of[m.parameters()[i].get()] = static_cast<uint32_t>(i);
  uint32_t next_val = 0;
  for (const ir::NodePtr& np : *order) {
    const ir::Node& n = *np;
    if (n.error()) return *n.error();
    Step s;
    s.node = &n;
    s.kind = choose_kernel(n, s);
    for (const ir::Value& v : n.inputs()) s.in.push_back(steps[step_of.at(v.node.get())].out + static_cast<uint32_t>(v.index));
    s.out = next_val;
    next_val += static_cast<uint32_t>(std::max<size_t>(1, n.n_outputs()));
    if (s.kind == Kind::param) {
      auto it = param_of.find(&n);
      if (it == param_of.end()) return make_error(n.describe() + " is not a parameter of the model");
      s.param = static_cast<int>(it->second);
    }
    if (n.type() == ir::OpType::ReadValue || n.type() == ir::OpType::Assign) {
      const std::string& id = n.attrs<ir::VariableAttrs>().id;
      auto [it, fresh] = var_of.try_emplace(id, static_cast<int>(var_ids.size()));
      if (fresh) var_ids.push_back(id);
      s.variable = it->second;
    }
    step_of[&n] = static_cast<uint32_t>(steps.size());
    steps.push_back(std::move(s));
  }
  std::vector<PackRequest> packs;  // the matmuls' weights, packed at once into one arena
  for (const Step& s : steps)
    if (s.kind == Kind::matmul) packs.push_back({s.wtype, s.weight, s.w_row_bytes, s.N, s.K, nullptr});
  pack_weights(isa, packs, pool.get());
  for (size_t i = 0, j = 0; i < steps.size(); ++i)
    if (steps[i].kind == Kind::matmul) steps[i].packed = std::move(packs[j++].packed);
  // Matmul groups: the packed matmuls of one input (same type, rows in whole 16-row groups) move
  // next to the first of them, which runs them all (MatmulGroup). Moving a step earlier is safe:
  // it reads only that input (computed before the first) and a constant.
  {
    std::map<std::pair<uint32_t, int>, std::vector<uint32_t>> by_input;
    for (uint32_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      if (s.kind == Kind::matmul && s.packed && s.N % kPackRows == 0 && s.in.size() == 2)
        by_input[{s.in[0], static_cast<int>(s.wtype)}].push_back(i);
    }
    std::vector<int> group_of(steps.size(), -1);
    for (auto& [key, members] : by_input) {
      if (members.size() < 2 || !plan_fusion) continue;
      if (members.size() > MatmulGroup::kMaxSteps) members.resize(MatmulGroup::kMaxSteps);
      const int g = static_cast<int>(groups.size());
      groups.push_back({members, 0});
      for (uint32_t i : members) group_of[i] = g;
    }
    if (!groups.empty()) {
      std::vector<uint32_t> order_new;
      std::vector<bool> placed(steps.size(), false);
      for (uint32_t i = 0; i < steps.size(); ++i) {
        if (placed[i]) continue;
        if (group_of[i] >= 0)
          for (uint32_t j : groups[static_cast<size_t>(group_of[i])].steps) order_new.push_back(j), placed[j] = true;
        else order_new.push_back(i), placed[i] = true;
      }
      std::vector<Step> reordered;
      std::vector<uint32_t> new_index(steps.size());
      reordered.reserve(steps.size());
      for (uint32_t i : order_new) new_index[i] = static_cast<uint32_t>(reordered.size()), reordered.push_back(std::move(steps[i]));
      steps = std::move(reordered);
      for (auto& [node, i] : step_of) i = new_index[i];
      for (size_t g = 0; g < groups.size(); ++g)
        for (uint32_t& i : groups[g].steps) i = new_index[i], steps[i].group = static_cast<int>(g);
    }
  }
  // Each packed matmul job learns the next one (the last the first, for the next run): a thread
  // that finished its part prefetches its part of the next job's weights while it waits.
  {
    int next = -1, last = -1;  // walking back: `next` ends as the first job
    for (int64_t i = static_cast<int64_t>(steps.size()) - 1; i >= 0; --i) {
      Step& s = steps[static_cast<size_t>(i)];
      if (s.kind != Kind::matmul || !s.packed || (s.group >= 0 && groups[static_cast<size_t>(s.group)].steps.front() != i))
        continue;
      s.next_job = next;
      if (last < 0) last = static_cast<int>(i);
      next = static_cast<int>(i);
    }
    if (last != next) steps[static_cast<size_t>(last)].next_job = next;
  }
  if (plan_fusion) fuse_steps();
  vals.resize(next_val);
  fallback_out.assign(next_val, ir::Tensor());
  consumers.assign(next_val, 0);
  for (const Step& s : steps)
    for (uint32_t v : s.in) ++consumers[v];
  for (Step& s : steps) {
    if (s.kind == Kind::constant) {  // constants are values once and for all
      const ir::Tensor& t = s.node->attrs<ir::ConstantAttrs>().value;
      if (t.rank() > static_cast<size_t>(exec::kMaxRank)) s.kind = Kind::fallback;
      else vals[s.out] = exec::view_of(t);
    }
  }
  for (const ir::NodePtr& r : m.results()) result_vals.push_back(steps[step_of.at(r.get())].out);

  // Memory plan: the last step that may read each value's bytes, through any chain of views.
  std::vector<uint32_t> last(next_val, 0), producer(next_val, 0);
  for (uint32_t i = 0; i < steps.size(); ++i) {
    for (uint32_t v : steps[i].in) last[v] = std::max(last[v], i);
    for (size_t o = 0; o < std::max<size_t>(1, steps[i].node->n_outputs()); ++o) producer[steps[i].out + o] = i;
  }
  for (uint32_t v : result_vals) last[v] = static_cast<uint32_t>(steps.size());  // results outlive the run
  // Each PagedAttention step learns the parameters holding the next one's caches (when they are
  // parameters): it queues their rows for prefetching beside the matmuls in between.
  for (size_t i = 0, prev = steps.size(); i < steps.size(); ++i) {
    if (steps[i].kind != Kind::paged_attention || steps[i].in.size() < 5) continue;
    const Step &pk = steps[producer[steps[i].in[3]]], &pv = steps[producer[steps[i].in[4]]];
    if (prev < steps.size() && pk.kind == Kind::param && pv.kind == Kind::param)
      steps[prev].next_kv_params[0] = pk.param, steps[prev].next_kv_params[1] = pv.param;
    prev = i;
  }
  for (int64_t i = static_cast<int64_t>(steps.size()) - 1; i >= 0; --i) {
    const Step& s = steps[i];
    if (s.add_by >= 0) {  // an Add done in a matmul's epilogue: its value is the matmul's (a view of it)
      uint32_t& m_last = last[steps[static_cast<size_t>(s.add_by)].out];
      m_last = std::max(m_last, last[s.out]);
    }
    if (s.rope_by >= 0) last[s.in[0]] = std::max(last[s.in[0]], last[s.out]);  // rotated in place: a view of its input
    if (!is_view_kind(s.kind)) continue;
    uint32_t out_last = 0;
    for (size_t o = 0; o < std::max<size_t>(1, s.node->n_outputs()); ++o) out_last = std::max(out_last, last[s.out + o]);
    for (uint32_t v : s.in) last[v] = std::max(last[v], out_last);
  }
  // Buffers by liveness: a step takes a free buffer; it is freed after the last reader.
  std::vector<int> free_list;
  std::vector<std::vector<int>> release(steps.size() + 1);
  int n_buffers = 0;
  for (uint32_t i = 0; i < steps.size(); ++i) {
    for (int b : release[i]) free_list.push_back(b);
    Step& s = steps[i];
    if (!needs_buffer(s.kind)) continue;
    if (free_list.empty()) free_list.push_back(n_buffers++);
    s.buf = free_list.back();
    free_list.pop_back();
    const uint32_t end = std::max(last[s.out], i);
    if (end < steps.size()) release[end + 1 <= steps.size() ? end + 1 : steps.size()].push_back(s.buf);
  }
  buffers.resize(static_cast<size_t>(n_buffers));
  // A group writes every member's output at its first step: no buffer may change hands before the
  // last member (none does, as members only read the shared input; checked, else run them apart).
  for (MatmulGroup& g : groups) {
    bool ok = true;
    for (uint32_t p = g.steps.front() + 1; p <= g.steps.back(); ++p) ok = ok && release[p].empty();
    for (size_t j = 1; j < g.steps.size(); ++j) ok = ok && g.steps[j] == g.steps[0] + j;
    if (!ok)
      for (uint32_t i : g.steps) {
        steps[i].group = -1;
        if (steps[i].rope >= 0) steps[static_cast<size_t>(steps[i].rope)].rope_by = -1, steps[i].rope = -1;
      }
  }
  std::erase_if(groups, [&](const MatmulGroup& g) { return steps[g.steps.front()].group < 0; });
  for (size_t g = 0; g < groups.size(); ++g)
    for (uint32_t i : groups[g].steps) steps[i].group = static_cast<int>(g);
  return {};
}

Val& Executor::Impl::alloc_out(const Step& s, std::span<const int64_t> shape, ir::ElementType type) {
  Val& v = vals[s.out];
  v.type = type;
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = shape[i];
  v.set_contiguous();
  v.hold = nullptr;
  v.writable = false;
  v.buf = s.buf;
  v.data = buffers[s.buf].ensure(std::max<size_t>(1, ir::byte_size(type, v.numel())));
  return v;
}

const Val& Executor::Impl::dense(const Val& v, Buffer& b, Val& tmp) {
  if (v.contiguous()) return v;
  tmp = v;
  tmp.hold = nullptr;
  tmp.buf = -1;
  tmp.set_contiguous();
  const size_t es = ir::scalar_size(v.type);
  tmp.data = b.ensure(static_cast<size_t>(v.numel()) * es);
  exec::copy_strided(v, tmp.data, es);
  return tmp;
}

Status Executor::Impl::reshape(Step& s) {
  const Val& x = in(s, 0);
  const Val& sv = in(s, 1);
  if (!ir::is_integer(sv.type) || sv.rank != 1 || !sv.contiguous() || sv.shape[0] > exec::kMaxRank)
    return make_error(s.node->describe() + ": the target shape must be an integer vector of rank <= 8");
  int64_t target[exec::kMaxRank];
  const int r = static_cast<int>(sv.shape[0]);
  const bool special_zero = s.node->attrs<ir::ReshapeAttrs>().special_zero;
  int64_t known = 1, infer = -1;
  for (int i = 0; i < r; ++i) {
    int64_t d = ir::load_i64(sv.type, sv.data + i * ir::scalar_size(sv.type));
    if (d == 0 && special_zero) d = i < x.rank ? x.shape[i] : 0;
    if (d == -1) {
      if (infer >= 0) return make_error(s.node->describe() + ": two -1 in the target shape");
      infer = i;
      d = 1;
    } else if (d < 0) {
      return make_error(s.node->describe() + ": negative dim " + std::to_string(d) + " in the target shape");
    }
    target[i] = d;
    known *= d;
  }
  if (infer >= 0) target[infer] = known ? x.numel() / known : 0, known *= target[infer];
  if (known != x.numel())
    return make_error(s.node->describe() + ": cannot reshape " + std::to_string(x.numel()) + " elements to " +
                      std::to_string(known));
  Val& o = out(s);
  if (x.contiguous()) {
    uint8_t* data = x.data;
    const ir::Tensor* hold = x.hold;
    const int buf = x.buf;
    const bool w = x.writable;
    o.type = x.type;
    o.rank = r;
    for (int i = 0; i < r; ++i) o.shape[i] = target[i];
    o.set_contiguous();
    o.data = data, o.hold = hold, o.buf = buf, o.writable = w;
    return {};
  }
  Val& y = alloc_out(s, std::span<const int64_t>(target, static_cast<size_t>(r)), x.type);
  Val src = x;
  exec::copy_strided(src, y.data, ir::scalar_size(x.type));
  return {};
}

Status Executor::Impl::exec(Step& s, std::span<const ir::Tensor> params, std::vector<ir::Tensor>* state,
                            std::span<const uint8_t> writable) {
  const ir::Node& n = *s.node;
  bool done = true;
  Status st;
  switch (s.kind) {
    case Kind::constant: return {};
    case Kind::param: {
      const ir::Tensor& t = params[s.param];
      if (t.type() != n.out_type())
        return make_error(n.describe() + ": value is " + std::string(ir::to_string(t.type())) + ", the parameter is " +
                          std::string(ir::to_string(n.out_type())));
      if (t.rank() > static_cast<size_t>(exec::kMaxRank)) return make_error(n.describe() + ": rank above 8");
      Val& v = out(s);
      v = exec::view_of(t);
      v.writable = !writable.empty() && writable[s.param] && t.writable();
      return {};
    }
    case Kind::result: {
      Val v = in(s, 0);
      out(s) = std::move(v);
      return {};
    }
    case Kind::read_value: {
      if (state && !(*state)[s.variable].empty_handle()) {
        out(s) = exec::view_of((*state)[s.variable]);
      } else if (!s.in.empty()) {
        Val v = in(s, 0);
        out(s) = std::move(v);
      } else {
        return make_error(n.describe() + ": variable '" + var_ids[s.variable] + "' has no value and no init input",
                          "set it in the state or give the ReadValue an init input");
      }
      return {};
    }
    case Kind::assign: {
      auto t = exec::to_tensor(in(s, 0), buffers);
      if (!t) return t.error();
      bool pooled = false;  // state outlives the run: never a view of a pool buffer
      for (const Buffer& b : buffers) pooled = pooled || (b.owner && t->owner() == b.owner);
      pending.emplace_back(s.variable, pooled ? t->clone() : *t);
      return {};
    }
    case Kind::reshape: return reshape(s);
    case Kind::squeeze:
    case Kind::unsqueeze: {
      const Val& x = in(s, 0);
      Val y = x;
      const auto& axes = n.attrs<ir::AxesAttrs>().axes;
      if (s.kind == Kind::squeeze) {
        bool drop[exec::kMaxRank] = {};
        for (int64_t a : axes) {
          const int64_t i = normalize(a, x.rank);
          if (i < 0 || i >= x.rank || x.shape[i] != 1) return make_error(n.describe() + ": cannot squeeze axis " + std::to_string(a));
          drop[i] = true;
        }
        y.rank = 0;
        for (int i = 0; i < x.rank; ++i)
          if (!(axes.empty() ? x.shape[i] == 1 : drop[i])) y.shape[y.rank] = x.shape[i], y.stride[y.rank++] = x.stride[i];
      } else {
        const int r = x.rank + static_cast<int>(axes.size());
        if (r > exec::kMaxRank) return make_error(n.describe() + ": rank above 8");
        bool ins[exec::kMaxRank] = {};
        for (int64_t a : axes) {
          const int64_t i = normalize(a, r);
          if (i < 0 || i >= r || ins[i]) return make_error(n.describe() + ": bad unsqueeze axis " + std::to_string(a));
          ins[i] = true;
        }
        y.rank = r;
        for (int i = 0, j = 0; i < r; ++i) {
          if (ins[i]) y.shape[i] = 1, y.stride[i] = 1;
          else y.shape[i] = x.shape[j], y.stride[i] = x.stride[j], ++j;
        }
      }
      out(s) = std::move(y);
      return {};
    }
    case Kind::transpose: {
      const Val& x = in(s, 0);
      Val y = x;
      const auto& perm = n.attrs<ir::TransposeAttrs>().perm;  // empty: reversed
      if (!perm.empty() && static_cast<int>(perm.size()) != x.rank)
        return make_error(n.describe() + ": perm does not match the rank");
      for (int i = 0; i < x.rank; ++i) {
        const int64_t p = perm.empty() ? x.rank - 1 - i : perm[size_t(i)];
        if (p < 0 || p >= x.rank) return make_error(n.describe() + ": perm out of range");
        y.shape[i] = x.shape[p], y.stride[i] = x.stride[p];
      }
      out(s) = std::move(y);
      return {};
    }
    case Kind::slice: {
      const Val& x = in(s, 0);
      const auto& a = n.attrs<ir::SliceAttrs>();
      if (s.axes_rank != x.rank) {  // the ranks of a compiled model do not change: once
        auto axes = ir::slice_axes(a, static_cast<size_t>(x.rank));
        if (!axes) return make_error(n.describe() + ": " + axes.error().what);
        s.axes = std::move(*axes);
        s.axes_rank = x.rank;
      }
      Val y = x;
      for (size_t i = 0; i < s.axes.size(); ++i) {
        const int64_t ax = s.axes[i];
        const ir::SliceAxis sa = ir::slice_axis(x.shape[ax], a.starts[i], a.ends[i], a.steps[i]);
        if (sa.len > 0) y.data += sa.start * x.stride[ax] * static_cast<int64_t>(ir::scalar_size(x.type));
        y.shape[ax] = sa.len;
        y.stride[ax] = x.stride[ax] * sa.step;
      }
      if (ir::is_block(x.type)) return fallback(s);
      out(s) = std::move(y);
      return {};
    }
    case Kind::shape_of: {
      const Val& x = in(s, 0);
      const int64_t r[1] = {x.rank};
      const ir::ElementType t = n.attrs<ir::TypeAttrs>().type;
      Val& y = alloc_out(s, r, t);
      for (int i = 0; i < x.rank; ++i) ir::store_i64(t, y.data + i * ir::scalar_size(t), x.shape[i]);
      return {};
    }
    case Kind::convert: {
      const Val& x = in(s, 0);
      const ir::ElementType t = n.attrs<ir::TypeAttrs>().type;
      Val tmp;
      const Val& d = dense(x, scratch, tmp);
      Val& y = alloc_out(s, std::span<const int64_t>(d.shape, static_cast<size_t>(d.rank)), t);
      const size_t si = ir::scalar_size(d.type), so = ir::scalar_size(t);
      if (d.type == ir::ElementType::f32 || d.type == ir::ElementType::f16) {  // f32 <-> f16 (kernel_registry)
        const bool down = d.type == ir::ElementType::f32;
        pool->parallel_for(d.numel(), 1 << 14, [&](int64_t b, int64_t e, int) {
          if (down) to_f16(isa, d.as<const float>() + b, e - b, y.as<uint16_t>() + b);
          else from_f16(isa, d.as<const uint16_t>() + b, e - b, y.as<float>() + b);
        });
        return {};
      }
      for (int64_t i = 0, e = d.numel(); i < e; ++i) ir::store_i64(t, y.data + i * so, ir::load_i64(d.type, d.data + i * si));
      return {};
    }
    case Kind::matmul: st = matmul(s, &done); break;
    case Kind::glu: return glu(s);
    case Kind::fused: return {};
    case Kind::rmsnorm: st = rmsnorm(s, &done); break;
    case Kind::layernorm: st = layernorm(s, &done); break;
    case Kind::binary: st = binary(s, &done); break;
    case Kind::activation: st = activation(s, &done); break;
    case Kind::rope: st = rope(s, &done); break;
    case Kind::gather_rows: st = gather_rows(s, &done); break;
    case Kind::paged_attention: st = paged_attention(s, &done); break;
    case Kind::sdpa: st = sdpa(s, &done); break;
    case Kind::scatter: st = scatter(s, &done); break;
    case Kind::fallback: done = false; break;
  }
  if (!st) return st;
  if (!done) return fallback(s);
  return {};
}

namespace {
// A reference step's inputs are remembered (and compared) when each is at most this many bytes:
// the shape arithmetic of a graph (the row selection's Range, Gather, Concat), whose inputs are
// the same from one decode step to the next.
constexpr size_t kMemoBytes = 1024;

// `v` is dense, with `t`'s type and shape.
bool same_layout(const Val& v, const ir::Tensor& t) {
  if (t.empty_handle() || v.type != t.type() || static_cast<size_t>(v.rank) != t.rank() || !v.contiguous()) return false;
  for (int i = 0; i < v.rank; ++i)
    if (v.shape[i] != t.shape()[size_t(i)]) return false;
  return true;
}
// ... and holds `t`'s values.
bool same_as(const Val& v, const ir::Tensor& t) { return same_layout(v, t) && std::memcmp(v.data, t.bytes(), t.nbytes()) == 0; }
// ... and is `t`'s bytes: `t` is still the tensor `v` would become.
bool same_view(const Val& v, const ir::Tensor& t) { return same_layout(v, t) && t.bytes() == v.data; }
}  // namespace

Status Executor::Impl::fallback(Step& s) {
  const ir::Node& n = *s.node;
  // The reference kernels are pure: the same small inputs as last time give the same outputs,
  // still held in fallback_out (no evaluation, no allocation).
  bool same = !s.memo_in.empty() && s.memo_in.size() == s.in.size();
  for (size_t i = 0; same && i < s.in.size(); ++i) same = same_as(in(s, i), s.memo_in[i]);
  if (same) {
    for (size_t o = 0; o < n.n_outputs(); ++o) vals[s.out + o] = exec::view_of(fallback_out[s.out + o]);
    s.fallback_run = run_count;
    ++fallbacks;
    return {};
  }
  std::vector<ir::Tensor> args;
  args.reserve(s.in.size());
  for (size_t i = 0; i < s.in.size(); ++i) {
    auto t = exec::to_tensor(in(s, i), buffers);
    if (!t) return make_error(n.describe() + ": " + t.error().what, t.error().hint);
    args.push_back(std::move(*t));
  }
  const auto aliases = ir::op_aliases(n.type());
  for (const ir::OutputAlias& a : aliases)  // the reference kernel writes these: a private copy
    args[a.input] = args[a.input].clone();
  auto r = ir::op_def(n.type()).eval(n, args);
  if (!r) return r.error();
  if (r->size() != n.n_outputs())
    return make_error(n.describe() + ": kernel made " + std::to_string(r->size()) + " outputs, the node has " +
                      std::to_string(n.n_outputs()));
  for (size_t o = 0; o < r->size(); ++o)
    if ((*r)[o].rank() > static_cast<size_t>(exec::kMaxRank)) return make_error(n.describe() + ": rank above 8");
  for (size_t o = 0; o < r->size(); ++o) {
    fallback_out[s.out + o] = std::move((*r)[o]);
    vals[s.out + o] = exec::view_of(fallback_out[s.out + o]);
  }
  s.memo_in.clear();
  bool small = aliases.empty() && !args.empty();
  for (const ir::Tensor& a : args) small = small && !ir::is_block(a.type()) && a.nbytes() <= kMemoBytes;
  if (small)
    for (const ir::Tensor& a : args) s.memo_in.push_back(a.clone());
  s.fallback_run = run_count;
  ++fallbacks;
  return {};
}

// The profile's row for a step: its op, and at GGFLOW_PROFILE=2 a matmul's shape, weight type and
// group (the group's first step times the whole group).
std::string Executor::Impl::profile_key(const Step& s) const {
  std::string key(s.node->type_name());
  if (s.fallback_run == run_count) return key + " (reference)";
  if (profile_detail && s.kind == Kind::matmul) {
    key += " " + std::string(gguf::traits(s.wtype).name) + " " + std::to_string(s.K) + "->" + std::to_string(s.N);
    if (s.group >= 0) key += " (group of " + std::to_string(groups[size_t(s.group)].steps.size()) + ")";
    if (s.packed) key += " packed";
  }
  return key;
}

Result<std::span<const ir::Tensor>> Executor::Impl::run(std::span<const ir::Tensor> params,
                                                        std::vector<ir::Tensor>* state, std::span<const uint8_t> writable) {
  run_params = params;
  if (params.size() != model->parameters().size())
    return make_error("run: got " + std::to_string(params.size()) + " parameter values, the model has " +
                      std::to_string(model->parameters().size()));
  if (state && state->size() != var_ids.size()) state->resize(var_ids.size());
  fallbacks = 0;
  pending.clear();
  ++run_count;
  if (profile) {
    ProfileTable& table = profile_tables[token_param >= 0 ? params[size_t(token_param)].numel() : -1];
    ++table.runs;
    for (Step& s : steps) {
      const auto t0 = std::chrono::steady_clock::now();
      if (auto st = exec(s, params, state, writable); !st) return st.error();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s.kind == Kind::constant) continue;
      auto& e = table.ops[profile_key(s)];  // after the clock: the key's string is not the step's time
      e.first += seconds;
      ++e.second;
    }
  } else {
    for (Step& s : steps)
      if (auto st = exec(s, params, state, writable); !st) return st.error();
  }
  // The results: last run's tensors where they still view the same bytes (the caches, the logits'
  // buffer), so that a decode step allocates nothing.
  results.resize(result_vals.size());
  for (size_t i = 0; i < result_vals.size(); ++i) {
    const Val& v = vals[result_vals[i]];
    if (same_view(v, results[i])) continue;
    auto t = exec::to_tensor(v, buffers);
    if (!t) return t.error();
    results[i] = std::move(*t);
  }
  if (state)
    for (auto& [var, t] : pending) (*state)[var] = std::move(t);
  return std::span<const ir::Tensor>(results);
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() {
  if (!impl_ || !impl_->profile) return;
  for (const auto& [tokens, table] : impl_->profile_tables) {
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (const auto& [op, e] : table.ops) rows.emplace_back(e.first, op), total += e.first;
    std::sort(rows.rbegin(), rows.rend());
    const std::string what = tokens < 0 ? "" : " of " + std::to_string(tokens) + (tokens == 1 ? " token" : " tokens");
    std::fprintf(stderr, "ggflow profile: %lld runs%s, %.3f ms per run\n", static_cast<long long>(table.runs),
                 what.c_str(), 1e3 * total / static_cast<double>(table.runs));
    for (const auto& [t, op] : rows)
      std::fprintf(stderr, "  %-36s %8.3f ms per run  %5.1f%%  (%lld calls)\n", op.c_str(),
                   1e3 * t / static_cast<double>(table.runs), 100 * t / total,
                   static_cast<long long>(table.ops.at(op).second));
  }
}

std::shared_ptr<ThreadPool> make_thread_pool(int threads) {
  if (threads <= 0) threads = usable_cores();
  // A waiting thread prefetches its part of the next matmul job (side_prefetch.h).
  return std::make_shared<ThreadPool>(std::max(1, threads), &idle_prefetch);
}

Result<std::unique_ptr<Executor>> Executor::create(const ir::Model& model, const ExecutorOptions& options) {
  auto isa = isa_from_env();
  if (!isa) return isa.error();
  auto impl = std::make_unique<Impl>();
  impl->isa = *isa;
  const char* prof = std::getenv("GGFLOW_PROFILE");
  impl->profile = prof && (std::string(prof) == "1" || std::string(prof) == "2");
  impl->profile_detail = prof && std::string(prof) == "2";
  const auto& ps = model.parameters();
  for (size_t i = 0; i < ps.size() && impl->token_param < 0; ++i)
    if (ps[i]->name() == "input_ids" || ps[i]->name() == "inp_tokens") impl->token_param = static_cast<int>(i);
  impl->pool = options.pool ? options.pool : make_thread_pool(options.threads);
  if (auto s = impl->compile(model); !s) return s.error();
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Result<std::span<const ir::Tensor>> Executor::run(std::span<const ir::Tensor> parameters,
                                                  std::vector<ir::Tensor>* state, std::span<const uint8_t> writable) {
  return impl_->run(parameters, state, writable);
}
const std::vector<std::string>& Executor::variable_ids() const { return impl_->var_ids; }
Isa Executor::isa() const { return impl_->isa; }
int Executor::threads() const { return impl_->pool->size(); }
int64_t Executor::fallbacks() const { return impl_->fallbacks; }
std::string Executor::plan_summary() const {
  long long matmuls = 0, packed = 0, norms = 0, fused_norms = 0, norm_quants = 0, glus = 0, glu_quants = 0, adds = 0,
            biases = 0, ropes = 0;
  size_t packed_bytes = 0;
  for (const Step& s : impl_->steps) {
    if (s.kind == Kind::matmul) {
      ++matmuls;
      if (s.packed) ++packed, packed_bytes += s.packed->bytes;
      adds += s.add_in >= 0 && !s.add_row;
      biases += s.add_row;
      ropes += s.rope >= 0;
    }
    if (s.kind == Kind::rmsnorm) ++norms, fused_norms += s.in.size() == 2, norm_quants += s.quant_for >= 0;
    if (s.kind == Kind::glu) ++glus, glu_quants += s.quant_for >= 0;
  }
  size_t grouped = 0;
  for (const MatmulGroup& g : impl_->groups) grouped += g.steps.size();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%lld matmuls, %lld on packed weights (%.1f MiB), %zu in %zu groups sharing an input, %lld adding "
                "the residual in their epilogue, %lld their bias, %lld applying the RoPE after them in theirs; %lld "
                "RMSNorm, %lld with the norm weight fused, %lld quantizing for the matmuls after them; %lld activation "
                "x up as one GLU step (%lld quantizing for the matmul after it)",
                matmuls, packed, packed_bytes / 1048576.0, grouped, impl_->groups.size(), adds, biases, ropes, norms,
                fused_norms, norm_quants, glus, glu_quants);
  return buf;
}

std::string Executor::fallback_summary() const {
  std::map<std::string, int64_t> ops;  // built when asked: a run counts its fallbacks without strings
  for (const Step& st : impl_->steps)
    if (st.fallback_run == impl_->run_count && impl_->run_count > 0) ++ops[std::string(st.node->type_name())];
  std::string s;
  for (const auto& [op, n] : ops) s += (s.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  return s.empty() ? "none" : s;
}

}  // namespace ggflow::cpu
