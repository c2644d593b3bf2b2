// matmul: argument checks and ISA dispatch (the arithmetic is in matmul_scalar.cpp, the spec in
// matmul.h).
#include "cpu/kernels/matmul.h"

#include <string>

namespace ggflow::cpu {

using gguf::GgmlType;

bool matmul_supports(GgmlType wtype) { return act_format(wtype) != ActFormat::unsupported; }

Status matmul(Isa isa, GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t K, const void* X,
              size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  if (!matmul_supports(wtype))
    return make_error("matmul: no kernel for " + std::string(gguf::traits(wtype).name) + " weights",
                      "supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K");
  const gguf::TypeTraits& tr = gguf::traits(wtype);
  const size_t xrb = quant_act_row_bytes(wtype, K);
  if (xrb == 0)
    return make_error("matmul: K=" + std::to_string(K) + " is not a positive multiple of the " +
                      std::string(tr.name) + " block size " + std::to_string(tr.block_size));
  const size_t wrb = static_cast<size_t>(K / tr.block_size) * tr.type_size;
  if (w_row_bytes < wrb)
    return make_error("matmul: w_row_bytes=" + std::to_string(w_row_bytes) + " is less than one " +
                      std::string(tr.name) + " row of K=" + std::to_string(K) + " (" + std::to_string(wrb) + " bytes)");
  if (T > 0 && x_row_bytes < xrb)
    return make_error("matmul: x_row_bytes=" + std::to_string(x_row_bytes) + " is less than one activation row (" +
                      std::to_string(xrb) + " bytes)", "quantize activations with quantize_act for this weight type");
  if (T < 0 || n0 < 0 || n1 < n0)
    return make_error("matmul: bad range (T=" + std::to_string(T) + ", rows [" + std::to_string(n0) + ", " +
                      std::to_string(n1) + "))");
  if (T > 1 && ldc < n1)
    return make_error("matmul: ldc=" + std::to_string(ldc) + " is less than n1=" + std::to_string(n1));
  if (T == 0 || n0 == n1) return {};
  if (!W || !X || !C) return make_error("matmul: null pointer");
  if (!isa_supported(isa)) return make_error("matmul: ISA " + std::string(to_string(isa)) + " not supported here");
  const auto* x = static_cast<const uint8_t*>(X);
  switch (isa) {
    case Isa::scalar: detail::matmul_scalar(wtype, W, w_row_bytes, K, x, x_row_bytes, T, C, ldc, n0, n1); break;
    case Isa::avx2: detail::matmul_avx2(wtype, W, w_row_bytes, K, x, x_row_bytes, T, C, ldc, n0, n1); break;
    case Isa::avx512: detail::matmul_avx512(wtype, W, w_row_bytes, K, x, x_row_bytes, T, C, ldc, n0, n1); break;
  }
  return {};
}

}  // namespace ggflow::cpu
