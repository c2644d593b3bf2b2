// MatMul(a [..., M, K], b [..., K, N]) -> [..., M, N], transposes per attribute, batch dims
// broadcast numpy-style. `b` may be a GGUF block-type weight [..., N, K] (transpose_b = true,
// quantized along K): each row of b is dequantized with gguf::dequantize and every output element
// is one f32 dot product accumulated in order k = 0..K-1, so a row's result never depends on the
// other rows of the batch.
#include <cstdint>
#include <vector>

#include "gguf/dequant.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

Ports infer_MatMul(InferCtx& c) {
  const auto& at = c.attrs<MatMulAttrs>();
  ElementType ta = c.type(0), tb = c.type(1);
  if (!is_float(ta)) return fail("input a must be f32, f16 or bf16, not " + std::string(to_string(ta)));
  if (!is_float(tb) && !is_block(tb)) return fail("input b must be a float or block type, not " + std::string(to_string(tb)));
  if (is_block(tb) && !at.transpose_b)
    return fail("a " + std::string(to_string(tb)) + " weight must be used with transpose_b (rows [N, K], blocks along K)");
  const Shape &a = c.shape(0), &b = c.shape(1);
  if (!a.rank_known() || !b.rank_known()) return std::vector<PortType>{{ta, Shape::dynamic_rank()}};
  if (a.rank() < 2 || b.rank() < 2) return fail("inputs need rank >= 2, got " + a.str() + " and " + b.str());
  size_t ra = a.rank(), rb = b.rank();
  Dim m = at.transpose_a ? a[ra - 1] : a[ra - 2], ka = at.transpose_a ? a[ra - 2] : a[ra - 1];
  Dim kb = at.transpose_b ? b[rb - 1] : b[rb - 2], n = at.transpose_b ? b[rb - 2] : b[rb - 1];
  if (!same_or_dynamic(ka, kb))
    return fail("inner dims differ: a " + a.str() + " has K=" + ka.str() + ", b " + b.str() + " has K=" + kb.str(),
                "check transpose_a / transpose_b");
  auto batch = broadcast_shapes(c, {Shape(std::vector<Dim>(a.dims().begin(), a.dims().end() - 2)),
                                    Shape(std::vector<Dim>(b.dims().begin(), b.dims().end() - 2))});
  if (!batch) return batch.error();
  std::vector<Dim> out = batch->dims();
  out.push_back(m);
  out.push_back(n);
  return std::vector<PortType>{{ta, Shape(out)}};
}

Outs eval_MatMul(const Node& node, std::span<const Tensor> in) {
  const auto& at = node.attrs<MatMulAttrs>();
  const auto &as = in[0].shape(), &bs = in[1].shape();
  size_t ra = as.size(), rb = bs.size();
  int64_t M = at.transpose_a ? as[ra - 1] : as[ra - 2], K = at.transpose_a ? as[ra - 2] : as[ra - 1];
  int64_t KB = at.transpose_b ? bs[rb - 1] : bs[rb - 2], N = at.transpose_b ? bs[rb - 2] : bs[rb - 1];
  if (K != KB) return kernel_error(node, "inner dims differ: " + std::to_string(K) + " vs " + std::to_string(KB));
  std::vector<int64_t> ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = broadcast_static({ba, bb});
  if (!batch) return kernel_error(node, batch.error().what);
  auto mapa = broadcast_map(*batch, ba), mapb = broadcast_map(*batch, bb);
  std::vector<int64_t> out = *batch;
  out.push_back(M);
  out.push_back(N);
  // f32 operands are read in place (weights straight from the file's mapping); others converted.
  std::vector<float> a_conv, b_conv, y(static_cast<size_t>(product(out)));
  auto f32_aligned = [](const Tensor& t) {
    return t.type() == ElementType::f32 && reinterpret_cast<uintptr_t>(t.bytes()) % alignof(float) == 0;
  };
  const bool a_f32 = f32_aligned(in[0]), block = is_block(in[1].type()), b_f32 = f32_aligned(in[1]);
  if (!a_f32) a_conv = in[0].to_f32();
  if (!block && !b_f32) b_conv = in[1].to_f32();
  const float* a_data = a_f32 ? in[0].data<float>() : a_conv.data();
  const float* b_data = b_f32 ? in[1].data<float>() : b_conv.data();
  std::vector<float> wrow(static_cast<size_t>(K));
  size_t row_bytes = block ? byte_size(in[1].type(), K) : 0;
  for (size_t p = 0; p < mapa.size(); ++p) {
    const float* A = a_data + mapa[p] * M * K;
    float* Y = y.data() + p * M * N;
    for (int64_t n = 0; n < N; ++n) {
      if (block) {  // row n of the [N, K] weight
        const uint8_t* src = in[1].bytes() + (mapb[p] * N + n) * row_bytes;
        Status st = gguf::dequantize(*to_ggml(in[1].type()), {src, row_bytes}, static_cast<uint64_t>(K), wrow.data());
        if (!st) return kernel_error(node, st.error().what);
      } else {
        const float* B = b_data + mapb[p] * K * N;
        for (int64_t k = 0; k < K; ++k) wrow[k] = at.transpose_b ? B[n * K + k] : B[k * N + n];
      }
      for (int64_t m = 0; m < M; ++m) {
        float acc = 0.0f;
        if (at.transpose_a)
          for (int64_t k = 0; k < K; ++k) acc += A[k * M + m] * wrow[k];
        else
          for (int64_t k = 0; k < K; ++k) acc += A[m * K + k] * wrow[k];
        Y[m * N + n] = acc;
      }
    }
  }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), out, y)};
}

}  // namespace ggflow::ir
