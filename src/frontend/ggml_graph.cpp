// GGML's shape rules for the ops of ggml_op.h (see ggml.c for the originals).
#include "frontend/ggml_graph.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace ggflow::frontend {

namespace {
constexpr std::string_view kOpNames[] = {
#define X(n) #n,
    GGFLOW_GGML_OPS(X)
#undef X
};
}  // namespace

std::string_view to_string(GgmlOp op) { return kOpNames[static_cast<int>(op)]; }
std::string_view to_string(GgmlUnary op) {
  switch (op) {
    case GgmlUnary::SILU: return "SILU";
    case GgmlUnary::GELU: return "GELU";
    case GgmlUnary::GELU_ERF: return "GELU_ERF";
    case GgmlUnary::TANH: return "TANH";
  }
  return "?";
}
std::string_view to_string(GgmlGlu op) {
  switch (op) {
    case GgmlGlu::SWIGLU: return "SWIGLU";
    case GgmlGlu::GEGLU: return "GEGLU";
    case GgmlGlu::GEGLU_ERF: return "GEGLU_ERF";
  }
  return "?";
}

Ext GgmlGraph::symbol(const std::string& name) {
  auto it = std::find(symbols_.begin(), symbols_.end(), name);
  if (it != symbols_.end()) return Ext::symbol(static_cast<int>(it - symbols_.begin()) + 1);
  symbols_.push_back(name);
  return Ext::symbol(static_cast<int>(symbols_.size()));
}

std::string GgmlGraph::ext_str(const Ext& e) const {
  if (e.is_static()) return std::to_string(e.n);
  return e.sym >= 1 && e.sym <= static_cast<int>(symbols_.size()) ? symbols_[e.sym - 1] : "?";
}
std::string GgmlGraph::ne_str(const Ne& ne) const {
  return "[" + ext_str(ne[0]) + ", " + ext_str(ne[1]) + ", " + ext_str(ne[2]) + ", " + ext_str(ne[3]) + "]";
}

int GgmlGraph::push(GgmlTensor t) {
  t.id = static_cast<int>(tensors_.size());
  if (t.name.empty()) t.name = std::string(to_string(t.op)) + "_" + std::to_string(t.id);
  tensors_.push_back(std::move(t));
  return tensors_.back().id;
}

int GgmlGraph::op(GgmlOp o, GgmlType type, Ne ne, std::vector<int> src, GgmlParams p) {
  GgmlTensor t;
  t.op = o;
  t.type = type;
  t.ne = ne;
  t.src = std::move(src);
  t.params = std::move(p);
  return push(std::move(t));
}

void GgmlGraph::fail(GgmlOp o, const std::string& what) {
  if (status_) status_ = make_error("ggml " + std::string(to_string(o)) + " #" + std::to_string(tensors_.size()) + ": " + what,
                                    "the model's tensor shapes do not fit its architecture's graph");
}

bool GgmlGraph::can_repeat(const Ne& s, const Ne& b) const {  // ggml_can_repeat(s, b)
  for (int i = 0; i < 4; ++i) {
    if (s[i] == b[i] || s[i].is(1)) continue;
    if (s[i].is_static() && b[i].is_static() && s[i].n > 0 && b[i].n % s[i].n == 0) continue;
    return false;
  }
  return true;
}

bool GgmlGraph::same_numel(const Ne& a, const Ne& b) const {
  int64_t pa = 1, pb = 1;
  std::multiset<int> sa, sb;
  for (const Ext& e : a) e.is_static() ? (void)(pa *= e.n) : (void)sa.insert(e.sym);
  for (const Ext& e : b) e.is_static() ? (void)(pb *= e.n) : (void)sb.insert(e.sym);
  return pa == pb && sa == sb;
}

int GgmlGraph::input(const std::string& name, GgmlType type, Ne ne) {
  GgmlTensor t;
  t.name = name;
  t.type = type;
  t.ne = ne;
  t.leaf = LeafKind::input;
  int id = push(std::move(t));
  inputs_.push_back(id);
  return id;
}

int GgmlGraph::weight(const gguf::TensorInfo& info, std::span<const uint8_t> data) {
  Ne ne{1, 1, 1, 1};
  for (size_t i = 0; i < info.ne.size() && i < 4; ++i) ne[i] = static_cast<int64_t>(info.ne[i]);
  GgmlTensor t;
  t.name = std::string(info.name);
  t.type = info.type;
  t.ne = ne;
  t.n_dims = std::max<int>(1, static_cast<int>(info.ne.size()));
  t.leaf = LeafKind::weight;
  t.data = data;
  return push(std::move(t));
}

int GgmlGraph::weight(const std::string& name, GgmlType type, Ne ne, int n_dims, std::span<const uint8_t> data,
                      std::shared_ptr<const void> owner) {
  GgmlTensor t;
  t.name = name;
  t.type = type;
  t.ne = ne;
  t.n_dims = n_dims;
  t.leaf = LeafKind::weight;
  t.data = data;
  if (owner) owners_.push_back(std::move(owner));
  return push(std::move(t));
}

int GgmlGraph::get_rows(int a, int b) {
  const Ne &A = tensor(a).ne, &B = tensor(b).ne;
  if (!(A[2] == B[1]) || !B[3].is(1) || (tensor(b).type != GgmlType::I32 && tensor(b).type != GgmlType::I64))
    fail(GgmlOp::GET_ROWS, "table " + ne_str(A) + " and indices " + ne_str(B) + " do not fit (a.ne2 == b.ne1, integer indices)");
  GgmlType t = tensor(a).type == GgmlType::I32 ? GgmlType::I32 : GgmlType::F32;
  return op(GgmlOp::GET_ROWS, t, {A[0], B[0], B[1], B[2]}, {a, b});
}

int GgmlGraph::mul_mat(int a, int b) {
  const Ne &A = tensor(a).ne, &B = tensor(b).ne;
  bool ok = A[0] == B[0];
  for (int i = 2; i < 4; ++i)
    ok = ok && (A[i] == B[i] || A[i].is(1) || (A[i].is_static() && B[i].is_static() && B[i].n % A[i].n == 0));
  if (!ok) fail(GgmlOp::MUL_MAT, "a " + ne_str(A) + " and b " + ne_str(B) + " do not fit (a.ne0 == b.ne0, b.ne2/3 multiples of a's)");
  return op(GgmlOp::MUL_MAT, GgmlType::F32, {A[1], B[1], B[2], B[3]}, {a, b});
}

int GgmlGraph::add(int a, int b) {
  if (!can_repeat(tensor(b).ne, tensor(a).ne)) fail(GgmlOp::ADD, ne_str(tensor(b).ne) + " does not repeat to " + ne_str(tensor(a).ne));
  return op(GgmlOp::ADD, tensor(a).type, tensor(a).ne, {a, b});
}
int GgmlGraph::mul(int a, int b) {
  if (!can_repeat(tensor(b).ne, tensor(a).ne)) fail(GgmlOp::MUL, ne_str(tensor(b).ne) + " does not repeat to " + ne_str(tensor(a).ne));
  return op(GgmlOp::MUL, tensor(a).type, tensor(a).ne, {a, b});
}
int GgmlGraph::scale(int a, float s, float b) { return op(GgmlOp::SCALE, tensor(a).type, tensor(a).ne, {a}, ScaleParams{s, b}); }
int GgmlGraph::rms_norm(int a, float eps) { return op(GgmlOp::RMS_NORM, tensor(a).type, tensor(a).ne, {a}, NormParams{eps}); }
int GgmlGraph::norm(int a, float eps) { return op(GgmlOp::NORM, tensor(a).type, tensor(a).ne, {a}, NormParams{eps}); }

int GgmlGraph::rope(int a, int pos, std::optional<int> ff, const RopeParams& p) {
  const Ne &A = tensor(a).ne, &P = tensor(pos).ne;
  if (!(P[0] == A[2]) || tensor(pos).type != GgmlType::I32)
    fail(GgmlOp::ROPE, "positions " + ne_str(P) + " must be i32 with ne0 = x.ne2 of " + ne_str(A));
  if (p.n_dims <= 0 || p.n_dims % 2 || (A[0].is_static() && p.n_dims > A[0].n))
    fail(GgmlOp::ROPE, "n_dims " + std::to_string(p.n_dims) + " must be even and at most the head size " + ext_str(A[0]));
  std::vector<int> src{a, pos};
  if (ff) src.push_back(*ff);
  return op(GgmlOp::ROPE, tensor(a).type, A, src, p);
}

int GgmlGraph::soft_max(int a, std::optional<int> mask, float scale, float max_bias) {
  std::vector<int> src{a};
  if (mask) {
    const Ne &A = tensor(a).ne, &M = tensor(*mask).ne;
    if (!(M[0] == A[0]) || !(M[1] == A[1]) || !can_repeat(Ne{M[0], M[1], M[2], M[3]}, A))
      fail(GgmlOp::SOFT_MAX, "mask " + ne_str(M) + " does not fit scores " + ne_str(A));
    src.push_back(*mask);
  }
  return op(GgmlOp::SOFT_MAX, tensor(a).type, tensor(a).ne, src, SoftMaxParams{scale, max_bias});
}

int GgmlGraph::view(int a, Ne ne, std::array<int64_t, 4> nb, int64_t offset) {
  return op(GgmlOp::VIEW, tensor(a).type, ne, {a}, ViewParams{nb, offset});
}

int GgmlGraph::reshape(int a, Ne ne) {
  if (!same_numel(tensor(a).ne, ne)) fail(GgmlOp::RESHAPE, ne_str(tensor(a).ne) + " cannot become " + ne_str(ne));
  return op(GgmlOp::RESHAPE, tensor(a).type, ne, {a});
}

int GgmlGraph::permute(int a, int ax0, int ax1, int ax2, int ax3) {
  std::array<int, 4> ax{ax0, ax1, ax2, ax3};
  std::array<int, 4> sorted = ax;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::array<int, 4>{0, 1, 2, 3}) fail(GgmlOp::PERMUTE, "axes are not a permutation of 0..3");
  const Ne& A = tensor(a).ne;
  Ne ne{1, 1, 1, 1};
  for (int i = 0; i < 4; ++i) ne[ax[i] & 3] = A[i];
  return op(GgmlOp::PERMUTE, tensor(a).type, ne, {a}, PermuteParams{ax});
}

int GgmlGraph::transpose(int a) {
  const Ne& A = tensor(a).ne;
  return op(GgmlOp::TRANSPOSE, tensor(a).type, {A[1], A[0], A[2], A[3]}, {a});
}
int GgmlGraph::cont(int a) { return op(GgmlOp::CONT, tensor(a).type, tensor(a).ne, {a}); }

int GgmlGraph::cpy(int a, int b) {
  if (!same_numel(tensor(a).ne, tensor(b).ne)) fail(GgmlOp::CPY, ne_str(tensor(a).ne) + " does not fit " + ne_str(tensor(b).ne));
  return op(GgmlOp::CPY, tensor(b).type, tensor(b).ne, {a, b});
}

int GgmlGraph::cast(int a, GgmlType t) { return op(GgmlOp::CPY, t, tensor(a).ne, {a}); }

int GgmlGraph::set_rows(int dst, int rows, int idx) {
  const Ne &D = tensor(dst).ne, &R = tensor(rows).ne, &I = tensor(idx).ne;
  if (!(D[0] == R[0]) || !(I[0] == R[1]) || !R[2].is(1) || !R[3].is(1) || !D[2].is(1) || !D[3].is(1) ||
      (tensor(idx).type != GgmlType::I64 && tensor(idx).type != GgmlType::I32))
    fail(GgmlOp::SET_ROWS, "rows " + ne_str(R) + " with indices " + ne_str(I) + " do not fit destination " + ne_str(D) +
                               " (2-D rows of the same width, one integer index per row)");
  return op(GgmlOp::SET_ROWS, tensor(dst).type, D, {dst, rows, idx});
}

int GgmlGraph::glu_split(GgmlGlu g, int gate, int up) {
  if (!(tensor(gate).ne == tensor(up).ne)) fail(GgmlOp::GLU, "gate " + ne_str(tensor(gate).ne) + " and up " + ne_str(tensor(up).ne) + " differ");
  return op(GgmlOp::GLU, tensor(gate).type, tensor(gate).ne, {gate, up}, GluParams{g, false});
}
int GgmlGraph::glu(GgmlGlu g, int a, bool swapped) {
  Ne ne = tensor(a).ne;
  if (!ne[0].is_static() || ne[0].n % 2) fail(GgmlOp::GLU, "ne0 of " + ne_str(ne) + " must be static and even");
  ne[0] = ne[0].n / 2;
  return op(GgmlOp::GLU, tensor(a).type, ne, {a}, GluParams{g, swapped});
}
int GgmlGraph::unary(GgmlUnary u, int a) { return op(GgmlOp::UNARY, tensor(a).type, tensor(a).ne, {a}, UnaryParams{u}); }

int GgmlGraph::flash_attn_ext(int q, int k, int v, std::optional<int> mask, float scale, float max_bias, float softcap) {
  const Ne &Q = tensor(q).ne, &K = tensor(k).ne, &V = tensor(v).ne;
  bool ok = Q[0] == K[0] && K[1] == V[1] && K[2] == V[2] && Q[3] == K[3] &&
            (Q[2] == K[2] || (Q[2].is_static() && K[2].is_static() && K[2].n > 0 && Q[2].n % K[2].n == 0));
  if (!ok) fail(GgmlOp::FLASH_ATTN_EXT, "q " + ne_str(Q) + ", k " + ne_str(K) + ", v " + ne_str(V) + " do not fit");
  std::vector<int> src{q, k, v};
  if (mask) {
    const Ne& M = tensor(*mask).ne;
    if (!(M[0] == K[1]) || !(M[1] == Q[1])) fail(GgmlOp::FLASH_ATTN_EXT, "mask " + ne_str(M) + " must be [KV, T] = [" + ext_str(K[1]) + ", " + ext_str(Q[1]) + "]");
    src.push_back(*mask);
  }
  return op(GgmlOp::FLASH_ATTN_EXT, GgmlType::F32, {V[0], Q[2], Q[1], Q[3]}, src, FlashAttnParams{scale, max_bias, softcap});
}

int GgmlGraph::concat(int a, int b, int dim) {
  const Ne &A = tensor(a).ne, &B = tensor(b).ne;
  Ne ne = A;
  bool ok = dim >= 0 && dim < 4;
  for (int i = 0; ok && i < 4; ++i) ok = i == dim || A[i] == B[i];
  if (ok && (!A[dim].is_static() || !B[dim].is_static())) ok = false;
  if (!ok) fail(GgmlOp::CONCAT, ne_str(A) + " and " + ne_str(B) + " do not concatenate along " + std::to_string(dim));
  else ne[dim] = A[dim].n + B[dim].n;
  return op(GgmlOp::CONCAT, tensor(a).type, ne, {a, b}, ConcatParams{dim});
}

const GgmlTensor* GgmlGraph::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string GgmlGraph::dump() const {
  std::ostringstream os;
  for (const auto& t : tensors_) {
    os << "#" << t.id << " " << (t.leaf == LeafKind::input ? "INPUT" : t.leaf == LeafKind::weight ? "WEIGHT" : to_string(t.op))
       << " " << t.name << " " << gguf::traits(t.type).name << " " << ne_str(t.ne);
    for (size_t i = 0; i < t.src.size(); ++i) os << (i ? ", #" : " <- #") << t.src[i];
    os << "\n";
  }
  for (const auto& o : outputs_) os << "output " << o.name << " = #" << o.id << "\n";
  return os.str();
}

}  // namespace ggflow::frontend
