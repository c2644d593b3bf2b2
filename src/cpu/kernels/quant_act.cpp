// The activation quantizer's scalar twin (the specification, see quant_act.h) and its dispatch.
#include "cpu/kernels/quant_act.h"

#include "gguf/dequant.h"
#include "gguf/quantize.h"

#include <cmath>
#include <cstring>
#include <string>

namespace ggflow::cpu {

using gguf::GgmlType;

ActFormat act_format(GgmlType wtype) {
  switch (wtype) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return ActFormat::f32;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0: return ActFormat::qa32;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return ActFormat::qa256;
    default: return ActFormat::unsupported;
  }
}

size_t quant_act_row_bytes(GgmlType wtype, int64_t K) {
  if (K <= 0) return 0;
  switch (act_format(wtype)) {
    case ActFormat::f32: return static_cast<size_t>(K) * 4;
    case ActFormat::qa32: return K % 32 ? 0 : static_cast<size_t>(K / 32) * sizeof(BlockQA32);
    case ActFormat::qa256: return K % 256 ? 0 : static_cast<size_t>(K / 256) * sizeof(BlockQA256);
    case ActFormat::unsupported: return 0;
  }
  return 0;
}

namespace detail {

float f16_round(float x) { return gguf::f16_to_f32(gguf::f32_to_f16(x)); }

float qa256_max(uint32_t amax_bits, bool positive) {
  const uint32_t b = positive ? amax_bits : (amax_bits | 0x80000000u);
  float m;
  std::memcpy(&m, &b, 4);
  return m;
}

namespace {

int8_t quant_one(float x, float id) {
  float v = x * id;
  v = v > -127.0f ? v : -127.0f;
  v = v < 127.0f ? v : 127.0f;
  return static_cast<int8_t>(static_cast<int>(std::nearbyint(v)));
}

}  // namespace

void quant_act_qa32_scalar(const float* x, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, x += 32) {
    BlockQA32 o;
    const float dr = gguf::q8_0_codes(x, o.q);  // d and q are Q8_0's (gguf/quantize.h)
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += o.q[i];
    o.d = f16_round(dr);
    o.s = f16_round(dr * static_cast<float>(sum));
    o.sum = sum;
    o.reserved = 0;
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

void quant_act_qa256_scalar(const float* x, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    BlockQA256 o{};
    const uint32_t amax = gguf::amax_bits(x, 256);  // on the bit patterns of |x| (quant_act.h)
    if (amax != 0) {
      bool positive = false;
      for (int i = 0; i < 256; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &x[i], 4);
        positive = positive || bits == amax;
      }
      const float iscale = -127.0f / qa256_max(amax, positive);
      for (int j = 0; j < 16; ++j) {
        int32_t s = 0;
        for (int i = 0; i < 16; ++i) {
          o.q[16 * j + i] = quant_one(x[16 * j + i], iscale);
          s += o.q[16 * j + i];
        }
        o.bsums[j] = static_cast<int16_t>(s);
      }
      o.d = 1.0f / iscale;
    }
    std::memcpy(out + b * sizeof o, &o, sizeof o);
  }
}

}  // namespace detail

Status quantize_act(Isa isa, GgmlType wtype, const float* x, int64_t K, void* out) {
  return quantize_act_rows(isa, wtype, x, K, 1, K, out, quant_act_row_bytes(wtype, K));
}

Status quantize_act_rows(Isa isa, GgmlType wtype, const float* x, int64_t x_stride, int64_t T, int64_t K, void* out,
                         size_t out_row_bytes) {
  const ActFormat f = act_format(wtype);
  if (f == ActFormat::unsupported)
    return make_error("quantize_act: no matmul kernel for " + std::string(gguf::traits(wtype).name) + " weights",
                      "supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K");
  const size_t rb = quant_act_row_bytes(wtype, K);
  if (rb == 0)
    return make_error("quantize_act: K=" + std::to_string(K) + " is not a positive multiple of the " +
                      std::string(gguf::traits(wtype).name) + " block size " +
                      std::to_string(gguf::traits(wtype).block_size));
  if (T < 0 || out_row_bytes < rb || (T > 1 && x_stride < K))
    return make_error("quantize_act: bad row geometry (T=" + std::to_string(T) + ", x_stride=" +
                      std::to_string(x_stride) + ", out_row_bytes=" + std::to_string(out_row_bytes) + ", need " +
                      std::to_string(rb) + ")");
  if (T == 0) return {};
  if (!x || !out) return make_error("quantize_act: null pointer");
  if (!isa_supported(isa)) return make_error("quantize_act: ISA " + std::string(to_string(isa)) + " not supported here");
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * x_stride;
    uint8_t* o = static_cast<uint8_t*>(out) + t * out_row_bytes;
    if (f == ActFormat::f32) {
      std::memcpy(o, xr, rb);
      continue;
    }
    if (f == ActFormat::qa32) {
      switch (isa) {
        case Isa::scalar: detail::quant_act_qa32_scalar(xr, K / 32, o); break;
        case Isa::avx2: detail::quant_act_qa32_avx2(xr, K / 32, o); break;
        case Isa::avx512: detail::quant_act_qa32_avx512(xr, K / 32, o); break;
      }
    } else {
      switch (isa) {
        case Isa::scalar: detail::quant_act_qa256_scalar(xr, K / 256, o); break;
        case Isa::avx2: detail::quant_act_qa256_avx2(xr, K / 256, o); break;
        case Isa::avx512: detail::quant_act_qa256_avx512(xr, K / 256, o); break;
      }
    }
  }
  return {};
}

}  // namespace ggflow::cpu
